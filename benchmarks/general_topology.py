"""The edge-swap search on the order/degree problem (Graph Golf) against known and proven bounds.

For graph-golf sizes up to 64 servers: the diameter and ASPL the search reaches in a time budget
(from the best circulants and a random regular graph; the search stops early where it meets the
Moore bound) against the degree/diameter table (the least k whose largest known graph of degree d
and diameter k has at least n vertices: a lower bound on the diameter when the order for k - 1 is
proven largest; Combinatorics Wiki) and the Moore bound on the diameter and
the ASPL (the lower bound Graph Golf measures its ASPL gap against). At 128 and 512 servers (1,024
with --large): against the known diameter (the same table), the Moore bound and the best circulant.
Every graph is re-scored by networkx.
Then objective throughput at 64 and 128 servers (uniform all-to-all and a random model-parallel
demand): ``--method exact`` (the edge-swap search scored by the evaluator) against TopoOpt's design
(``--method heuristic``, the search's start) and the best circulant, under the Moore traffic bound;
every design is scored by the evaluator and verified.

    .venv/bin/python benchmarks/general_topology.py [--time-limit 30] [--seed 0] [--large] [--out]
"""

from __future__ import annotations

import argparse

import networkx as nx
import numpy as np
from _args import seconds
from _results import Record, add_out_argument

from topoopt_ilp import files
from topoopt_ilp.evaluation.evaluate import evaluate
from topoopt_ilp.evaluation.verify import verify
from topoopt_ilp.methods import solve
from topoopt_ilp.models.topology.edge_swap import circulant_starts, edge_swap_search, hop_bounds

#: Orders of the largest known undirected graphs of maximum degree d and diameter k = 2, 3, 4, ...
#: (Combinatorics Wiki, "The Degree Diameter Problem for General Graphs"; the same table on
#: en.wikipedia.org/wiki/Table_of_the_largest_known_graphs_of_a_given_diameter_and_maximal_degree).
#: Proven largest: d = 3 for k = 2, 3, 4 and k = 2 for d = 4..7.
LARGEST_KNOWN = {
    3: (10, 20, 38, 70, 132, 196, 360),
    4: (15, 41, 98, 364, 740, 1320),
    5: (24, 72, 212, 624),
    6: (32, 111, 390, 1404),
    7: (50, 168, 672, 2756),
    8: (57, 253, 1100, 5060),
}
PROVEN_LARGEST = {(3, 2), (3, 3), (3, 4), (4, 2), (5, 2), (6, 2), (7, 2)}

#: Graph-golf sizes up to 64 servers: the 2015 competition's featured orders 16 and 64 with degrees 3
#: and 4 (research.nii.ac.jp/graphgolf/2015/rules.html), the sizes up to 30 servers where
#: `--method exact` alone fell short (issue 38: (20, 3), (20, 5), (25, 6), (30, 4)), Petersen's
#: (10, 3) and 32 servers.
SMALL = [(10, 3), (16, 3), (16, 4), (20, 3), (20, 5), (25, 6), (30, 4), (32, 3), (32, 4), (64, 3), (64, 4)]
LARGE = [(128, 4), (128, 8), (512, 4), (512, 8)]
#: Objective throughput: (servers, degree, demand); "mp": a fifth of the ordered pairs, 1-8 MB each.
THROUGHPUT = [(64, 4, "all-to-all"), (64, 4, "mp"), (128, 4, "all-to-all"), (128, 8, "mp")]


def known_diameter(n: int, d: int) -> tuple[int | None, bool]:
    """(the least k whose largest known graph of degree d and diameter k has at least n vertices,
    whether k is a proven lower bound on the diameter of n vertices: the order for k - 1 is proven
    largest or below the Moore bound)."""
    for k, order in enumerate(LARGEST_KNOWN.get(d, ()), start=2):
        if order >= n:
            below = (d, k - 1) in PROVEN_LARGEST or k - 1 < hop_bounds(n, d)[0]
            return k, below
    return None, False


def nx_scores(X: np.ndarray) -> tuple[int, float, int]:
    """(diameter, ASPL, max degree) by networkx, independently of the search's score."""
    g = nx.from_numpy_array(X)
    assert nx.is_connected(g), "the search returned a disconnected graph"
    return nx.diameter(g), nx.average_shortest_path_length(g), max(dict(g.degree()).values())


def throughput_instance(n: int, d: int, demand: str, seed: int):
    """A demand instance of objective throughput: uniform all-to-all (1 MB a pair) or random MP."""
    if demand == "all-to-all":
        traffic: dict = {"all_to_all": 1e6}
    else:
        rng = np.random.default_rng(seed)
        pairs = [[s, t, float(rng.integers(1, 9)) * 1e6] for s in range(n) for t in range(n) if s != t]
        traffic = {"mp": {"pairs": [p for p in pairs if rng.random() < 0.2]}}
    cluster = {"servers": n, "degree": d, "link_bandwidth_gbps": 100, "multi_links": False}
    return files.parse_instance(
        {"format": "topoopt-instance", "version": 1, "cluster": cluster, "demand": traffic, "objective": "throughput"}
    )


def throughput_table(record: Record, args: argparse.Namespace) -> None:
    table = record.table(
        f"objective throughput: --method exact (edge swaps scored by the evaluator) in {args.time_limit:g} s "
        f"against TopoOpt's design and the best circulant (seed {args.seed}; iterations/s)",
        [
            ("n", ">4"),
            ("d", ">2"),
            ("demand", "<10"),
            ("topoopt", ">9.2f"),
            ("circulant", ">9.2f"),
            ("edge swap", ">9.2f"),
            ("vs topoopt", ">10.3f", "x"),
            ("bound", ">9.2f"),
            ("gap", ">7.2%"),
            ("evals", ">6"),
            ("floor refused", ">13"),
            ("wall_s", ">6.1f"),
        ],
    )
    print()
    print(table.title)
    print(table.header())
    for n, d, demand in THROUGHPUT:
        inst = throughput_instance(n, d, demand, args.seed)
        heuristic = solve(inst, method="heuristic", seed=args.seed)
        circulant = evaluate(inst, circulant_starts(n, d, seed=args.seed)[0][1]).throughput
        sol = solve(inst, method="exact", time_limit_s=args.time_limit, seed=args.seed)
        assert sol.details["algorithm"] == "edge_swap" and verify(inst, sol).valid
        value = evaluate(inst, sol).throughput  # the design with its routing (TopoOpt's own, when it is returned)
        assert value == sol.objective
        search = sol.details["edge_swap"]
        print(
            table.add(
                n,
                d,
                demand,
                heuristic.objective,
                circulant,
                value,
                value / heuristic.objective,
                sol.bound,
                sol.gap,
                search["evaluations"],
                search["refused_by_floor"],
                sol.wall_time_s,
            ),
            flush=True,
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=seconds, default=30.0, help="seconds per size (default 30)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--large", action="store_true", help="also 1,024 servers (degree 4 and 8)")
    add_out_argument(ap)
    args = ap.parse_args()
    record = Record(args)

    small = record.table(
        f"order/degree problem up to 64 servers: edge swaps in {args.time_limit:g} s (seed {args.seed}; "
        "stops early at the Moore bound)",
        [
            ("n", ">4"),
            ("d", ">2"),
            ("known diam", ">10"),
            ("proven", ">6"),
            ("moore diam", ">10"),
            ("circ diam", ">9"),
            ("diam", ">4"),
            ("aspl", ">7.4f"),
            ("moore aspl", ">10.4f"),
            ("aspl gap", ">8.2%"),
            ("at_s", ">6.1f"),
            ("start", "<22"),
        ],
    )
    print(small.title)
    print(small.header())
    met = 0
    for n, d in SMALL:
        known, proven = known_diameter(n, d)
        lb_diam, lb_aspl = hop_bounds(n, d)
        starts = circulant_starts(n, d, seed=args.seed)
        circ = nx_scores(starts[0][1])[0] if starts else None
        res = edge_swap_search(
            n, d, starts, time_limit_s=args.time_limit, seed=args.seed, target=(lb_diam, round(lb_aspl * n * (n - 1)))
        )
        diam, aspl, top = nx_scores(res.matrix)
        assert top <= d and (diam, round(aspl * n * (n - 1))) == (res.diameter, res.distance_total)
        met += diam == known
        print(
            small.add(
                n,
                d,
                known,
                "yes" if proven else "no",
                lb_diam,
                circ,
                diam,
                aspl,
                lb_aspl,
                (aspl - lb_aspl) / lb_aspl,
                res.best_found_s,
                res.start.split(" (")[0],
            ),
            flush=True,
        )
    small.notes.append(f"known diameter reached at {met} of {len(SMALL)} sizes")
    record.ratios["small_sizes_at_known_diameter"] = met / len(SMALL)

    large = record.table(
        f"128 and 512 servers{' and 1,024' if args.large else ''}: edge swaps in {args.time_limit:g} s "
        f"against the known diameter, the Moore bound and the best circulant (seed {args.seed})",
        [
            ("n", ">5"),
            ("d", ">2"),
            ("known diam", ">10"),
            ("moore diam", ">10"),
            ("circ diam", ">9"),
            ("circ aspl", ">9.4f"),
            ("diam", ">4"),
            ("aspl", ">7.4f"),
            ("moore aspl", ">10.4f"),
            ("aspl gap", ">8.2%"),
            ("swaps", ">7"),
            ("at_s", ">6.1f"),
        ],
    )
    print()
    print(large.title)
    print(large.header())
    sizes = LARGE + ([(1024, 4), (1024, 8)] if args.large else [])
    within = 0
    for n, d in sizes:
        known, _ = known_diameter(n, d)
        lb_diam, lb_aspl = hop_bounds(n, d)
        starts = circulant_starts(n, d, seed=args.seed)
        circ_diam, circ_aspl, _ = nx_scores(starts[0][1])
        res = edge_swap_search(n, d, starts, time_limit_s=args.time_limit, seed=args.seed)
        diam, aspl, top = nx_scores(res.matrix)
        assert top <= d
        within += known is not None and diam <= known + 1
        print(
            large.add(
                n,
                d,
                known,
                lb_diam,
                circ_diam,
                circ_aspl,
                diam,
                aspl,
                lb_aspl,
                (aspl - lb_aspl) / lb_aspl,
                res.swaps_tried,
                res.best_found_s,
            ),
            flush=True,
        )
    large.notes.append(f"within one hop of the known diameter at {within} of {len(sizes)} sizes")
    record.ratios["large_sizes_within_one_hop_of_known"] = within / len(sizes)
    throughput_table(record, args)
    record.write()


if __name__ == "__main__":
    main()
