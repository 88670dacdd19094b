"""The placement's local search budgeted in seconds against moves, each alone and beside a busy core.

A time-limited search does as much work as the machine allows, so its result moves with the
machine's speed and load; budgeted in moves (``ExactOptions.search_moves``,
:class:`~topoopt_ilp.models.placement.local_search.SearchBudget`) it does the same work everywhere and,
while the time limit does not cut it, returns the same strategy for the same seed. For each
instance: :func:`solve_placement` with ``--time-limit`` seconds, then with ``--moves`` moves (the
time limit then ``--safety`` seconds), each once alone and once while another process keeps one core
busy. Printed per run: wall time, iteration time of the strategy, moves scored, whether the time
cut the search, and per mode whether the two runs returned the same strategy.

    .venv/bin/python benchmarks/search_budget.py [--instances dlrm-128-d8] [--time-limit 60]
                                                 [--moves 18000] [--safety 600]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import time

from _args import load_paper, paper_names, seconds
from _results import Record, add_out_argument

from topoopt_ilp.methods import solve
from topoopt_ilp.models.common import ExactOptions
from topoopt_ilp.models.placement.milp import solve_placement


def _spin() -> None:
    while True:
        pass


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instances", type=paper_names, default="dlrm-128-d8")
    ap.add_argument("--time-limit", type=seconds, default=60.0, help="seconds of the time-limited runs")
    ap.add_argument("--moves", type=int, default=18000, help="move budget of the move-limited runs")
    ap.add_argument("--safety", type=seconds, default=600.0, help="time limit of the move-limited runs")
    add_out_argument(ap)
    args = ap.parse_args()
    record = Record(args)
    table = record.table(
        "solve_placement (HiGHS, gap 1%) on TopoOpt's heuristic topology; 'busy': another process spins on one core",
        [
            ("instance", "<12"),
            ("budget", ">12"),
            ("load", ">5"),
            ("wall_s", ">7.1f"),
            ("iter_ms", ">8.3f"),
            ("moves", ">7"),
            ("cut", ">5"),
        ],
    )
    same = record.table(
        "per budget: the same strategy alone and busy", [("instance", "<12"), ("budget", ">12"), ("same", "")]
    )
    print(table.title)
    for name in args.instances:
        inst = load_paper(name)
        X = solve(inst, method="heuristic").topology.matrix
        print("\n" + table.rule())
        for label, opts in (
            (f"{args.time_limit:g} s", ExactOptions(time_limit_s=args.time_limit, gap=0.01)),
            (f"{args.moves} mv", ExactOptions(time_limit_s=args.safety, gap=0.01, search_moves=args.moves)),
        ):
            found = []
            for load in ("none", "busy"):
                spinner = mp.Process(target=_spin, daemon=True) if load == "busy" else None
                if spinner:
                    spinner.start()
                try:
                    t0 = time.perf_counter()
                    sol = solve_placement(inst, opts, X)
                    wall = time.perf_counter() - t0
                finally:
                    if spinner:
                        spinner.terminate()
                        spinner.join()
                d = sol.details
                found.append(dict(sol.placement))
                print(
                    table.add(
                        name,
                        label,
                        load,
                        wall,
                        sol.objective * 1e3,
                        d.get("local_search_moves", 0),
                        d.get("local_search_timed_out"),
                    ),
                    flush=True,
                )
            same.add(name, label, found[0] == found[1])
            print(f"{'':<12} {label:>12} same strategy alone and busy: {found[0] == found[1]}")
    record.write()


if __name__ == "__main__":
    main()
