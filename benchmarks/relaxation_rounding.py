"""The strong topology model with and without the rounding of its LP relaxation, side by side.

On the skewed AllReduce + MP mixes of ``exact_vs_naive.py`` (several seeds per size), each solve
runs with the rounding (the default: a rounding that meets the relaxation's bound proves itself
with two LPs and no MILP runs) and without it (the relaxation is then only solved inside the MILP).
Prints the median time of each, their ratio, and which solves the rounding settled. HiGHS, no warm
start, so the rounding is the only start.

    python benchmarks/relaxation_rounding.py [--sizes 6x2,6x3,8x2,8x3,8x4,10x2,10x3] [--seeds 5] [--repeat 3]
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time

import topoopt_ilp.models.topology.solve as tr
from exact_vs_naive import skewed_mix
from joint_small import _warm_up_solver_worker
from topoopt_ilp import solve

WITH_ROUNDING = tr._start_proof
WITHOUT_ROUNDING = functools.partial(WITH_ROUNDING, rounding=False)


def timed(instance, start_proof, repeat: int):
    tr._start_proof = start_proof
    try:
        times, sol = [], None
        for _ in range(repeat):
            t = time.perf_counter()
            sol = solve(instance, method="exact", backend="highs", time_limit_s=120, warm_start="none")
            times.append(time.perf_counter() - t)
        return sol, statistics.median(times)
    finally:
        tr._start_proof = WITH_ROUNDING


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="6x2,6x3,8x2,8x3,8x4,10x2,10x3")
    ap.add_argument("--seeds", type=int, default=5, help="seeds 1..S per size (n >= 10: at most 2)")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    _warm_up_solver_worker()
    print(f"HiGHS, no warm start, median of {args.repeat}")
    print(f"{'instance':<18} {'without':>9} {'with':>9} {'ratio':>7}  settled by")
    ratios, settled, total = [], 0, [0.0, 0.0]
    for size in args.sizes.split(","):
        n, d = map(int, size.split("x"))
        for seed in range(1, (args.seeds if n < 10 else min(args.seeds, 2)) + 1):
            inst = skewed_mix(n, d, seed)
            off, t_off = timed(inst, WITHOUT_ROUNDING, args.repeat)
            on, t_on = timed(inst, WITH_ROUNDING, args.repeat)
            assert on.status == off.status == "optimal" and abs(on.objective - off.objective) <= 1e-6 * off.objective
            by = on.details.get("start_proved", "the MILP").split("'s links")[0]
            settled += by != "the MILP"
            ratios.append(t_off / t_on)
            total[0] += t_off
            total[1] += t_on
            print(f"mix n={n:<2} d={d} s={seed}  {t_off * 1e3:7.1f}ms {t_on * 1e3:7.1f}ms {t_off / t_on:6.2f}x  {by}")
    print(f"settled without a MILP: {settled} of {len(ratios)}; ratio without/with: median {statistics.median(ratios):.2f}x, "
          f"range {min(ratios):.2f}-{max(ratios):.2f}x; total {total[0]:.2f} s without, {total[1]:.2f} s with")


if __name__ == "__main__":
    main()
