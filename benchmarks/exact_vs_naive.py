"""Time to proven optimality: the strong topology_routing formulation vs the naive arc-flow one.

Both run on the same backend, one after the other, on the same instances (all-to-all, and a skewed
AllReduce + model-parallel mix). The ratio naive/strong is the result; a '>' marks a naive solve
that hit the time limit, so the true ratio is at least that. ``--warm-start none`` (default) compares
the formulations alone; ``--warm-start heuristic`` gives both TopoOpt's heuristic topology as a start,
as ``topoopt solve --method exact`` does by default (its time included in both columns).
``--repeat R`` times every proven solve R times and prints the median (a solve that hits the limit
runs once).

    python benchmarks/exact_vs_naive.py [--limit 60] [--backend highs] [--sizes 8x2,8x3,10x2,10x3,12x4]
                                        [--warm-start none|heuristic] [--repeat 1] [--demands a2a,mix]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from _args import seconds
from _results import Record, add_out_argument
from joint_small import _warm_up_solver_worker

from topoopt_ilp import Cluster, Demand, Instance, solve
from topoopt_ilp.core.instance import AllReduceGroup


def all_to_all(n: int, d: int) -> Instance:
    return Instance(Cluster(n, d, 100.0, hop_latency_us=0.0), Demand(all_to_all=1e6), objective="throughput")


def skewed_mix(n: int, d: int, seed: int = 1) -> Instance:
    rng = random.Random(seed)
    groups = (AllReduceGroup(tuple(range(n)), 40e6), AllReduceGroup(tuple(range(0, n, 2)), 10e6))
    pairs = tuple(
        (s, t, float(rng.choice([1, 2, 4, 32]) * 1e6))
        for s in range(n)
        for t in range(n)
        if s != t and rng.random() < 0.2
    )
    return Instance(
        Cluster(n, d, 100.0, hop_latency_us=0.0), Demand(allreduce=groups, mp=pairs), objective="throughput"
    )


def run(instance: Instance, formulation: str, backend: str, limit: float, warm_start: str = "none"):
    _warm_up_solver_worker()  # a solve the guard killed takes its worker along: the next one would pay the cold start
    t = time.perf_counter()
    sol = solve(
        instance, method="exact", backend=backend, time_limit_s=limit, warm_start=warm_start, formulation=formulation
    )
    return sol, time.perf_counter() - t


def median_run(instance: Instance, formulation: str, args: argparse.Namespace):
    times = []
    for _ in range(args.repeat):
        sol, secs = run(instance, formulation, args.backend, args.limit, args.warm_start)
        times.append(secs)
        if sol.status != "optimal":
            break
    return sol, statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--limit", type=seconds, default=60.0)
    ap.add_argument("--backend", default="highs")
    ap.add_argument("--sizes", default="8x2,8x3,10x2,10x3,12x2,12x4")
    ap.add_argument("--warm-start", choices=("none", "heuristic"), default="none")
    ap.add_argument("--repeat", type=int, default=1, help="median of this many runs per proven solve")
    ap.add_argument(
        "--demands", default="a2a,mix", help="which demands: a2a (all-to-all), mix (AllReduce + MP), or both"
    )
    add_out_argument(ap)
    args = ap.parse_args()
    record = Record(args)
    demands = {"a2a": all_to_all, "mix": skewed_mix}
    if unknown := set(args.demands.split(",")) - set(demands):
        ap.error(f"unknown demand(s) {sorted(unknown)}; choose from a2a, mix")
    start = "no warm start" if args.warm_start == "none" else "both warm-started by the heuristic (its time included)"
    table = record.table(
        f"backend {args.backend}, time limit {args.limit:g} s per solve, {start}, median of {args.repeat} "
        "run(s); naive/strong is a lower bound where the naive solve is not optimal",
        [
            ("demand", "<6"),
            ("n", ">3"),
            ("d", ">2"),
            "|",
            ("strong", ">8"),
            ("strong_s", ">7.2f", "s"),
            ("strong_obj", ">10.5g"),
            "|",
            ("naive", ">8"),
            ("naive_s", ">7.2f", "s"),
            ("naive_obj", ">10.5g"),
            "|",
            ("naive/strong", ">11.1f", "x"),
        ],
    )
    print(table.title)
    print(table.header())
    for size in args.sizes.split(","):
        n, d = map(int, size.split("x"))
        for label in args.demands.split(","):
            inst = demands[label](n, d)
            cells = []
            times = []
            for form in ("strong", "naive"):
                sol, secs = median_run(inst, form, args)
                cells += [sol.status, secs, sol.objective]
                times.append((secs, sol.status == "optimal"))
            (ts, s_ok), (tn, n_ok) = times
            print(table.add(label, n, d, *cells, tn / ts if s_ok else None), flush=True)
    record.write()


if __name__ == "__main__":
    main()
