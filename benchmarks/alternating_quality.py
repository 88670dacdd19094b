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
from _results import Record, add_out_argument
from joint_small import print_joint, run
from small_workloads import small_names


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=seconds, default=600.0, help="seconds for each joint solve")
    ap.add_argument("--instances", type=small_names, default="", help="comma-separated names (default: all)")
    add_out_argument(ap)
    args = ap.parse_args()
    record = Record(args)
    rows = run(args.instances or None, args.time_limit)
    title = f"exact runs (HiGHS, {args.time_limit:g} s limit each incl. the alternating warm start)"
    print(f"\n{title}")
    print_joint(rows, record, title)
    table = record.table(
        "alternating (TopologyFinder) and alternating with the exact topology step (altX) vs the optimum",
        [
            ("instance", "<20"),
            ("opt_ms", ">8.3f"),
            ("alt_ms", ">8.3f"),
            ("alt/opt", ">8.3f"),
            ("alt_s", ">6.1f"),
            ("altX_ms", ">8.3f"),
            ("altX/opt", ">8.3f"),
            ("altX_s", ">6.1f"),
            ("milp_s", ">7.1f"),
            ("exact_s", ">7.1f"),
            ("milp/alt", ">7.1f", "x"),
            ("milp/altX", ">8.1f", "x"),
        ],
    )
    print(f"\n{table.title}")
    print(table.rule())
    within, within_x, faster, faster_x = 0, 0, 0, 0
    for r in rows:
        ref = r.best_ms if r.proven else r.bound_ms
        ratio, ratio_x = r.alternating_ms / ref, r.alternating_exact_ms / ref
        speed, speed_x = r.joint_s / r.alternating_s, r.joint_s / r.alternating_exact_s
        within += ratio <= 1.05
        within_x += ratio_x <= 1.05
        faster += speed >= 10
        faster_x += speed_x >= 10
        line = table.add(
            r.instance,
            ref,
            r.alternating_ms,
            ratio,
            r.alternating_s,
            r.alternating_exact_ms,
            ratio_x,
            r.alternating_exact_s,
            r.joint_s,
            r.exact_s,
            speed,
            speed_x,
        )
        if not r.proven:
            line += "  " + table.note(f"{r.instance}: opt_ms is a bound; best found {r.best_ms:.3f}")
        print(line)
    k = len(rows)
    print()
    print(table.note(f"within 5% of optimal: alternating {within}/{k}, with the exact topology step {within_x}/{k}"))
    print(
        table.note(
            f"at least 10x faster than the joint MILP: alternating {faster}/{k}, with the exact topology step "
            f"{faster_x}/{k}"
        )
    )
    record.write()


if __name__ == "__main__":
    main()
