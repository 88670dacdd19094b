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
from topoopt_ilp.models.placement.blocks import place_blocks_exactly
from topoopt_ilp.models.common import ExactOptions
from topoopt_ilp.models.placement.milp import shortest_path_fractions, solve_placement
from topoopt_ilp.models.placement.scoring import StrategyScorer

from topoopt_ilp.evaluation.evaluate import evaluate
from topoopt_ilp.methods import solve
from topoopt_ilp.core.strategy import parse_strategy


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instances", type=paper_names, default="dlrm-128-d8,ncf-128-d8")
    ap.add_argument("--seeds", type=int_list, default="0,1,2")
    ap.add_argument("--time-limit", type=seconds, default=60.0, help="seconds per solve_placement call")
    args = ap.parse_args()
    print(f"solve_placement, exact block move off / on, HiGHS, {args.time_limit:g} s each; topology = TopoOpt "
          f"heuristic for the data-parallel start; shortest-path routing, shortest rings")
    print(f"{'instance':<12} {'seed':>4} {'off_ms':>8} {'on_ms':>8} {'on/off':>7} {'eval_ok':>7} {'bound_ms':>8} "
          f"{'off_s':>6} {'on_s':>6}")
    for name in args.instances:
        inst = load_paper(name)
        X = solve(inst, method="heuristic").topology.matrix
        first_off = None
        for seed in args.seeds:
            res, secs = {}, {}
            for on in (False, True):
                t0 = time.perf_counter()
                res[on] = solve_placement(inst, ExactOptions(time_limit_s=args.time_limit, gap=0.01, seed=seed), X,
                                          exact_blocks=on)
                secs[on] = time.perf_counter() - t0
            ok = all(abs(evaluate(inst, s, routing="shortest_path").iteration_time_s - s.objective) <= 1e-6 * s.objective
                     for s in res.values())
            first_off = first_off or res[False]
            print(f"{name:<12} {seed:>4} {res[False].objective * 1e3:8.3f} {res[True].objective * 1e3:8.3f} "
                  f"{res[True].objective / res[False].objective:7.4f} {ok!s:>7} {res[True].bound * 1e3:8.3f} "
                  f"{secs[False]:6.1f} {secs[True]:6.1f}")
        rf = shortest_path_fractions(X, inst.cluster.link_bytes_per_s)
        ls = StrategyScorer(inst, rf)
        st = parse_strategy(first_off.placement, inst.workload, inst.n)
        ls.lookup_per_server(ls.type_of[(st.layer_degree[inst.workload.blocks[0].consumer],
                                         st.layer_start[inst.workload.blocks[0].consumer])])  # its table, not timed
        t0 = time.perf_counter()
        blk = place_blocks_exactly(ls, st, ExactOptions(time_limit_s=args.time_limit))
        print(f"{name:<12} the block MILP alone on the first 'off' result: {blk.status} in "
              f"{time.perf_counter() - t0:.2f} s, {first_off.objective * 1e3:.3f} -> "
              f"{blk.objective_s * 1e3:.3f} ms ({blk.nonzeros:,} non-zeros)")


if __name__ == "__main__":
    main()
