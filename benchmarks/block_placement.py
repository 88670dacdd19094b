"""The local search with and without the exact block move, side by side, same time limit.

For each instance with blocks (DLRM's and NCF's embedding tables), on TopoOpt's heuristic topology
for the data-parallel start: :func:`~topoopt_ilp.models.placement.milp.solve_placement` (1 % gap asked,
``--time-limit`` in all) with ``exact_blocks`` off (the single-block moves only, the search before
session 22) and on (each local-search call ends by re-placing its best strategy's blocks with
:func:`~topoopt_ilp.models.placement.blocks.place_blocks_exactly` and descending again), for each
seed of ``--seeds``. The search's result moves by several per cent with the clock alone (its
phases share time by the clock), so compare the columns over seeds, not row by row. Printed: iteration time of each (``eval_ok``: equal to the independent
evaluator's), the ratio on / off, and the bound (the same for both: the relaxation bounds). Then
the exact block MILP alone on the ``off`` result of the first seed: its time, and how much it gains
for those layers. Timings are wall-clock on a shared machine: compare within one run.

    .venv/bin/python benchmarks/block_placement.py [--instances dlrm-128-d8,ncf-128-d8] [--seeds 0,1]
                                                 [--time-limit 60]
"""

from __future__ import annotations

import argparse
import time

from _args import int_list, load_paper, paper_names, seconds
from _results import Record, add_out_argument

from topoopt_ilp.core.strategy import parse_strategy
from topoopt_ilp.evaluation.evaluate import evaluate
from topoopt_ilp.methods import solve
from topoopt_ilp.models.common import ExactOptions
from topoopt_ilp.models.placement.blocks import place_blocks_exactly
from topoopt_ilp.models.placement.milp import shortest_path_fractions, solve_placement
from topoopt_ilp.models.placement.scoring import StrategyScorer


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instances", type=paper_names, default="dlrm-128-d8,ncf-128-d8")
    ap.add_argument("--seeds", type=int_list, default="0,1,2")
    ap.add_argument("--time-limit", type=seconds, default=60.0, help="seconds per solve_placement call")
    add_out_argument(ap)
    args = ap.parse_args()
    record = Record(args)
    table = record.table(
        f"solve_placement, exact block move off / on, HiGHS, {args.time_limit:g} s each; topology = TopoOpt "
        f"heuristic for the data-parallel start; shortest-path routing, shortest rings",
        [
            ("instance", "<12"),
            ("seed", ">4"),
            ("off_ms", ">8.3f"),
            ("on_ms", ">8.3f"),
            ("on/off", ">7.4f"),
            ("eval_ok", ">7"),
            ("bound_ms", ">8.3f"),
            ("off_s", ">6.1f"),
            ("on_s", ">6.1f"),
        ],
    )
    alone = record.table(
        "the block MILP alone on the first seed's 'off' result",
        [
            ("instance", "<12"),
            ("status", ">9"),
            ("time_s", ">7.2f"),
            ("off_ms", ">8.3f"),
            ("block_ms", ">8.3f"),
            ("nonzeros", ">10,"),
        ],
    )
    print(table.title)
    print(table.header())
    for name in args.instances:
        inst = load_paper(name)
        X = solve(inst, method="heuristic").topology.matrix
        first_off = None
        for seed in args.seeds:
            res, secs = {}, {}
            for on in (False, True):
                t0 = time.perf_counter()
                res[on] = solve_placement(
                    inst, ExactOptions(time_limit_s=args.time_limit, gap=0.01, seed=seed), X, exact_blocks=on
                )
                secs[on] = time.perf_counter() - t0
            ok = all(
                abs(evaluate(inst, s, routing="shortest_path").iteration_time_s - s.objective) <= 1e-6 * s.objective
                for s in res.values()
            )
            first_off = first_off or res[False]
            print(
                table.add(
                    name,
                    seed,
                    res[False].objective * 1e3,
                    res[True].objective * 1e3,
                    res[True].objective / res[False].objective,
                    ok,
                    res[True].bound * 1e3,
                    secs[False],
                    secs[True],
                ),
                flush=True,
            )
        rf = shortest_path_fractions(X, inst.cluster.link_bytes_per_s)
        ls = StrategyScorer(inst, rf)
        st = parse_strategy(first_off.placement, inst.workload, inst.n)
        ls.lookup_per_server(
            ls.type_of[
                (st.layer_degree[inst.workload.blocks[0].consumer], st.layer_start[inst.workload.blocks[0].consumer])
            ]
        )  # its table, not timed
        t0 = time.perf_counter()
        blk = place_blocks_exactly(ls, st, ExactOptions(time_limit_s=args.time_limit))
        blk_s = time.perf_counter() - t0
        alone.add(name, blk.status, blk_s, first_off.objective * 1e3, blk.objective_s * 1e3, blk.nonzeros)
        print(
            f"{name:<12} the block MILP alone on the first 'off' result: {blk.status} in "
            f"{blk_s:.2f} s, {first_off.objective * 1e3:.3f} -> "
            f"{blk.objective_s * 1e3:.3f} ms ({blk.nonzeros:,} non-zeros)"
        )
    record.write()


if __name__ == "__main__":
    main()
