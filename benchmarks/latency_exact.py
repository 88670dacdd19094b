"""What settling the hop-latency term costs: the exact comm time vs the bandwidth optimum alone.

On the skewed AllReduce + MP mixes of ``exact_vs_naive.py`` with objective ``comm_time`` and a hop
latency (default 1 us), side by side in one run: ``solve_topology_routing(..., latency=False)`` (the
bandwidth-optimal design, scored by the evaluator, the latency term only bounded) and the default
(the hop-limited models of :func:`~topoopt_ilp.models.topology.milp.optimise_latency` after it).
Printed: status, comm time, bound, wall time, the hop-limited models solved and the ratio of times.

    python benchmarks/latency_exact.py [--sizes 8x2,8x3,10x2] [--latency-us 1] [--limit 120]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

from _args import seconds
from exact_vs_naive import skewed_mix
from joint_small import _warm_up_solver_worker
from topoopt_ilp.evaluation.evaluate import evaluate
from topoopt_ilp.models import ExactOptions
from topoopt_ilp.models.topology.solve import solve_topology_routing


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="8x2,8x3,10x2")
    ap.add_argument("--latency-us", type=float, default=1.0)
    ap.add_argument("--limit", type=seconds, default=120.0)
    args = ap.parse_args()
    print(f"HiGHS, no warm start, hop latency {args.latency_us:g} us, time limit {args.limit:g} s per solve")
    print(f"{'instance':<14} {'bandwidth optimum only':>34} {'latency settled':>46} {'time ratio':>10}")
    for size in args.sizes.split(","):
        n, d = map(int, size.split("x"))
        base = skewed_mix(n, d)
        instance = replace(base, cluster=replace(base.cluster, hop_latency_us=args.latency_us), objective="comm_time")
        options = ExactOptions(warm_start="none", time_limit_s=args.limit)
        cells, times = [], []
        for latency in (False, True):
            _warm_up_solver_worker()
            t = time.perf_counter()
            sol = solve_topology_routing(instance, options, latency=latency)
            times.append(time.perf_counter() - t)
            metrics = evaluate(instance, sol, routing="given")
            cell = f"{sol.status[:4]} {metrics.comm_time_s * 1e6:9.3f} us {metrics.max_hops} hops {times[-1]:6.2f}s"
            if latency:
                models = sol.details.get("latency", {}).get("hop_limited_models", [])
                cell += f" bound {sol.bound * 1e6:9.3f} us, {len(models)} models"
            cells.append(cell)
        print(f"mix n={n:<2} d={d:<2}  {cells[0]:>34} {cells[1]:>46} {times[1] / times[0]:9.1f}x", flush=True)


if __name__ == "__main__":
    main()
