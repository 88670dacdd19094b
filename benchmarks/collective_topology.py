"""Topology and collective schedule chosen together: the proven-optimal finish per (servers, degree, collective) next to the ring.

For each (servers, degree) and collective (AllGather, AllReduce as ReduceScatter + AllGather),
``models.collective_topology.solve_joint_collective`` chooses the degree-d topology (undirected,
regular, parallel links allowed) and its schedule, one chunk per server by default: the known
designs (complete graph, hypercube, the circulant of smallest diameter, TopoOpt's circulant, the
catalogue's regular graph of smallest diameter) each scheduled exactly, then the joint MILP probed
at every horizon from the class-wide floor up to their best. ``status`` optimal: no topology of the class finishes in fewer steps. The schedule is
replayed by ``evaluation.collective_check`` at both sizes, the topology's degrees are checked by
``evaluation.degree_check``, and ``bound`` is the independent lower bound on the chosen topology.
``ring`` is the ring schedule on the same design. Finish times are steps x (alpha + chunk bytes /
bandwidth) at a latency-bound size (``--small``, 1 MB) and a bandwidth-bound one (``--large``, 1 GB).

A second table (``--alone-chunks``) runs the joint MILP alone (no known design as the upper end)
on the same (servers, degree) classes for AllGather: the topology it finds, and, as a check on the
model rather than on the floor, the model at one step less proven infeasible (``below``).

A third table (``--design-servers``) does the same for larger clusters with the known designs
only, each scheduled by the exact method under ``--time-limit`` and shown with its bound.

Usage: python benchmarks/collective_topology.py [--servers 4 6 8] [--degrees 2 3 4] [--chunks 1]
       [--time-limit 30] [--alone-chunks 1 2] [--design-servers 16 32 64] [--design-degrees 3 4]
"""

from __future__ import annotations

import argparse
import time

from _results import Record, add_out_argument

from topoopt_ilp.core.collective import Collective, CollectiveSchedule, LinkModel
from topoopt_ilp.errors import InputError
from topoopt_ilp.evaluation.collective_check import check_schedule
from topoopt_ilp.evaluation.degree_check import degree_violations
from topoopt_ilp.heuristic.collective import chunk_demand
from topoopt_ilp.models.collective import solve_collective
from topoopt_ilp.models.collective_topology import build_joint_model, schedule_designs, solve_joint_collective
from topoopt_ilp.models.common import ExactOptions, run_model, solution_status

KINDS = ("allgather", "allreduce")


def ring_steps(topology, collective: Collective, link: LinkModel) -> int | None:
    """The ring schedule's steps on ``topology`` (checked by solve_collective), None without a ring."""
    try:
        return solve_collective(topology, collective, link, method="ring").steps
    except InputError:  # no ring through every server
        return None


def checked_at(topology, collective: Collective, link: LinkModel, schedule: CollectiveSchedule, size: float) -> float:
    """The schedule's finish time at ``size`` bytes, replayed by the independent checker at that size."""
    resized = Collective(collective.kind, collective.servers, size, collective.chunks)
    at_size = CollectiveSchedule(schedule.sends, link.step_s(resized.chunk_bytes), schedule.steps)
    report = check_schedule(topology, resized, link, at_size)
    assert report.valid, report.violations[0]
    return report.finish_s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--servers", type=int, nargs="+", default=[4, 6, 8])
    ap.add_argument("--degrees", type=int, nargs="+", default=[2, 3, 4])
    ap.add_argument("--chunks", type=int, default=1, help="chunks per server")
    ap.add_argument("--small", type=float, default=1e6, help="latency-bound size, bytes")
    ap.add_argument("--large", type=float, default=1e9, help="bandwidth-bound size, bytes")
    ap.add_argument("--alpha", type=float, default=1e-6, help="seconds per hop")
    ap.add_argument("--bandwidth", type=float, default=12.5e9, help="bytes per second per link (12.5e9: 100 Gbps)")
    ap.add_argument(
        "--time-limit", type=float, default=30.0, help="seconds per joint solve; per (n, d) of the design table"
    )
    ap.add_argument("--alone-chunks", type=int, nargs="*", default=[1, 2], help="none: no joint-model-alone table")
    ap.add_argument("--design-servers", type=int, nargs="*", default=[16, 32, 64], help="none: no design table")
    ap.add_argument("--design-degrees", type=int, nargs="+", default=[3, 4])
    add_out_argument(ap)
    args = ap.parse_args()
    record = Record(args)
    link = LinkModel(args.alpha, args.bandwidth)
    options = ExactOptions(time_limit_s=args.time_limit, threads=1)
    t = record.table(
        f"Joint optimum vs ring on the same design, {args.chunks} chunk(s) per server, alpha {args.alpha * 1e6:g} us, "
        f"{args.bandwidth * 8 / 1e9:g} Gbps links, HiGHS 1 thread",
        [
            ("n", ">3"),
            ("d", ">2"),
            ("collective", "<10"),
            ("design", "<40"),
            ("steps", ">5"),
            ("status", "<8"),
            ("floor", ">5"),
            ("bound", ">5"),
            ("ring", ">4"),
            ("small_us", ">9.1f"),
            ("ring_small_us", ">13.1f"),
            ("large_ms", ">9.2f"),
            ("ring_large_ms", ">13.2f"),
            ("probes", ">6"),
            ("solve_s", ">7.2f"),
        ],
    )
    print(t.header())
    for n in args.servers:
        for d in args.degrees:
            if d >= n or (n * d) % 2:
                continue
            for kind in KINDS:
                coll = Collective(kind, tuple(range(n)), args.small, args.chunks)
                r = solve_joint_collective(coll, d, link, options=options)
                assert not degree_violations(r.topology.matrix, d, directed=False, regular=True)
                ring = ring_steps(r.topology, coll, link)
                sizes = (args.small, args.large)
                finish = [checked_at(r.topology, coll, link, r.result.schedule, s) for s in sizes]
                ring_finish = [None if ring is None else ring * link.step_s(s / (n * args.chunks)) for s in sizes]
                floor = r.floor_steps * (2 if kind == "allreduce" else 1)
                row = (n, d, kind, r.design, r.result.steps, r.status, floor, r.result.bound.steps, ring)
                times = (finish[0] * 1e6, _scaled(ring_finish[0], 1e6), finish[1] * 1e3, _scaled(ring_finish[1], 1e3))
                print(t.add(*row, *times, len(r.probes), r.solve_s), flush=True)
    t.note(
        "floor: steps every degree-d topology needs (AllReduce: twice the AllGather floor); bound: the independent "
        "bound on the chosen design; probes: joint-model solves (0: a known design met the floor)."
    )
    if args.alone_chunks:
        alone_table(record, args, link, options)
    if args.design_servers:
        designs_table(record, args, link, options)
    record.write()


def _scaled(value: float | None, factor: float) -> float | None:
    return None if value is None else value * factor


def alone_table(record: Record, args: argparse.Namespace, link: LinkModel, options: ExactOptions) -> None:
    t = record.table(
        f"The joint MILP alone (no known design), AllGather, HiGHS 1 thread, {args.time_limit:g} s per solve",
        [
            ("n", ">3"),
            ("d", ">2"),
            ("chunks", ">6"),
            ("steps", ">5"),
            ("status", "<8"),
            ("floor", ">5"),
            ("probes", ">6"),
            ("solve_s", ">7.2f"),
            ("below", "<10"),
            ("below_s", ">7.2f"),
            ("columns", ">7"),
        ],
    )
    print(t.header())
    for n in args.servers:
        for d in args.degrees:
            if d >= n or (n * d) % 2:
                continue
            for k in args.alone_chunks:
                coll = Collective("allgather", tuple(range(n)), args.small, k)
                r = solve_joint_collective(coll, d, link, options=options, designs=False)
                assert check_schedule(r.topology, coll, link, r.result.schedule).finish_step == r.result.steps
                origin, sinks = chunk_demand(coll, n)
                below, below_s = "-", None
                if r.result.steps > 1:
                    started = time.perf_counter()
                    jm = build_joint_model(
                        n, d, origin, sinks, r.result.steps - 1, floor=r.result.steps - 1, integral_holds=False
                    )
                    below = solution_status(run_model(jm.model, options))
                    below_s = time.perf_counter() - started
                columns = build_joint_model(n, d, origin, sinks, r.result.steps, integral_holds=False).model.num_vars
                row = (
                    n,
                    d,
                    k,
                    r.result.steps,
                    r.status,
                    r.floor_steps,
                    len(r.probes),
                    r.solve_s,
                    below,
                    below_s,
                    columns,
                )
                print(t.add(*row), flush=True)
    t.note(
        "below: the joint model at one step less than the optimum (every step used); columns: the model at the optimum."
    )


def designs_table(record: Record, args: argparse.Namespace, link: LinkModel, options: ExactOptions) -> None:
    t = record.table(
        f"Larger clusters: the known designs, each scheduled exactly ({args.time_limit:g} s split among them), AllGather, "
        f"{args.chunks} chunk(s) per server",
        [
            ("n", ">3"),
            ("d", ">2"),
            ("design", "<44"),
            ("steps", ">5"),
            ("bound", ">5"),
            ("status", "<8"),
            ("ring", ">4"),
            ("small_us", ">9.1f"),
            ("large_ms", ">9.2f"),
            ("solve_s", ">7.2f"),
        ],
    )
    print(t.header())
    for n in args.design_servers:
        for d in args.design_degrees:
            coll = Collective("allgather", tuple(range(n)), args.small, args.chunks)
            for design in schedule_designs(coll, d, link, options=options):
                res = design.result
                ring = ring_steps(design.topology, coll, link)
                small = checked_at(design.topology, coll, link, res.schedule, args.small)
                large = checked_at(design.topology, coll, link, res.schedule, args.large)
                row = (
                    n,
                    d,
                    design.name,
                    res.steps,
                    res.bound_steps,
                    res.status,
                    ring,
                    small * 1e6,
                    large * 1e3,
                    res.solve_s,
                )
                print(t.add(*row), flush=True)
    t.note("bound: the better of the exact model's bound and the independent bound on that design.")


if __name__ == "__main__":
    main()
