"""AllGather schedules on a circulant: the exact MILP's solve time and proof, beside the greedy and ring
schedules and the independent lower bound (docs/guide/collectives.md).

For each chunk count: ``models.collective.solve_collective`` with ``method`` exact (HiGHS, one thread,
``--time-limit`` seconds), heuristic (greedy list schedule) and ring (the circulant's ring), all
checked by ``evaluation.collective_check``. Steps are time steps of alpha + chunk bytes / bandwidth.
A second table does the same at scale (``--scale-servers``, a degree-8 circulant, one chunk per
server), with the wall time of each method.

Usage: python benchmarks/collective_speed.py [--servers 16] [--jumps 1 6] [--chunks 1 4] [--time-limit 60]
       [--scale-servers 128] [--scale-jumps 1 9 31 50]
"""

from __future__ import annotations

import argparse

import numpy as np
from _results import Record, add_out_argument

from topoopt_ilp.core.collective import Collective, LinkModel
from topoopt_ilp.core.solution import Topology
from topoopt_ilp.models.collective import solve_collective
from topoopt_ilp.models.common import ExactOptions


def circulant(n: int, jumps: list[int]) -> Topology:
    m = np.zeros((n, n), dtype=np.int64)
    for i in range(n):
        for j in jumps:
            m[i, (i + j) % n] += 1
            m[(i + j) % n, i] += 1
    return Topology(m, tuple(jumps))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--servers", type=int, default=16)
    ap.add_argument("--jumps", type=int, nargs="+", default=[1, 6])
    ap.add_argument("--chunks", type=int, nargs="+", default=[1, 4])
    ap.add_argument("--bytes", type=float, default=1e9)
    ap.add_argument("--alpha", type=float, default=1e-6, help="seconds per hop")
    ap.add_argument("--bandwidth", type=float, default=12.5e9, help="bytes per second per link")
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--scale-servers", type=int, default=128, help="0: no scale table")
    ap.add_argument("--scale-jumps", type=int, nargs="+", default=[1, 9, 31, 50])
    add_out_argument(ap)
    args = ap.parse_args()
    record = Record(args)
    topology = circulant(args.servers, args.jumps)
    link = LinkModel(args.alpha, args.bandwidth)
    t = record.table(
        f"AllGather on the circulant C({args.servers}; {', '.join(map(str, args.jumps))}), HiGHS, 1 thread",
        [
            ("chunks", ">6"),
            ("bound", ">5"),
            ("exact", ">5"),
            ("status", ">8"),
            ("gap", ">6.3f"),
            ("solve_s", ">8.2f"),
            ("greedy", ">6"),
            ("ring", ">5"),
            ("finish_ms", ">10.4f"),
            ("algbw_GBps", ">10.3f"),
        ],
    )
    print(t.header())
    for k in args.chunks:
        coll = Collective("allgather", tuple(range(args.servers)), args.bytes, k)
        exact = solve_collective(topology, coll, link, options=ExactOptions(time_limit_s=args.time_limit, threads=1))
        greedy = solve_collective(topology, coll, link, method="heuristic")
        ring = solve_collective(topology, coll, link, method="ring")
        row = (
            k,
            exact.bound_steps,
            exact.steps,
            exact.status,
            exact.gap,
            exact.solve_s,
            greedy.steps,
            ring.steps,
            exact.finish_s * 1e3,
            exact.algbw_Bps / 1e9,
        )
        print(t.add(*row), flush=True)
    if args.scale_servers:
        scale(record, args, link)
    record.write()


def scale(record: Record, args: argparse.Namespace, link: LinkModel) -> None:
    n, jumps = args.scale_servers, args.scale_jumps
    topology = circulant(n, jumps)
    coll = Collective("allgather", tuple(range(n)), args.bytes, 1)
    t = record.table(
        f"AllGather on the circulant C({n}; {', '.join(map(str, jumps))}), one chunk per server",
        [
            ("method", "<9"),
            ("steps", ">5"),
            ("bound", ">5"),
            ("status", ">8"),
            ("gap", ">6.3f"),
            ("wall_s", ">7.2f"),
            ("finish_ms", ">10.4f"),
        ],
    )
    print(t.header())
    for method in ("heuristic", "ring", "exact"):
        options = ExactOptions(time_limit_s=args.time_limit, threads=1)
        res = solve_collective(topology, coll, link, method=method, options=options)
        print(
            t.add(method, res.steps, res.bound_steps, res.status, res.gap, res.solve_s, res.finish_s * 1e3), flush=True
        )


if __name__ == "__main__":
    main()
