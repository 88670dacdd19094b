"""The alternating method with the exact topology step (altX) on the small workloads, alone.

``alternating_quality.py`` times altX next to the joint MILP (about half an hour); this script runs
only altX on the same instances (``small_workloads.py``), so a change to the exact topology step can
be measured quickly: run it before and after, or on two checkouts, one right after the other.

    python benchmarks/alternating_exact_step.py [--repeat 3] [--instances NAME,...]
"""

from __future__ import annotations

import argparse
import statistics
import time

from _results import Record, add_out_argument
from joint_small import _warm_up_solver_worker
from small_workloads import small_instances, small_names

from topoopt_ilp import solve


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="median of this many runs")
    ap.add_argument("--instances", type=small_names, default="", help="comma-separated names (default: all)")
    add_out_argument(ap)
    args = ap.parse_args()
    record = Record(args)
    wanted = set(args.instances)
    _warm_up_solver_worker()
    table = record.table(
        f"alternating with the exact topology step (10 s per step), median of {args.repeat} run(s)",
        [("instance", "<20"), ("altX_ms", ">9.3f"), ("altX_s", ">7.2f")],
    )
    print(table.header())
    total = 0.0
    for name, inst in small_instances().items():
        if wanted and name not in wanted:
            continue
        times, sol = [], None
        for _ in range(args.repeat):
            t = time.perf_counter()
            sol = solve(inst, method="alternating", topology_method="exact", round_time_limit_s=10.0)
            times.append(time.perf_counter() - t)
        secs = statistics.median(times)
        total += secs
        print(table.add(name, sol.objective * 1e3, secs))
    print(table.note(f"total {total:.2f} s"))
    record.write()


if __name__ == "__main__":
    main()
