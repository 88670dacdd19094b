"""Directed links, uniform all-to-all: the Moore circulant search vs the topology MILP, side by side.

For each size and objective, the exact method as shipped (the search of models/topology/moore_circulant.py
first; the MILP with the time left when it proves nothing) and the MILP alone (``use_catalogue=False``),
one after the other on the same backend, no warm start. The ratio MILP/search is the result; a '>'
marks a MILP that hit the time limit.

    python benchmarks/directed_moore.py [--limit 60] [--sizes 8x3,8x4,9x3,10x4,11x4,12x4,13x4]
                                        [--objectives throughput,aspl]
"""

from __future__ import annotations

import argparse
import time

from _args import seconds
from joint_small import _warm_up_solver_worker
from topoopt_ilp import Cluster, Demand, Instance
from topoopt_ilp.models.common import ExactOptions
from topoopt_ilp.models.topology.solve import solve_topology_routing


def run(instance: Instance, limit: float, use_search: bool):
    _warm_up_solver_worker()
    options = ExactOptions(backend="highs", time_limit_s=limit, warm_start="none")
    t = time.perf_counter()
    sol = solve_topology_routing(instance, options, use_catalogue=use_search)
    return sol, time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--limit", type=seconds, default=60.0)
    ap.add_argument("--sizes", default="8x3,8x4,9x3,10x4,11x4,12x4,13x4")
    ap.add_argument("--objectives", default="throughput,aspl")
    args = ap.parse_args()
    print(f"directed links, all-to-all, HiGHS, time limit {args.limit:g} s per solve, no warm start")
    print(f"{'instance':<22} {'exact method':>34} {'MILP alone':>24} {'MILP/method':>12}")
    for size in args.sizes.split(","):
        n, d = map(int, size.split("x"))
        for objective in args.objectives.split(","):
            inst = Instance(Cluster(n, d, 100.0, hop_latency_us=0.0, links="directed"), Demand(all_to_all=1e6),
                            objective=objective)
            (s, ts), (m, tm) = run(inst, args.limit, True), run(inst, args.limit, False)
            how = s.details.get("algorithm", "MILP")
            left = f"{s.status[:4]} {ts:7.3f}s {s.objective or 0:.5g} ({how})"
            right = f"{m.status[:4]} {tm:7.2f}s {m.objective or 0:.5g}"
            ratio = f"{'>' if m.status != 'optimal' else ''}{tm / ts:.1f}x" if s.status == "optimal" else "unproven"
            print(f"{objective:<10} n={n:<2} d={d:<2}   {left:>34} {right:>24} {ratio:>12}", flush=True)


if __name__ == "__main__":
    main()
