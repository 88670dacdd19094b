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

from _results import Record, add_out_argument
from exact_vs_naive import skewed_mix
from joint_small import _warm_up_solver_worker

import topoopt_ilp.models.topology.solve as tr
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
    add_out_argument(ap)
    args = ap.parse_args()
    record = Record(args)
    _warm_up_solver_worker()
    table = record.table(
        f"HiGHS, no warm start, median of {args.repeat}; skewed AllReduce + MP mixes, times without and with the rounding",
        [
            ("n", ">3"),
            ("d", ">2"),
            ("seed", ">4"),
            ("without_ms", ">10.1f"),
            ("with_ms", ">8.1f"),
            ("ratio", ">6.2f", "x"),
            ("settled by", ""),
        ],
    )
    print(table.title)
    print(table.header())
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
            print(table.add(n, d, seed, t_off * 1e3, t_on * 1e3, t_off / t_on, by))
    record.ratios.update(
        {
            "without/with median": statistics.median(ratios),
            "without/with min": min(ratios),
            "without/with max": max(ratios),
            "without/with total": total[0] / total[1],
        }
    )
    print(
        table.note(
            f"settled without a MILP: {settled} of {len(ratios)}; ratio without/with: median "
            f"{statistics.median(ratios):.2f}x, range {min(ratios):.2f}-{max(ratios):.2f}x; total {total[0]:.2f} s "
            f"without, {total[1]:.2f} s with"
        )
    )
    record.write()


if __name__ == "__main__":
    main()
