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
from _results import Record, add_out_argument
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
    add_out_argument(ap)
    args = ap.parse_args()
    record = Record(args)
    table = record.table(
        f"HiGHS, no warm start, hop latency {args.latency_us:g} us, time limit {args.limit:g} s per solve; "
        "bw_*: the bandwidth optimum only (latency=False), lat_*: the latency term settled",
        [
            ("instance", "<12"),
            "|",
            ("bw_status", ">9"),
            ("bw_comm_us", ">10.3f"),
            ("bw_hops", ">7"),
            ("bw_s", ">6.2f", "s"),
            "|",
            ("lat_status", ">10"),
            ("lat_comm_us", ">11.3f"),
            ("lat_hops", ">8"),
            ("lat_s", ">6.2f", "s"),
            ("lat_bound_us", ">12.3f"),
            ("models", ">6"),
            "|",
            ("time ratio", ">9.1f", "x"),
        ],
    )
    print(table.title)
    print(table.header())
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
            cells += [sol.status, metrics.comm_time_s * 1e6, metrics.max_hops, times[-1]]
            if latency:
                models = sol.details.get("latency", {}).get("hop_limited_models", [])
                cells += [None if sol.bound is None else sol.bound * 1e6, len(models)]
        print(table.add(f"mix n={n} d={d}", *cells, times[1] / times[0]), flush=True)
    record.write()


if __name__ == "__main__":
    main()
