"""The shipped regular-graph catalogues are complete and correct (without igraph), and the catalogue
search is the exact topology method for uniform all-to-all demand (against the MILP, brute force
over multigraphs, the evaluator and the verifier)."""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from functools import cache

import networkx as nx
import numpy as np
import pytest

from conftest import bounded_multigraphs, minimal
from topoopt_ilp import files
from topoopt_ilp.core.solution import Topology
from topoopt_ilp.evaluation.evaluate import evaluate
from topoopt_ilp.evaluation.verify import verify
from topoopt_ilp.methods import solve
from topoopt_ilp.models.common import ExactOptions
from topoopt_ilp.models.topology import catalogue as gc
from topoopt_ilp.models.topology.solve import solve_topology_routing

B = 8.0  # Gbps: 1e9 bytes/s per link, so with 1e9 bytes per pair lambda is in the model's units
SIZES = gc.catalogue_sizes()
# Connected regular graphs: cubic OEIS A002851, quartic A006820, quintic A006821, sextic A006822; a
# cycle, K_n and K_n minus a perfect matching are alone in their class. (n = 12: the 6-regular graphs
# are the complements of all 5-regular ones, the 7848 connected and two K6's, hence one more.)
KNOWN_COUNTS = {
    (4, 3): 1,
    (6, 3): 2,
    (8, 3): 5,
    (10, 3): 19,
    (12, 3): 85,
    (5, 4): 1,
    (6, 4): 1,
    (7, 4): 2,
    (8, 4): 6,
    (9, 4): 16,
    (10, 4): 59,
    (11, 4): 265,
    (12, 4): 1544,
    (6, 5): 1,
    (8, 5): 3,
    (10, 5): 60,
    (12, 5): 7848,
    (7, 6): 1,
    (8, 6): 1,
    (9, 6): 4,
    (10, 6): 21,
    (11, 6): 266,
    (12, 6): 7849,
}


def inst(n, d, *, multi=True, regular=True, latency=0.0, objective="throughput", demand=None, directed=False):
    cluster = {
        "servers": n,
        "degree": d,
        "link_bandwidth_gbps": B,
        "hop_latency_us": latency,
        "multi_links": multi,
        "regular": regular,
    }
    if directed:
        cluster["links"] = "directed"
    return files.parse_instance(minimal(cluster=cluster, demand=demand or {"all_to_all": 1e9}, objective=objective))


def _vertex_invariants(adj: np.ndarray) -> np.ndarray:
    """(G, n, 5): closed walks of length 2..6 at each vertex (preserved by every isomorphism)."""
    a = adj.astype(np.int64)
    power, cols = a.copy(), []
    for _ in range(5):
        power = power @ a
        cols.append(np.diagonal(power, axis1=1, axis2=2))
    return np.stack(cols, axis=2)


def _labelled_graphs(adj: np.ndarray) -> list[nx.Graph]:
    out = []
    for a, inv in zip(adj, _vertex_invariants(adj)):
        g = nx.from_numpy_array(a)
        nx.set_node_attributes(g, {v: tuple(inv[v]) for v in range(len(a))}, "inv")
        out.append(g)
    return out


def _low_degree_side(n, d):
    """The catalogue's graphs, or their complements when those have the lower degree (isomorphism and
    automorphisms are the same for a graph and its complement; the low side is faster to check)."""
    adj = np.asarray(gc.regular_graphs(n, d))
    if d > (n - 1) / 2:
        adj = 1 - adj - np.eye(n, dtype=np.int64)[None]
    return adj


# ------------------------------------------------------------------------------------------------
# The catalogues
# ------------------------------------------------------------------------------------------------
def test_shipped_sizes_include_what_12x4_needs():
    assert (12, 4) in SIZES and (8, 3) in SIZES and (8, 4) in SIZES
    assert all(n * d % 2 == 0 and 2 <= d < n <= 12 for n, d in SIZES)
    # every size up to 12 vertices (12x5 and 12x6 too), so the tests below check them all
    assert SIZES == [(n, d) for n in range(3, 13) for d in range(2, n) if n * d % 2 == 0]


@pytest.mark.parametrize("n, d", SIZES)
def test_catalogue_holds_connected_simple_regular_graphs_decoded_like_networkx(n, d):
    adj = gc.regular_graphs(n, d)
    lines = gc._catalogue_path(n, d).read_bytes().split()
    assert adj.shape == (len(lines), n, n)
    for line, a in zip(lines, adj):  # the numpy decoder against networkx's
        assert (nx.to_numpy_array(nx.from_graph6_bytes(line), nodelist=range(n), dtype=np.int64) == a).all()
    assert ((adj == 0) | (adj == 1)).all() and (adj == adj.transpose(0, 2, 1)).all()
    assert (np.diagonal(adj, axis1=1, axis2=2) == 0).all() and (adj.sum(axis=2) == d).all()
    assert np.isfinite(gc.hop_distance_totals(adj)).all()  # connected
    if (n, d) in KNOWN_COUNTS:
        assert len(adj) == KNOWN_COUNTS[(n, d)]
    if d in (2, n - 1, n - 2):
        assert len(adj) == 1


@pytest.mark.parametrize("n, d", SIZES)
def test_catalogue_classes_are_pairwise_non_isomorphic(n, d):
    adj = _low_degree_side(n, d)
    graphs = _labelled_graphs(adj)
    buckets = defaultdict(list)
    for g, inv in zip(graphs, _vertex_invariants(adj)):
        buckets[tuple(sorted(map(tuple, inv)))].append(g)
    for bucket in buckets.values():
        for g, h in itertools.combinations(bucket, 2):
            assert not nx.vf2pp_is_isomorphic(g, h, node_label="inv")


@cache
def _labelled_by_degrees(degrees: tuple[int, ...]) -> int:
    """Labelled simple graphs with this degree sequence (sorted, zeros dropped): the first vertex
    picks its neighbours among the others, then recurse (the count is symmetric in the degrees)."""
    if not degrees:
        return 1
    first, rest = degrees[0], degrees[1:]
    total = 0
    for chosen in itertools.combinations(range(len(rest)), first):
        left = list(rest)
        for i in chosen:
            left[i] -= 1
        total += _labelled_by_degrees(tuple(sorted((x for x in left if x > 0), reverse=True)))
    return total


def _labelled_regular(m: int, d: int) -> int:
    if m == 0:
        return 1
    if d > m - 1:
        return 0
    return _labelled_by_degrees((min(d, m - 1 - d),) * m) if min(d, m - 1 - d) > 0 else 1


def _labelled_connected_regular(n: int, d: int) -> int:
    """Components of a d-regular graph are d-regular: split off the component of vertex 1 (size k)."""
    c = {}
    for m in range(1, n + 1):
        c[m] = _labelled_regular(m, d) - sum(
            math.comb(m - 1, k - 1) * c[k] * _labelled_regular(m - k, d) for k in range(1, m)
        )
    return c[n]


def test_labelled_counts_match_closed_forms():
    # Labelled 2-regular graphs on 5 vertices: 12 (5-cycles) ; cubic on 4: K4 only; on 6: 70 (OEIS A002829).
    assert _labelled_regular(5, 2) == 12 and _labelled_regular(4, 3) == 1 and _labelled_regular(6, 3) == 70
    assert _labelled_connected_regular(6, 2) == 60 and _labelled_regular(6, 2) == 70  # 6-cycles + two triangles


def _automorphisms(g: nx.Graph) -> int:
    """|Aut g|: a product over the classes of isomorphic components, |Aut C|^m m! (listing the
    automorphisms of a disjoint union of m copies would take that many steps)."""
    comps = [g.subgraph(c).copy() for c in nx.connected_components(g)]
    classes: list[list[nx.Graph]] = []
    for c in comps:
        for cls in classes:
            if nx.vf2pp_is_isomorphic(cls[0], c, node_label="inv"):
                cls.append(c)
                break
        else:
            classes.append([c])
    total = 1
    for cls in classes:
        total *= sum(1 for _ in nx.vf2pp_all_isomorphisms(cls[0], cls[0], node_label="inv")) ** len(
            cls
        ) * math.factorial(len(cls))
    return total


@pytest.mark.parametrize("n, d", SIZES)
def test_catalogue_is_complete_by_orbit_counting(n, d):
    # Each class G stands for n!/|Aut G| labelled graphs; with the classes pairwise non-isomorphic
    # (test above) the sum reaches the number of labelled connected d-regular graphs only if no
    # class is missing. (K_n, d = n - 1, is alone by the count test; its n! automorphisms are too
    # many to list.)
    if d == n - 1:
        pytest.skip("K_n: n! automorphisms")
    adj = _low_degree_side(n, d)
    labelled = 0
    for g in _labelled_graphs(adj):
        automorphisms = _automorphisms(g)
        assert math.factorial(n) % automorphisms == 0
        labelled += math.factorial(n) // automorphisms
    assert labelled == _labelled_connected_regular(n, d)


# ------------------------------------------------------------------------------------------------
# The bounds of the proof
# ------------------------------------------------------------------------------------------------
def test_layered_floor_is_the_moore_sum():
    assert gc.layered_floor(11, 4, 3) == 4 + 2 * 7  # n = 12, d = 4: 4 at distance 1, 7 at 2
    assert gc.layered_floor(11, 3, 3) == 3 + 2 * 8
    assert gc.layered_floor(5, 0, 3) == math.inf and gc.layered_floor(0, 0, 3) == 0
    assert gc.layered_floor(6, 2, 1) == 2 * (1 + 2 + 3)  # a cycle


def test_12x4_bounds_exclude_everything_outside_the_simple_catalogue():
    bounds = {b.name: b.bound for b in gc.uncovered_bounds(12, 4, regular=True, multi_links=True)}
    assert bounds["d-regular, one double link"] == pytest.approx(44 / 202)  # sharper than 48 / 218
    assert bounds["d-regular, other multi-links"] == pytest.approx(48 / 220)
    assert max(bounds.values()) < 7 / 32
    assert gc.uncovered_bounds(12, 4, regular=True, multi_links=False) == ()


def _multigraphs(n, d, regular):
    """Every labelled loopless multigraph on n vertices with degrees <= d (== d when regular)."""
    return np.array([x.copy() for x in bounded_multigraphs(n, d, regular=regular)])


def _classes(xs):
    """One representative per isomorphism class (canonical form: the least upper triangle over all
    relabellings)."""
    n = xs.shape[1]
    perms = np.array(list(itertools.permutations(range(n))))
    iu, ju = np.triu_indices(n, 1)
    weights = (xs.max() + 1) ** np.arange(len(iu))[::-1]
    codes = []
    for chunk in np.array_split(xs, max(1, len(xs) // 200)):
        relabelled = chunk[:, perms[:, iu], perms[:, ju]]  # (G, perms, pairs)
        codes.append((relabelled * weights).sum(axis=2).min(axis=1))
    _, first = np.unique(np.concatenate(codes), return_index=True)
    return xs[np.sort(first)]


def _l_distance_total(x):
    """sum over ordered pairs of dist_l with l = 0 on links of multiplicity >= 2, 1 elsewhere."""
    w = np.where(x >= 2, 1e-12, np.where(x > 0, 1.0, 0.0))
    from scipy.sparse.csgraph import shortest_path

    return float(np.rint(shortest_path(w, directed=False)).sum())


@pytest.mark.parametrize("n, d, regular", [(6, 3, False), (6, 2, False), (5, 4, False)])
def test_class_bounds_hold_for_every_small_multigraph(n, d, regular):
    # Per labelled multigraph: its length bounds (2E / W, and with l = 0 on the double link) never
    # exceed the bound the proof gives its class.
    xs = _multigraphs(n, d, regular)
    bounds = {b.name: b.bound for b in gc.uncovered_bounds(n, d, regular, multi_links=True)}
    deg = xs.sum(axis=2)
    simple_regular = (xs <= 1).all(axis=(1, 2)) & (deg == d).all(axis=1)
    distinct = (xs > 0).sum(axis=2)
    sigma = (d - distinct).sum(axis=1)
    W = gc.hop_distance_totals(xs)
    plain = deg.sum(axis=1) / W
    checked = 0
    for k in np.flatnonzero(~simple_regular):
        if not (deg[k] == d).all():
            assert plain[k] <= bounds["not d-regular"] + 1e-12
        elif sigma[k] == 2:
            sharp = (n * d - 4) / _l_distance_total(xs[k])
            assert min(plain[k], sharp) <= bounds["d-regular, one double link"] + 1e-12
        else:
            assert plain[k] <= bounds["d-regular, other multi-links"] + 1e-12
        checked += 1
    assert checked > 0


@pytest.mark.parametrize("n, d, regular", [(6, 3, True), (5, 4, False), (5, 2, False)])
def test_brute_force_over_all_multigraphs_matches_the_catalogue(n, d, regular):
    # The best lambda over every multigraph (one per class, scored by the evaluator's own LP) is
    # what the catalogue search returns - no multigraph or non-regular topology beats it.
    instance = inst(n, d, regular=regular)
    best = max(
        evaluate(instance, Topology(x), routing="optimal").throughput
        for x in _classes(_multigraphs(n, d, regular))
        if np.isfinite(gc.hop_distance_total(x))
    )
    sol = solve(instance, method="exact", warm_start="none")
    assert sol.details["algorithm"] == "catalogue" and sol.status == "optimal"
    assert sol.objective == pytest.approx(best, rel=1e-6)


# ------------------------------------------------------------------------------------------------
# The search as the exact method
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n, d", [(8, 3), (8, 4)])
def test_catalogue_optimum_equals_the_milp_optimum(n, d):
    instance = inst(n, d)
    options = ExactOptions(backend="highs", warm_start="none", time_limit_s=120)
    milp = solve_topology_routing(instance, options, use_catalogue=False)
    search = solve_topology_routing(instance, options)
    assert milp.status == search.status == "optimal"
    assert "algorithm" not in milp.details and search.details["algorithm"] == "catalogue"
    assert search.objective == pytest.approx(milp.objective, rel=1e-6)


def test_12x4_all_to_all_is_proven_optimal_through_solve():
    # Issue #5: the MILP stops at 60 s with 7/32 and bound 2/9; the search proves 7/32 in ~2 s.
    instance = inst(12, 4)
    sol = solve(instance, method="exact", warm_start="none", time_limit_s=60)
    assert sol.status == "optimal" and sol.gap == 0.0
    assert sol.details["algorithm"] == "catalogue"
    assert sol.objective == pytest.approx(7 / 32, rel=1e-9) and sol.bound == pytest.approx(7 / 32, rel=1e-9)
    assert sol.details["catalogue_candidates"] == 1544 and sol.details["catalogue_lps"] == 61
    assert sol.metrics["throughput"] == pytest.approx(sol.objective, rel=1e-6)
    assert verify(instance, sol).valid, verify(instance, sol).violations
    assert (sol.topology.matrix.sum(axis=1) == 4).all() and sol.topology.matrix.max() == 1


def test_comm_time_objective_and_latency_are_reported_honestly():
    proven = solve(inst(8, 4, objective="comm_time"), method="exact", warm_start="none")
    assert proven.status == "optimal" and proven.details["algorithm"] == "catalogue"
    assert proven.metrics["comm_time_s"] == pytest.approx(1 / 0.4, rel=1e-6)  # lambda = 0.4 per second
    with_latency = solve(inst(8, 4, objective="comm_time", latency=1.0), method="exact", warm_start="none")
    # 2 us of latency on 2.5 s: the bound 1/lambda + 2 hops is within the default gap, no hop-limited model is needed
    assert with_latency.status == "optimal" and with_latency.details["latency"]["hop_limited_models"] == []
    assert with_latency.bound <= with_latency.objective <= with_latency.bound * (1 + 1e-4)


def test_a_seed_topology_is_solved_first_and_can_end_the_search():
    n, d = 8, 4
    instance = inst(n, d)
    first = solve(instance, method="exact", warm_start="none")
    seeded = solve_topology_routing(instance, ExactOptions(warm_start="none"), first.topology.matrix)
    assert seeded.status == "optimal" and seeded.details["catalogue_seeded"]
    assert seeded.details["catalogue_lps"] == 1  # every class's bound 2E/W = 0.4 is already reached
    not_a_topology = np.ones((n, n), dtype=np.int64) - np.eye(n, dtype=np.int64)  # degree 7, not 4: ignored
    ignored = solve_topology_routing(instance, ExactOptions(warm_start="none"), not_a_topology)
    assert ignored.status == "optimal" and not ignored.details["catalogue_seeded"]
    heuristic = solve(inst(12, 4), method="exact", time_limit_s=60)  # warm start: the heuristic's topology
    assert heuristic.status == "optimal" and heuristic.details["catalogue_seeded"]
    assert heuristic.objective == pytest.approx(7 / 32, rel=1e-9)


def test_time_limit_mid_search_gives_feasible_with_the_next_bound(monkeypatch, tmp_path):
    real = gc.solver_solve
    calls = []

    def limited(model, **kw):  # the 6th flow LP "hits the time limit"
        calls.append(model.name)
        if model.name == "catalogue_flow_lp" and calls.count("catalogue_flow_lp") > 5:
            return gc.SolveResult(gc.SolveStatus.NO_SOLUTION, None, None, None, 0.0, None, "highs")
        return real(model, **kw)

    monkeypatch.setattr(gc, "solver_solve", limited)
    sol = solve(inst(12, 4), method="exact", warm_start="none", time_limit_s=60)
    assert sol.status == "feasible" and sol.details["catalogue_lps"] == 5
    assert sol.bound == pytest.approx(2 / 9) and sol.objective < sol.bound and sol.gap > 0
    assert verify(inst(12, 4), sol).valid
    none = solve(inst(12, 4), method="exact", warm_start="none", time_limit_s=0)
    assert none.status == "no_solution" and none.details["catalogue_lambda"] is None
    files.save_solution(none, tmp_path / "none.json", directed=False)  # the file can be written (no NaN in it)


def test_export_writes_the_topology_milp(tmp_path):
    # --export-model writes the model of the problem (the strong MILP), though the search solves LPs
    path = tmp_path / "a2a.lp"
    sol = solve_topology_routing(inst(8, 3), ExactOptions(export_model=str(path)))
    assert sol.details["algorithm"] == "catalogue" and sol.status == "optimal"
    text = path.read_text().split()
    general = text[text.index("gen") + 1 : text.index("semi")]  # the integer link counts
    assert len(general) == 8 * 7 // 2 and "lam" in text


def test_other_instances_keep_the_milp():
    assert "algorithm" not in solve(inst(5, 2), method="exact", warm_start="none", formulation="naive").details
    mixed = inst(5, 2, demand={"allreduce": [{"members": "all", "bytes": 1e9}]})
    assert solve(mixed, method="exact", warm_start="none").details.get("algorithm") != "catalogue"
    assert gc.catalogue_applies(inst(6, 2, directed=True), np.ones((6, 6))) == "directed links"
    # aspl and diameter depend on the topology alone: any demand will do
    assert (
        gc.catalogue_applies(
            inst(6, 3, objective="aspl", demand={"allreduce": [{"members": "all", "bytes": 1e9}]}), np.zeros((6, 6))
        )
        is None
    )
    assert "no catalogue" in gc.catalogue_applies(inst(14, 3), np.ones((14, 14)))


def test_the_milp_runs_when_a_topology_outside_the_catalogue_might_win(monkeypatch):
    # No shipped size needs it today; pretend the non-regular topologies of n = 8, d = 3 (unused
    # ports allowed) could reach 0.3 > 0.25, the best cubic graph: the search proves nothing and the
    # MILP decides, with the time left.
    real = gc.uncovered_bounds
    monkeypatch.setattr(gc, "uncovered_bounds", lambda *a: real(*a)[:-1] + (gc.ClassBound("not d-regular", 0.3),))
    sol = solve(inst(8, 3, regular=False), method="exact", warm_start="none", time_limit_s=60)
    assert "algorithm" not in sol.details and "not d-regular <= 0.3" in sol.details["catalogue_not_applied"]
    assert sol.status == "optimal" and sol.objective == pytest.approx(0.25, rel=1e-6)
    # With the true bound (parity: 2E = 24 - D is even, so D >= 2) the catalogue proves it.
    monkeypatch.undo()
    bounds = {b.name: b.bound for b in gc.uncovered_bounds(8, 3, regular=False, multi_links=True)}
    assert bounds["not d-regular"] == pytest.approx(22 / 92) and bounds["not d-regular"] < 0.25
    assert solve(inst(8, 3, regular=False), method="exact", warm_start="none").details["algorithm"] == "catalogue"


def test_catalogue_is_installed_with_the_package():
    import importlib.resources

    files = importlib.resources.files("topoopt_ilp.models.topology") / "data" / "regular_graphs"
    assert (files / "n12_d4.g6").is_file()


# ------------------------------------------------------------------------------------------------
# Objectives aspl and diameter: the best class by its hop statistics
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n, d", [(8, 3), (9, 4), (10, 3)])
def test_hop_statistics_match_networkx(n, d):
    graphs = gc.regular_graphs(n, d)
    W, diameter = gc.hop_statistics(graphs)
    for adj, w, diam in zip(graphs, W, diameter):
        g = nx.from_numpy_array(adj)
        assert w == 2 * nx.wiener_index(g) and diam == nx.diameter(g)
    W, diameter = gc.hop_statistics(np.array([np.kron(np.eye(2, dtype=np.int64), graphs[0])]))
    assert W[0] == diameter[0] == math.inf  # two copies: disconnected


@pytest.mark.parametrize("n, d", [(6, 3), (6, 2), (5, 4), (5, 2)])
def test_hop_floors_hold_for_every_small_multigraph(n, d):
    # Every labelled topology outside the catalogue (a multi-link, or unused ports) has W and
    # diameter at least the floors the proof gives.
    xs = _multigraphs(n, d, regular=False)
    outside = ~(((xs <= 1).all(axis=(1, 2))) & (xs.sum(axis=2) == d).all(axis=1))
    W, diameter = gc.hop_statistics(xs[outside])
    w_floor, diameter_floor = gc.hop_floors_outside(n, d, regular=False, multi_links=True)
    assert outside.sum() > 0 and W.min() >= w_floor and diameter.min() >= diameter_floor
    assert gc.hop_floors_outside(n, d, regular=True, multi_links=False) == (math.inf, math.inf)


@pytest.mark.parametrize("objective", ["aspl", "diameter"])
@pytest.mark.parametrize("n, d, regular", [(6, 3, True), (6, 3, False), (5, 4, False), (6, 2, False)])
def test_hop_objective_optimum_equals_brute_force_over_all_multigraphs(n, d, regular, objective):
    instance = inst(n, d, regular=regular, objective=objective)
    W, diameter = gc.hop_statistics(_multigraphs(n, d, regular))
    best = W.min() / (n * (n - 1)) if objective == "aspl" else diameter.min()
    sol = solve(instance, method="exact", warm_start="none")
    assert sol.details["algorithm"] == "catalogue" and sol.status == "optimal"
    assert sol.objective == sol.bound == pytest.approx(best, rel=1e-12) and sol.gap == 0
    assert verify(instance, sol).valid
    metrics = evaluate(instance, sol)
    assert (metrics.aspl if objective == "aspl" else metrics.diameter) == pytest.approx(sol.objective, rel=1e-12)


@pytest.mark.parametrize("objective", ["aspl", "diameter"])
def test_hop_objective_catalogue_equals_the_milp(objective):
    instance = inst(8, 3, objective=objective)
    options = ExactOptions(backend="highs", warm_start="none", time_limit_s=120)
    milp = solve_topology_routing(instance, options, use_catalogue=False)
    search = solve_topology_routing(instance, options)
    assert milp.status == search.status == "optimal" and "algorithm" not in milp.details
    assert search.details["algorithm"] == "catalogue" and search.details["solver_calls"] == 0
    assert search.objective == pytest.approx(milp.objective, rel=1e-9)


def test_hop_objective_time_limit_zero_and_fallback(monkeypatch):
    instance = inst(8, 3, objective="aspl")
    assert solve(instance, method="exact", warm_start="none", time_limit_s=0).status == "no_solution"
    # Pretend a topology outside the catalogue could reach W = 1: nothing is proven, the MILP decides.
    monkeypatch.setattr(gc, "hop_floors_outside", lambda *a: (1.0, 1.0))
    sol = solve(instance, method="exact", warm_start="none", time_limit_s=60)
    assert "algorithm" not in sol.details and "does not exclude" in sol.details["catalogue_not_applied"]
    assert sol.status == "optimal" and sol.objective == pytest.approx(88 / 56)
