"""``topoopt collective INSTANCE SOLUTION``: schedule one collective chunk by chunk on a design
(docs/guide/collectives.md).

Registered by :func:`add_subcommand` on the ``topoopt`` sub-command parser. The topology is the
solution's design, verified against the instance first; the participants every server (or
``--servers``); the link model the instance's cluster (alpha = hop latency, the link bandwidth). Prints
per method (``--method all``: ring, greedy, exact) the finish time, steps, algorithm bandwidth,
status, bound and gap, and solve time. ``-o`` writes the best schedule
(:mod:`topoopt_ilp.models.collective_file`). Exit codes (docs/guide/cli.md): 0 a schedule, 2 bad input
or usage; every method gives a schedule (the exact one falls back to the greedy schedule at its
time limit), so 4 does not arise.

``--to msccl -o ALGO.xml`` writes the schedule as an MSCCL algorithm instead,
once the independent MSCCL checker has run it. ``--joint`` takes no SOLUTION: it chooses the
topology of the instance's cluster and the schedule together (``solve_joint_collective`` up to
:data:`JOINT_MODEL_SERVERS` servers, else the known designs each scheduled) and with ``-o`` writes
the design (``--design-out``) beside the schedule.

``--check SCHEDULE.json`` instead reads a file written by ``-o``, refuses it unless the instance and
solution files are those it was made from (their SHA-256), and replays it with the independent
checker, checking each claim: exit 0 valid, 1 a violation (the first is printed), 2 a malformed
file or other inputs.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from topoopt_ilp.cli.arguments import nonneg_float, pos_float, pos_int, server_ids
from topoopt_ilp.cli.output import fmt_time, report_check
from topoopt_ilp.cli.schedule import check_made_from, load_design
from topoopt_ilp.errors import EXIT_OK, InputError

__all__ = ["add_subcommand", "collective_file_violations", "run_collective"]

#: ``--joint`` solves the joint topology-and-schedule model up to this many servers (its proofs reach
#: about 8 in seconds, docs/guide/collectives.md); above it, the known designs are each scheduled.
JOINT_MODEL_SERVERS = 8

#: ``--method all`` in the order the table shows them; "greedy" is the API's method "heuristic".
ALL_METHODS = ("ring", "heuristic", "exact")
_LABEL = {"ring": "ring", "heuristic": "greedy", "exact": "exact"}


def add_subcommand(sub: Any) -> argparse.ArgumentParser:
    """Register ``collective`` on ``sub`` (the object ``ArgumentParser.add_subparsers`` returned)."""
    p = sub.add_parser(
        "collective",
        help="schedule one collective (AllGather, AllReduce, ...) chunk by chunk on a design",
        description="Choose per step which chunk each link of the solution's topology carries for one "
        "collective over its servers (alpha-beta model from the instance's cluster): exactly (a "
        "time-expanded MILP), greedily, or as the ring schedule; prints finish time, steps, algorithm "
        "bandwidth, status, bound and gap per method.",
    )
    p.add_argument(
        "instance",
        metavar="INSTANCE",
        nargs="?",
        default=None,
        help="an instance (its cluster and fixed topology give the link model; none with --topology)",
    )
    p.add_argument(
        "solution",
        metavar="SOLUTION",
        nargs="?",
        default=None,
        help="a solution file whose topology is scheduled (none with --joint)",
    )
    p.add_argument(
        "--collective",
        choices=("allgather", "reducescatter", "allreduce", "alltoall", "broadcast"),
        default=None,
        help="the collective (required unless --check)",
    )
    p.add_argument(
        "--bytes",
        type=pos_float,
        default=None,
        metavar="B",
        help="buffer size per server as NCCL counts it (AllGather output, AllReduce vector; required unless --check)",
    )
    p.add_argument("--chunks", type=pos_int, default=None, metavar="C", help="chunks per server (default 1)")
    p.add_argument(
        "--root", type=int, default=None, metavar="R", help="broadcast: the source (default the first server)"
    )
    p.add_argument(
        "--servers", default=None, metavar="LIST", help="participating servers, e.g. 0,1,2,3 (default: every server)"
    )
    p.add_argument(
        "--method",
        choices=(*ALL_METHODS, "all"),
        default=None,
        help="exact: the MILP, started from the greedy schedule (default); heuristic: the greedy list "
        "schedule; ring: the ring schedule on a ring through every server; all: the three side by side",
    )
    p.add_argument(
        "--time-limit", type=nonneg_float, default=None, metavar="S", help="exact: solver time limit in seconds"
    )
    p.add_argument(
        "--one-model",
        action="store_true",
        help="allreduce, exact (or all): one model, partial sums up a tree into a root per chunk and the sum "
        "broadcast from it, phases pipelined, instead of ReduceScatter + AllGather (every server; small cases)",
    )
    p.add_argument("--backend", default=None, help="exact: solver back-end (highs, scip, cpsat, cbc; default highs)")
    p.add_argument(
        "-o",
        "--out",
        default=None,
        metavar="SCHEDULE.json",
        help="write the schedule (with --method all: the shortest, exact first on ties) here, atomically",
    )
    p.add_argument(
        "--to",
        choices=("schedule", "msccl"),
        default=None,
        help="what -o writes: schedule (the topoopt-collective-schedule file, default) or msccl (the schedule "
        "as an MSCCL algorithm, XML, checked by the independent MSCCL checker before it is written)",
    )
    p.add_argument(
        "--check",
        default=None,
        metavar="SCHEDULE.json",
        help="check a schedule file written by --out against INSTANCE and SOLUTION (the files it was made "
        "from) instead of scheduling: exit 0 valid, 1 a violation",
    )
    p.add_argument(
        "--joint",
        action="store_true",
        help="no SOLUTION: choose the topology (the instance's cluster: degree, links, regular, multi_links) and "
        f"the schedule together, in one model up to {JOINT_MODEL_SERVERS} servers (proven optimal when the "
        "probes settle), above that the best known design each scheduled; every collective",
    )
    p.add_argument(
        "--design-out",
        default=None,
        metavar="SOLUTION.json",
        help="--joint: write the chosen topology as a solution file (needed with -o, which names it)",
    )
    p.add_argument(
        "--topology",
        default=None,
        metavar="FILE",
        help="no INSTANCE or SOLUTION: schedule on the topology of FILE, a link list (src dst [gbps] "
        "[latency_us] per line, # comments) or a TE-CCL input (.json: its topology and collective; "
        "--collective, --bytes, --chunks replace the file's)",
    )
    p.add_argument(
        "--gbps", type=pos_float, default=None, metavar="G", help="--topology link list: rate of a line without one"
    )
    p.add_argument(
        "--latency-us",
        type=nonneg_float,
        default=None,
        metavar="L",
        help="--topology link list: latency of a line without one (default 0)",
    )
    p.add_argument(
        "--directed", action="store_true", help="--topology link list: a line is one direction (default: both)"
    )
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.set_defaults(func=run_collective)
    return p


#: Options that choose what to schedule and how; --check takes all of them from the file.
_SCHEDULING_OPTIONS = (
    "collective",
    "bytes",
    "chunks",
    "root",
    "servers",
    "method",
    "time_limit",
    "backend",
    "out",
    "to",
)
#: Flags that choose how to schedule; --check takes none of them either.
_SCHEDULING_FLAGS = ("one_model",)


#: The Collective's fields and the options that give them.
_OPTION_OF_FIELD = {
    "collective.servers": "--servers",
    "collective.bytes": "--bytes",
    "collective.chunks": "--chunks",
    "collective.root": "--root",
}


def _link(inst: Any) -> Any:
    from topoopt_ilp.core.collective import LinkModel  # start-up time: numpy, not needed for --help

    arcs = () if inst.fixed_topology is None else inst.fixed_topology.arc_rates(inst.cluster)
    return LinkModel(inst.cluster.hop_latency_s, inst.cluster.link_bytes_per_s, arcs)


def _row(result: Any) -> dict[str, Any]:
    return {
        "method": _LABEL[result.method],
        "status": result.status,
        "finish_s": result.finish_s,
        "steps": result.steps,
        "step_s": result.step_s,
        "algbw_Bps": result.algbw_Bps,
        "bound_steps": result.bound_steps,
        "bound_s": result.bound_steps * result.step_s,
        "independent_bound_steps": result.bound.steps,
        "fluid_bound_s": result.bound.fluid_s,
        "gap": result.gap,
        "solve_s": result.solve_s,
        "backend": result.backend,
    }


def _fmt_bw(v: float | None) -> str:
    return "-" if v is None else f"{v / 1e9:.4g} GB/s"


def _read_topology_file(args: argparse.Namespace) -> Any:
    """The ``--topology`` file: a TE-CCL input (``.json``) or a link list."""
    from topoopt_ilp.files.link_list import read_link_list  # start-up time: numpy, not needed for --help
    from topoopt_ilp.files.teccl import read_teccl

    if not args.topology.strip():
        raise InputError(f"--topology needs a file name, got {args.topology!r}")
    if args.topology.lower().endswith(".json"):
        given = [o for o, v in (("--gbps", args.gbps), ("--latency-us", args.latency_us)) if v is not None]
        if given or args.directed:
            raise InputError(f"{(given or ['--directed'])[0]} goes with a link list, not a TE-CCL input (.json)")
        return read_teccl(args.topology)
    return read_link_list(args.topology, gbps=args.gbps, latency_us=args.latency_us, directed=args.directed)


def _design(args: argparse.Namespace) -> tuple[Any, Any, Any, str]:
    """(topology, link model, the file's collective or None, what the header names) of INSTANCE and
    SOLUTION, or of ``--topology``."""
    if args.topology is None:
        inst, sol = load_design(args.instance, args.solution, workload=False)
        return sol.topology, _link(inst), None, f"{args.solution} on {args.instance}"
    from topoopt_ilp.core.solution import Topology  # start-up time: numpy, not needed for --help

    linked = _read_topology_file(args)
    return Topology(linked.matrix), linked.link, linked.collective, f"{args.topology} ({linked.kind})"


def run_collective(args: argparse.Namespace) -> int:
    """The ``collective`` command (``args`` from :func:`add_subcommand`'s parser)."""
    if args.topology is not None:
        for what, bad in (
            ("INSTANCE", args.instance is not None),
            ("--joint", args.joint),
            ("--design-out", args.design_out is not None),
        ):
            if bad:
                raise InputError(f"{what} does not go with --topology (the file gives the topology)")
        args.instance = args.solution = args.topology  # -o and --check name the file in both roles
    elif args.gbps is not None or args.latency_us is not None or args.directed:
        raise InputError("--gbps, --latency-us and --directed go with --topology")
    elif args.instance is None:
        raise InputError("INSTANCE is required (or --topology FILE)")
    if args.joint:
        return _run_joint(args)
    if args.design_out is not None:
        raise InputError("--design-out goes with --joint")
    if args.solution is None:
        raise InputError("SOLUTION is required (unless --joint chooses the topology)")
    if args.check is not None:
        if not args.check.strip():
            raise InputError(f"--check needs a schedule file name, got {args.check!r}")
        given = [f"--{k.replace('_', '-')}" for k in _SCHEDULING_OPTIONS if getattr(args, k) is not None]
        given += [f"--{k.replace('_', '-')}" for k in _SCHEDULING_FLAGS if getattr(args, k)]
        if given:
            raise InputError(f"{given[0]} does not go with --check (the schedule file says what it schedules)")
        return _run_check(args)
    from topoopt_ilp.core.collective import Collective
    from topoopt_ilp.files import check_writable, json_safe
    from topoopt_ilp.models.collective import solve_collective
    from topoopt_ilp.models.collective_allreduce import solve_allreduce_model
    from topoopt_ilp.models.collective_file import write_collective_schedule
    from topoopt_ilp.models.common import ExactOptions
    from topoopt_ilp.models.schedule import file_sha256

    topology, link, described, names = _design(args)
    if described is not None:  # a TE-CCL input: its collective, each part replaced by an option given
        args.collective = args.collective or described.kind
        args.bytes = args.bytes or described.bytes
        args.chunks = args.chunks or described.chunks
    for option, value in (("--collective", args.collective), ("--bytes", args.bytes)):
        if value is None:
            raise InputError(f"{option} is required (unless --check)")
    method = args.method or "exact"
    if method in ("heuristic", "ring") and (args.time_limit is not None or args.backend is not None):
        raise InputError(f"--time-limit and --backend go with --method exact or all, not {method}")
    if args.root is not None and args.collective != "broadcast":
        raise InputError(f"--root goes with --collective broadcast, not {args.collective}")
    if args.time_limit == 0:
        raise InputError("--time-limit 0 leaves the solver no time")
    if args.one_model and (args.collective != "allreduce" or method not in ("exact", "all")):
        raise InputError(
            f"--one-model schedules an allreduce with --method exact or all, not {args.collective} {method}"
        )
    if args.to is not None and args.out is None:
        raise InputError("--to says what -o writes: give -o FILE")
    if args.out is not None:
        check_writable(args.out, "--out", {"instance": args.instance, "solution": args.solution}, "the schedule")
    hashes = (file_sha256(args.instance), file_sha256(args.solution)) if args.out is not None else (None, None)
    try:
        collective = Collective(
            args.collective, server_ids(args.servers, topology.n), args.bytes, args.chunks or 1, args.root
        )
    except InputError as exc:  # named by the option that gave the field
        option = _OPTION_OF_FIELD.get(exc.field or "")
        if option is None:
            raise
        raise InputError(f"{option}: {exc.reason}") from None
    options = ExactOptions(backend=args.backend or "highs", time_limit_s=args.time_limit)
    results, skipped = [], {}
    for m in ALL_METHODS if method == "all" else (method,):
        try:
            if m == "exact" and args.one_model:
                results.append(solve_allreduce_model(topology, collective, link, options=options))
                continue
            results.append(solve_collective(topology, collective, link, method=m, options=options))
        except InputError as exc:
            if args.topology is not None and exc.field == "collective.servers" and exc.source is None:
                raise InputError(exc.reason, source=args.topology) from None  # the file's topology is at fault
            if method != "all" or m != "ring":
                raise
            skipped["ring"] = exc.reason  # e.g. no ring through every server, or an all-to-all
    best = min(results, key=lambda r: (r.steps, -ALL_METHODS.index(r.method)))
    relaxation = _relaxation(topology, collective, link, args) if method == "all" else None
    if args.to == "msccl":
        _write_msccl(args.out, topology, collective, best.schedule)
    elif args.out is not None:
        write_collective_schedule(
            args.out,
            collective,
            link,
            best,
            instance=args.instance,
            instance_sha256=hashes[0],
            solution=args.solution,
            solution_sha256=hashes[1],
        )
    rows = [_row(r) for r in results]
    if args.json:
        print(
            json.dumps(
                json_safe(
                    {
                        "instance": args.instance,
                        "solution": args.solution,
                        "collective": collective.kind,
                        "servers": len(collective.servers),
                        "bytes": collective.bytes,
                        "chunks": collective.chunks,
                        "alpha_s": link.alpha_s,
                        "bandwidth_Bps": link.bandwidth_Bps,
                        "results": rows,
                        "skipped": skipped,
                        "relaxation": None if relaxation is None else _relaxation_row(relaxation),
                        "written": args.out if args.out is not None else None,
                    }
                ),
                indent=1,
            )
        )
        return EXIT_OK
    print(
        f"{collective.kind} of {collective.bytes:.4g} bytes over {len(collective.servers)} servers of "
        f"{names}, {collective.chunks} chunk(s) "
        + ("of the root's message " if collective.kind == "broadcast" else "per server ")
        + f"(alpha {fmt_time(link.alpha_s)}, {_fmt_bw(link.bandwidth_Bps)} per link"
        + (
            f"; {len(link.arcs)} link directions at their own rates, steps of {fmt_time(results[0].step_s)})"
            if link.arcs
            else ")"
        )
    )
    header = f"  {'method':<8} {'finish':>11} {'steps':>6} {'algbw':>13} {'status':<9} {'bound':>11} {'gap':>7} {'solve':>10}"
    print(header)
    for row in rows:
        print(
            f"  {row['method']:<8} {fmt_time(row['finish_s']):>11} {row['steps']:>6} {_fmt_bw(row['algbw_Bps']):>13} "
            f"{row['status']:<9} {fmt_time(row['bound_s']):>11} {row['gap']:>7.3g} {row['solve_s']:>8.3g} s"
        )
    for m, reason in skipped.items():
        print(f"  {m:<8} - ({reason})")
    if relaxation is not None:
        independent = results[0].bound.steps
        undecided = "" if relaxation.settled else ", a larger horizon undecided at the time limit"
        print(
            f"  {'lp':<8} {fmt_time(relaxation.seconds):>11} {relaxation.steps:>6} steps: the bound of the model's "
            f"LP relaxation ({relaxation.solves} LPs, {relaxation.solve_s:.3g} s{undecided}); the independent bound "
            f"{independent} steps"
        )
    if collective.kind == "allreduce" and any(r.status == "optimal" and r.gap for r in results):
        form = (
            "no schedule of one tree in and one broadcast out per chunk is shorter"
            if args.one_model
            else "ReduceScatter + AllGather, each phase optimal"
        )
        print(f"  note     allreduce optimal: {form}; the bound is any AllReduce's")
    if args.out is not None:
        as_what = ", as an MSCCL algorithm" if args.to == "msccl" else ""
        print(f"  wrote {args.out} ({_LABEL[best.method]} schedule, {best.steps} steps{as_what})")
    return EXIT_OK


#: Seconds per LP of the relaxation bound when --time-limit does not say.
RELAXATION_TIME_LIMIT_S = 10.0


def _relaxation(topology: Any, collective: Any, link: Any, args: argparse.Namespace) -> Any:
    """``--method all``: the LP-relaxation bound, on HiGHS (whatever --backend solves the MILP)."""
    # start-up time: numpy and the solvers, not needed for --help
    from topoopt_ilp.models.collective_relaxation import relaxation_bound
    from topoopt_ilp.models.common import ExactOptions

    limit = RELAXATION_TIME_LIMIT_S if args.time_limit is None else args.time_limit
    return relaxation_bound(topology, collective, link, options=ExactOptions(backend="highs", time_limit_s=limit))


def _relaxation_row(relaxation: Any) -> dict[str, Any]:
    return {
        "kind": relaxation.kind,
        "bound_steps": relaxation.steps,
        "bound_s": relaxation.seconds,
        "floor_steps": relaxation.floor_steps,
        "settled": relaxation.settled,
        "solves": relaxation.solves,
        "solve_s": relaxation.solve_s,
    }


def _write_msccl(path: str, topology: Any, collective: Any, schedule: Any) -> None:
    """The schedule as an MSCCL algorithm, written only once the independent checker has passed it."""
    from topoopt_ilp.evaluation.msccl import msccl_schedule_violations
    from topoopt_ilp.export.common import write_text
    from topoopt_ilp.export.msccl_schedule import msccl_schedule_xml

    text = msccl_schedule_xml(collective, schedule)
    root = collective.servers.index(collective.root) if collective.kind == "broadcast" else 0
    report = msccl_schedule_violations(topology.matrix, collective.servers, text, collective.kind, root)
    if not report.valid:
        raise RuntimeError(f"the MSCCL algorithm of the schedule fails its check: {report.violations[0]}")
    write_text(path, text)


def _run_joint(args: argparse.Namespace) -> int:
    """``--joint``: the topology and the schedule together on the instance's cluster."""
    # start-up time: numpy and the solvers, not needed for --help
    from topoopt_ilp.core.collective import Collective
    from topoopt_ilp.core.solution import Solution
    from topoopt_ilp.evaluation.verify import verify
    from topoopt_ilp.files import check_writable, json_safe, load_instance, save_solution
    from topoopt_ilp.models.collective_file import write_collective_schedule
    from topoopt_ilp.models.collective_topology import schedule_designs, solve_joint_collective
    from topoopt_ilp.models.common import ExactOptions
    from topoopt_ilp.models.schedule import file_sha256

    if args.solution is not None:
        raise InputError("--joint chooses the topology: give INSTANCE only, no SOLUTION")
    for option in ("check", "servers"):
        if getattr(args, option) is not None:
            raise InputError(f"--{option} does not go with --joint (it schedules every server of the instance)")
    if args.root is not None and args.collective != "broadcast":
        raise InputError(f"--root goes with --collective broadcast, not {args.collective}")
    for option, value in (("--collective", args.collective), ("--bytes", args.bytes)):
        if value is None:
            raise InputError(f"{option} is required")
    if args.to == "msccl":
        raise InputError("--to msccl goes with a SOLUTION, not --joint (write --design-out, then schedule it)")
    if args.one_model:
        raise InputError("--one-model goes with a SOLUTION, not --joint")
    method = args.method or "exact"
    if method not in ("exact", "heuristic"):
        raise InputError(f"--joint takes --method exact or heuristic, not {method}")
    if args.time_limit == 0:
        raise InputError("--time-limit 0 leaves the solver no time")
    if args.out is not None and args.design_out is None:
        raise InputError("-o with --joint needs --design-out: the schedule file names the design it runs on")
    for path, option in ((args.design_out, "--design-out"), (args.out, "--out")):
        if path is not None:
            check_writable(path, option, {"instance": args.instance}, "the file")
    inst = load_instance(args.instance)
    cluster = inst.cluster
    if inst.fixed_topology is not None:
        raise InputError("the instance fixes its topology: schedule it with a SOLUTION instead of --joint")
    try:
        collective = Collective(args.collective, tuple(range(cluster.servers)), args.bytes, args.chunks or 1, args.root)
    except InputError as exc:  # named by the option that gave the field
        raise InputError(f"{_OPTION_OF_FIELD.get(exc.field or '', '--collective')}: {exc.reason}") from None
    link = _link(inst)
    options = ExactOptions(backend=args.backend or "highs", time_limit_s=args.time_limit)
    directed = cluster.links == "directed"
    n, d = cluster.servers, cluster.degree
    if method == "exact" and n <= JOINT_MODEL_SERVERS:
        joint = solve_joint_collective(
            collective,
            d,
            link,
            directed=directed,
            regular=cluster.regular,
            multi_links=cluster.multi_links,
            options=options,
        )
        design, topology, result, how = joint.design, joint.topology, joint.result, "joint model"
        over_class = f"{joint.status} over every topology of the cluster's class"
    else:
        if collective.kind == "allreduce" and directed:
            raise InputError("--joint allreduce needs undirected links (its phases run on G and its reverse)")
        scheduled = schedule_designs(collective, d, link, directed=directed, method=method, options=options)
        if not scheduled:
            raise InputError(f"no known design of {n} servers of degree {d} to schedule", source=args.instance)
        best = min(scheduled, key=lambda r: r.result.steps)
        design, topology, result, how = best.name, best.topology, best.result, "best known design"
        over_class = f"not proven over the class (best of {len(scheduled)} known designs)"
    if args.design_out is not None:
        sol = Solution(status="feasible", method=f"collective {how}", topology=topology)
        report = verify(inst, sol, check_metrics=False)
        if not report.valid:  # an internal error: the chosen topology does not fit its own cluster
            raise RuntimeError(f"the chosen design fails the verifier: {report.violations[0]}")
        save_solution(sol, args.design_out, directed=directed)
    if args.out is not None:
        write_collective_schedule(
            args.out,
            collective,
            link,
            result,
            instance=args.instance,
            instance_sha256=file_sha256(args.instance),
            solution=args.design_out,
            solution_sha256=file_sha256(args.design_out),
        )
    row = {**_row(result), "design": design, "chosen_by": how, "over_class": over_class}
    if args.json:
        print(json.dumps(json_safe({"instance": args.instance, "collective": collective.kind, **row}), indent=1))
        return EXIT_OK
    print(
        f"{collective.kind} of {collective.bytes:.4g} bytes over the {n} servers of {args.instance} (degree {d}, "
        f"{cluster.links}), {collective.chunks} chunk(s) "
        + ("of the root's message" if collective.kind == "broadcast" else "per server")
        + f": topology and schedule by the {how}"
    )
    print(f"  design       {design}")
    print(
        f"  finish       {fmt_time(result.finish_s)}  ({result.steps} steps of {fmt_time(result.step_s)}, "
        f"algbw {_fmt_bw(result.algbw_Bps)})"
    )
    print(f"  status       {result.status} on the design; {over_class}")
    print(
        f"  bound        {result.bound_steps} steps, {fmt_time(result.bound_steps * result.step_s)} on the design "
        f"(gap {result.gap:.3g})"
    )
    print(f"  solve        {result.solve_s:.3g} s")
    for path, what in ((args.design_out, "the design"), (args.out, "the schedule")):
        if path is not None:
            print(f"  wrote {path} ({what})")
    return EXIT_OK


def collective_file_violations(
    instance: str, solution: str, schedule: str, design: tuple[Any, Any] | argparse.Namespace | None = None
) -> tuple[Any, list[str]]:
    """The collective schedule file ``schedule`` against the instance and solution files it names by
    SHA-256 (InputError, exit 2, when they are others), then its replay and claims
    (:func:`~topoopt_ilp.models.collective_file.collective_claim_violations`): (the file as read, its
    violations). ``design``: the instance and solution, loaded and verified (None: loaded here, after
    the SHA-256 check), or the command's options with ``--topology`` (the file read again with them). ``--check`` and ``topoopt verify --collective-schedule`` use it."""
    from topoopt_ilp.models.collective_file import collective_claim_violations, read_collective_schedule

    sf = read_collective_schedule(schedule)
    check_made_from(
        schedule,
        {
            "instance": (instance, sf.instance_sha256, sf.instance),
            "solution": (solution, sf.solution_sha256, sf.solution),
        },
        writer="topoopt collective --out",
    )
    if isinstance(design, argparse.Namespace):  # --topology: the file read as the options say
        topology, link, _, _ = _design(design)
        return sf, collective_claim_violations(topology, link, sf)
    inst, sol = design or load_design(instance, solution, workload=False)
    return sf, collective_claim_violations(sol.topology, _link(inst), sf)


def _run_check(args: argparse.Namespace) -> int:
    """``--check SCHEDULE.json``: the file against the files it names by SHA-256, then the replay."""
    design = args if args.topology is not None else None
    sf, problems = collective_file_violations(args.instance, args.solution, args.check, design)
    facts = {
        "collective": sf.collective.kind,
        "method": sf.method,
        "status": sf.status,
        "steps": sf.schedule.steps,
        "finish_s": sf.finish_s,
    }
    line = (
        f"finish             {fmt_time(sf.finish_s)}  ({sf.collective.kind}, {sf.method}, {sf.status}; "
        f"{sf.schedule.steps} steps, {len(sf.schedule.sends)} sends)"
    )
    return report_check(args, "collective schedule", facts, line, problems)
