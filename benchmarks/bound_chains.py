"""How far the chain bound's own minimisers are from strategies, and the local search from them.

Each chain the bound's dynamic program returns (:func:`~topoopt_ilp.models.placement.bounds.chain_bound`,
recorded on the way) is scored as a real strategy (blocks by TopoOpt's rule) by the local search's
scorer, which is the evaluator's definition; then the local search runs from the best
memory-feasible ones.

Where the bound is weak its chains are far from feasible-looking strategies: the busiest server and
busiest arc of the best chains, against the bound's cell (compute threshold, bandwidth terms).

    .venv/bin/python benchmarks/bound_chains.py [--instance dlrm-128-d8] [--bound-s 60] [--search-s 50] [--starts 8]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _args import load_paper, paper_name, seconds
from _results import Record, add_out_argument

from topoopt_ilp.core.strategy import Strategy, place_blocks, server_memory
from topoopt_ilp.methods import solve
from topoopt_ilp.models.placement import bounds as pb
from topoopt_ilp.models.placement.local_search import improve_strategy
from topoopt_ilp.models.placement.milp import shortest_path_fractions
from topoopt_ilp.models.placement.scoring import StrategyScorer


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instance", type=paper_name, default="dlrm-128-d8")
    ap.add_argument("--bound-s", type=seconds, default=60.0, help="time limit of the chain bound")
    ap.add_argument("--search-s", type=seconds, default=50.0, help="seconds of local search from the best chains")
    ap.add_argument("--starts", type=int, default=8, help="how many of the best chains start it")
    add_out_argument(ap)
    args = ap.parse_args()
    record = Record(args)
    inst = load_paper(args.instance)
    w, n = inst.workload, inst.n
    X = solve(inst, method="heuristic").topology.matrix
    rf = shortest_path_fractions(X, inst.cluster.link_bytes_per_s, "shortest")
    ls = StrategyScorer(inst, rf)
    chains: set[tuple[int, ...]] = set()
    dp = pb._ChainData.dp

    def recording_dp(self, *a, **k):  # every minimiser the bound's DP returns, for inspection here only
        out = dp(self, *a, **k)
        if out[1] is not None:
            chains.add(tuple(int(t) for t in self.last_chain))
        return out

    pb._ChainData.dp = recording_dp
    t0 = time.perf_counter()
    try:
        bound, info = pb.chain_bound(inst, rf, ls, time_limit_s=args.bound_s)
    finally:
        pb._ChainData.dp = dp
    cell = info["chain_bound_cell"]
    bound_s = time.perf_counter() - t0
    record.table(
        "the chain bound and its cell (compute threshold, pair bandwidth, class-weighted bandwidth g)",
        [
            ("instance", ""),
            ("bound_ms", ".3f"),
            ("time_s", ".1f"),
            ("compute_ms", ".3f"),
            ("pair_bw_ms", ".3f"),
            ("class_bw_ms", ".3f"),
            ("chains", ""),
        ],
    ).add(
        args.instance,
        bound * 1e3,
        bound_s,
        *((None,) * 3 if cell is None else (cell[0] * 1e3, cell[1] * 1e3, cell[2] * 1e3)),
        len(chains),
    )
    print(
        f"{args.instance}: chain bound {bound * 1e3:.3f} ms in {bound_s:.1f} s"
        + (
            ""
            if cell is None
            else f"; its cell: compute >= {cell[0] * 1e3:.3f} ms, pair bandwidth >= "
            f"{cell[1] * 1e3:.3f} ms, class-weighted bandwidth g = {cell[2] * 1e3:.3f} ms"
        )
        + f"; {len(chains)} distinct chains"
    )
    scored = []
    for ch in chains:
        t = np.array(ch)
        k = tuple(int(v) for v in ls.type_k[t])
        s = tuple(int(v) for v in ls.type_s[t])
        st = Strategy(k, s, place_blocks(w, n, k, s))
        ls.load_state(st)
        fits = bool((server_memory(w, n, st) <= w.server_memory_bytes * (1 + 1e-9)).all())
        scored.append((ls.score()[0], float(ls.comp.max()), float((ls.total_load() * ls.arc_inv).max()), fits, st))
    scored.sort(key=lambda r: r[0])
    ranked = record.table(
        "the 10 best chains scored as strategies",
        [
            ("rank", ">4"),
            ("iter_ms", ">8.3f"),
            ("busiest_server_ms", ">17.3f"),
            ("busiest_arc_ms", ">14.3f"),
            ("memory_ok", ">9"),
            "",
            ("degrees", ""),
        ],
    )
    print(ranked.header())
    for r, (it, comp, bw, fits, st) in enumerate(scored[:10]):
        print(ranked.add(r, it * 1e3, comp * 1e3, bw * 1e3, fits, list(st.layer_degree)))
    starts = [r[4] for r in scored if r[3]][: args.starts]
    if starts:
        t0 = time.perf_counter()
        best = improve_strategy(inst, rf, starts, args.search_s, ls=ls)
        ls.load_state(best)
        search_s = time.perf_counter() - t0
        record.table(
            "the local search from the best memory-feasible chains",
            [("starts", ""), ("iter_ms", ".3f"), ("time_s", ".1f")],
        ).add(len(starts), ls.score()[0] * 1e3, search_s)
        print(
            f"local search from the best {len(starts)} memory-feasible chains: {ls.score()[0] * 1e3:.3f} ms "
            f"in {search_s:.1f} s"
        )
    record.write()


if __name__ == "__main__":
    main()
