"""The period-invariant placement MILP against ``solve_placement``, side by side, same time limit.

For each instance, on TopoOpt's heuristic topology for the data-parallel start (circulant), and each
period p of ``--periods`` that applies (:func:`~topoopt_ilp.models.placement.symmetric.symmetric_periods`):
:func:`~topoopt_ilp.models.placement.symmetric.symmetric_placement` (HiGHS) with ``--time-limit``,
then :func:`~topoopt_ilp.models.placement.milp.solve_placement` (1 % gap asked) with the same limit.
Printed: the MILP's status, iteration time of its strategy (``eval_ms``: the evaluator's, which
must equal ``model_ms``), its bound - valid for the invariant strategies only, not for the problem -
and size; the placement's iteration time and bound (valid for every strategy); the ratio
symmetric / placement (below 1: the invariant family held a better strategy than the local search
found). Timings are wall-clock on a shared machine: compare within one run.

    .venv/bin/python benchmarks/placement_symmetric.py [--instances dlrm-128-d8] [--periods 8]
                                                     [--time-limit 60]
"""

from __future__ import annotations

import argparse
import time

from _args import load_paper, paper_names, seconds
from _results import Record, add_out_argument

from topoopt_ilp.methods import solve
from topoopt_ilp.models.common import ExactOptions
from topoopt_ilp.models.placement.milp import shortest_path_fractions, solve_placement, strategy_times
from topoopt_ilp.models.placement.scoring import StrategyScorer
from topoopt_ilp.models.placement.symmetric import symmetric_periods, symmetric_placement


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instances", type=paper_names, default="dlrm-128-d8")
    ap.add_argument("--periods", default="8", help="comma list of periods (those that do not apply are skipped)")
    ap.add_argument("--time-limit", type=seconds, default=60.0, help="seconds per solve, each side")
    add_out_argument(ap)
    args = ap.parse_args()
    record = Record(args)
    table = record.table(
        f"symmetric placement MILP vs solve_placement, HiGHS, {args.time_limit:g} s each; topology = "
        f"TopoOpt heuristic for the data-parallel start; shortest-path routing, shortest rings",
        [
            ("instance", "<14"),
            ("p", ">3"),
            ("status", ">9"),
            ("time_s", ">7.1f"),
            ("model_ms", ">9.3f"),
            ("eval_ms", ">9.3f"),
            ("inv_bound", ">9.3f"),
            ("nnz", ">8"),
            "|",
            ("place_ms", ">9.3f"),
            ("bound_ms", ">9.3f"),
            ("place_s", ">7.1f"),
            "|",
            ("sym/place", ">9.3f"),
        ],
    )
    print(table.title)
    print(table.header())
    for name in args.instances:
        inst = load_paper(name)
        X = solve(inst, method="heuristic").topology.matrix
        rf = shortest_path_fractions(X, inst.cluster.link_bytes_per_s)
        ls = StrategyScorer(inst, rf)
        periods = [p for p in map(int, args.periods.split(",")) if p in symmetric_periods(inst, rf)]
        if not periods:
            print(table.note(f"{name}: no period of {args.periods} applies (periods: {symmetric_periods(inst, rf)})"))
            continue
        t0 = time.perf_counter()
        place = solve_placement(inst, ExactOptions(time_limit_s=args.time_limit, gap=0.01), X)
        place_s = time.perf_counter() - t0
        for p in periods:
            t0 = time.perf_counter()
            res = symmetric_placement(inst, rf, p, ExactOptions(time_limit_s=args.time_limit, gap=1e-4), ls)
            sym_s = time.perf_counter() - t0
            ms = lambda v: None if v is None else v * 1e3  # noqa: E731
            ev = strategy_times(inst, rf, res.strategy)["iteration_time_s"] if res.strategy else None
            print(
                table.add(
                    name,
                    p,
                    res.status,
                    sym_s,
                    ms(res.objective_s),
                    ms(ev),
                    ms(res.bound_s),
                    res.nonzeros,
                    ms(place.objective),
                    ms(place.bound),
                    place_s,
                    None if ev is None else ev / place.objective,
                ),
                flush=True,
            )
    record.write()


if __name__ == "__main__":
    main()
