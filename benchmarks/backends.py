"""Every back-end on the same exact models, side by side: time to proven optimality and the result.

    python benchmarks/backends.py [--limit 60]

The times include model translation and the guard process (a time limit is set, so each solve runs
isolated); the ratio column is each backend's time over HiGHS's on the same model in the same run.
"""

from __future__ import annotations

import argparse
import time

from topoopt_ilp import Cluster, Demand, Instance, solve
from topoopt_ilp.instance import AllReduceGroup
from topoopt_ilp.solvers import guard


def instances():
    yield "a2a n=8 d=3", Instance(Cluster(8, 3, 100.0, hop_latency_us=0.0, multi_links=False), Demand(all_to_all=1e6), objective="throughput")
    yield "a2a n=10 d=3", Instance(Cluster(10, 3, 100.0, hop_latency_us=0.0), Demand(all_to_all=1e6), objective="throughput")
    mix = Demand(allreduce=(AllReduceGroup(tuple(range(8)), 40e6), AllReduceGroup((0, 2, 4, 6), 10e6)),
                 mp=((0, 1, 30e6), (1, 0, 30e6), (2, 5, 20e6), (6, 3, 10e6)))
    yield "mix n=8 d=4", Instance(Cluster(8, 4, 100.0, hop_latency_us=0.0), mix, objective="throughput")
    yield "aspl n=8 d=3", Instance(Cluster(8, 3, 100.0, multi_links=False), Demand(all_to_all=1e6), objective="aspl")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--limit", type=float, default=60.0)
    ap.add_argument("--backends", default="highs,scip,cbc")
    args = ap.parse_args()
    backends = args.backends.split(",")
    guard.prestart()  # so that no backend pays the worker's start-up
    print(f"time limit {args.limit:g} s, warm start from the heuristic")
    print(f"{'model':<14}" + "".join(f"{b:>30}" for b in backends))
    for label, inst in instances():
        cells, base = [], None
        for b in backends:
            t = time.perf_counter()
            sol = solve(inst, method="exact", backend=b, time_limit_s=args.limit, warm_start="heuristic")
            secs = time.perf_counter() - t
            base = base or secs
            cells.append(f"{sol.status[:4]} {sol.objective or 0:9.5g} {secs:6.2f}s {secs / base:4.1f}x")
        print(f"{label:<14}" + "".join(f"{c:>30}" for c in cells), flush=True)


if __name__ == "__main__":
    main()
