"""The alternating decomposition against the joint MILP optimum on the small workloads (n = 6..10).

Runs what ``joint_small.py`` runs (same instances, same solves) and prints, per instance, the
alternating method's iteration time over the optimum (1.00 = optimal; over the best bound either
exact run proved when neither proves the optimum) and how many times faster the alternating method
is than the joint MILP and than the default exact method. The issue's target: within 5 % of optimal
on every instance, at least 10x faster than the joint MILP.

    .venv/bin/python benchmarks/alternating_quality.py [--time-limit 600] [--instances NAME,...]
"""

from __future__ import annotations

import argparse

from _args import seconds
from joint_small import print_joint, run
from small_workloads import small_names


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=seconds, default=600.0, help="seconds for each joint solve")
    ap.add_argument("--instances", type=small_names, default="", help="comma-separated names (default: all)")
    args = ap.parse_args()
    rows = run(args.instances or None, args.time_limit)
    print(f"\nexact runs (HiGHS, {args.time_limit:g} s limit each incl. the alternating warm start)")
    print_joint(rows)
    hdr = (f"{'instance':<20} {'opt_ms':>8} {'alt_ms':>8} {'alt/opt':>8} {'alt_s':>6} {'altX_ms':>8} {'altX/opt':>8} "
           f"{'altX_s':>6} {'milp_s':>7} {'exact_s':>7} {'milp/alt':>8} {'milp/altX':>9}")
    print("\nalternating (TopologyFinder) and alternating with the exact topology step (altX) vs the optimum")
    print(f"{hdr}\n{'-' * len(hdr)}")
    within, within_x, faster, faster_x = 0, 0, 0, 0
    for r in rows:
        ref = r.best_ms if r.proven else r.bound_ms
        ratio, ratio_x = r.alternating_ms / ref, r.alternating_exact_ms / ref
        speed, speed_x = r.joint_s / r.alternating_s, r.joint_s / r.alternating_exact_s
        within += ratio <= 1.05
        within_x += ratio_x <= 1.05
        faster += speed >= 10
        faster_x += speed_x >= 10
        note = "" if r.proven else f"  (opt_ms is a bound; best found {r.best_ms:.3f})"
        print(f"{r.instance:<20} {ref:>8.3f} {r.alternating_ms:>8.3f} {ratio:>8.3f} {r.alternating_s:>6.1f} "
              f"{r.alternating_exact_ms:>8.3f} {ratio_x:>8.3f} {r.alternating_exact_s:>6.1f} {r.joint_s:>7.1f} "
              f"{r.exact_s:>7.1f} {speed:>7.1f}x {speed_x:>8.1f}x{note}")
    k = len(rows)
    print(f"\nwithin 5% of optimal: alternating {within}/{k}, with the exact topology step {within_x}/{k}")
    print(f"at least 10x faster than the joint MILP: alternating {faster}/{k}, with the exact topology step {faster_x}/{k}")


if __name__ == "__main__":
    main()
