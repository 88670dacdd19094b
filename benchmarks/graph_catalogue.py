"""Generate the shipped catalogues of regular graphs (``models/topology/data/regular_graphs/n{n:02d}_d{d}.g6``).

Dev-only tool: it needs ``python-igraph`` (BLISS canonical forms), which is NOT a dependency of the
package. The package only reads the files; ``tests/models/test_graph_catalogue.py`` proves them
complete and correct with networkx alone (counts, degrees, connectivity, pairwise non-isomorphism,
and the orbit-counting identity sum_G n!/|Aut G| = number of labelled connected d-regular graphs).

Method. Every simple graph with a given degree sequence is reachable from any other by double-edge
swaps ({a,b},{c,d} -> {a,c},{b,d}; Taylor 1981, also Hakimi 1962), so a breadth-first search over
isomorphism classes (canonical forms), started from one Havel-Hakimi realisation and applying every
swap to every class, reaches every class - connected or not. The catalogue keeps the connected
ones. For d > (n - 1) / 2 the classes are the complements of the (n - 1 - d)-regular ones
(complementation is a bijection on isomorphism classes), which is much faster to search.

    python benchmarks/graph_catalogue.py generate [--max-n 12] [--max-low-degree 5]
    python benchmarks/graph_catalogue.py search [--sizes 8x3,8x4,10x3,12x3,12x4]

``search`` runs the catalogue search (the exact method of ``topology_routing`` for uniform
all-to-all demand) and prints, per size, the optimum, the candidates and LPs it took, and the time.
"""

from __future__ import annotations

import argparse
import time
from functools import cache
from pathlib import Path

import networkx as nx
from _args import seconds
from _results import Record, add_out_argument

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "models" / "data" / "regular_graphs"


def _canonical(n: int, edges) -> tuple[tuple[int, int], ...]:
    import igraph as ig  # dev-only: see the module docstring

    g = ig.Graph(n=n, edges=list(edges))
    g = g.permute_vertices(g.canonical_permutation())
    return tuple(sorted((min(a, b), max(a, b)) for a, b in g.get_edgelist()))


@cache
def all_classes(degrees: tuple[int, ...]) -> frozenset[tuple[tuple[int, int], ...]]:
    """Every isomorphism class (canonical edge list) of simple graphs with this degree sequence
    (cached: d and n - 1 - d share one search, e.g. n = 12, d = 5 and 6)."""
    n = len(degrees)
    start = _canonical(n, nx.havel_hakimi_graph(degrees).edges())
    seen, queue = {start}, [start]
    while queue:
        edges = list(queue.pop())
        present = set(edges)
        for i, (a, b) in enumerate(edges):
            for j in range(i + 1, len(edges)):
                c, d = edges[j]
                for (p, q), (r, s) in (((a, c), (b, d)), ((a, d), (b, c))):
                    e1, e2 = (min(p, q), max(p, q)), (min(r, s), max(r, s))
                    if p == q or r == s or e1 == e2 or e1 in present or e2 in present:
                        continue
                    swapped = [e for k, e in enumerate(edges) if k != i and k != j] + [e1, e2]
                    form = _canonical(n, swapped)
                    if form not in seen:
                        seen.add(form)
                        queue.append(form)
    return frozenset(seen)


def connected_regular(n: int, d: int) -> list[nx.Graph]:
    """The connected d-regular simple graphs on n vertices, one per isomorphism class."""
    low = min(d, n - 1 - d)
    graphs = []
    for edges in all_classes((low,) * n) if low > 0 else [()]:
        g = nx.empty_graph(n)
        g.add_edges_from(edges)
        if low != d:
            g = nx.complement(g)
        if nx.is_connected(g):
            graphs.append(g)
    return graphs


def write_catalogue(n: int, d: int) -> int:
    """Write ``n{n:02d}_d{d}.g6``; returns the number of classes."""
    graphs = connected_regular(n, d)
    # Sorted by the hop-distance total W (the catalogue search's bound order), then graph6.
    lines = sorted(
        (
            int(sum(sum(dist.values()) for _, dist in nx.all_pairs_shortest_path_length(g))),
            nx.to_graph6_bytes(g, header=False).strip(),
        )
        for g in graphs
    )
    (OUT / f"n{n:02d}_d{d}.g6").write_bytes(b"".join(line + b"\n" for _, line in lines))
    return len(graphs)


def generate(max_n: int, max_low_degree: int, record: Record | None = None) -> None:
    record = record or Record()
    table = record.table(
        f"connected regular graphs written to {OUT.relative_to(ROOT)}, n <= {max_n}",
        [("n", ">3"), ("d", ">3"), ("classes", ">7"), ("time_s", ">8.2f")],
    )
    print(table.header())
    OUT.mkdir(parents=True, exist_ok=True)
    for n in range(3, max_n + 1):
        for d in range(2, n):
            if n * d % 2:
                continue
            if min(d, n - 1 - d) > max_low_degree:
                print(table.note(f"n={n} d={d} skipped (neither d nor n - 1 - d is at most {max_low_degree})"))
                continue
            started = time.perf_counter()
            count = write_catalogue(n, d)
            print(table.add(n, d, count, time.perf_counter() - started), flush=True)


def search(sizes: str, limit: float, record: Record | None = None) -> None:
    from topoopt_ilp import Cluster, Demand, Instance, solve

    record = record or Record()
    table = record.table(
        f"catalogue search, all-to-all demand, throughput, time limit {limit:g} s",
        [
            ("size", "<8"),
            ("status", "<9"),
            ("lambda", ">10.6f"),
            ("candidates", ">10"),
            ("LPs", ">5"),
            ("time", ">7.2f", "s"),
            "",
            ("algorithm", ""),
        ],
    )
    print(table.header())
    for size in sizes.split(","):
        n, d = map(int, size.split("x"))
        inst = Instance(Cluster(n, d, 100.0, hop_latency_us=0.0), Demand(all_to_all=1e6), objective="throughput")
        t = time.perf_counter()
        sol = solve(inst, method="exact", warm_start="none", time_limit_s=limit)
        secs = time.perf_counter() - t
        det = sol.details
        print(
            table.add(
                size,
                sol.status,
                det.get("catalogue_lambda"),
                det.get("catalogue_candidates"),
                det.get("catalogue_lps"),
                secs,
                det.get("algorithm", "milp"),
            ),
            flush=True,
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    g = sub.add_parser("generate", help="write the catalogue files (needs python-igraph)")
    g.add_argument("--max-n", type=int, default=12)
    g.add_argument("--max-low-degree", type=int, default=5)
    add_out_argument(g)
    s = sub.add_parser("search", help="run the catalogue search on all-to-all instances")
    s.add_argument("--sizes", default="8x3,8x4,10x3,10x4,12x3,12x4")
    s.add_argument("--limit", type=seconds, default=60.0)
    add_out_argument(s)
    args = ap.parse_args()
    record = Record(args)
    if args.command == "generate":
        generate(args.max_n, args.max_low_degree, record)
    else:
        search(args.sizes, args.limit, record)
    record.write()


if __name__ == "__main__":
    main()
