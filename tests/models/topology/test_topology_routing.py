"""The general topology MILP against brute force, closed forms, the evaluator and every backend."""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
import pytest

from conftest import INSTANCES, minimal
from topoopt_ilp import files
from topoopt_ilp.core.solution import Topology
from topoopt_ilp.evaluation.evaluate import evaluate
from topoopt_ilp.evaluation.verify import verify
from topoopt_ilp.methods import solve
from topoopt_ilp.models.topology.milp import build_topology_routing, moore_hop_bound

B = 8.0  # Gbps: 1e9 bytes/s per link


def inst(n, d, *, demand=None, objective="throughput", multi=True, latency=0.0):
    return files.parse_instance(
        minimal(
            cluster={
                "servers": n,
                "degree": d,
                "link_bandwidth_gbps": B,
                "hop_latency_us": latency,
                "multi_links": multi,
            },
            demand=demand or {"all_to_all": 1e9},
            objective=objective,
        )
    )


def exact(instance, **kw):
    opts = {"time_limit_s": 60, "warm_start": "none"} | kw
    return solve(instance, method="exact", **opts)


def regular_graphs(n, d, multi):
    """Every labelled d-regular (multi)graph on n nodes, by brute force over link counts."""
    pairs = list(itertools.combinations(range(n), 2))
    top = d if multi else 1
    for counts in itertools.product(range(top + 1), repeat=len(pairs)):
        if sum(counts) != n * d // 2:
            continue
        x = np.zeros((n, n), dtype=np.int64)
        for (i, j), c in zip(pairs, counts):
            x[i, j] = x[j, i] = c
        if (x.sum(axis=1) == d).all():
            yield x


@pytest.mark.parametrize("n, d, multi", [(5, 2, True), (6, 3, False), (4, 3, True)])
def test_throughput_optimum_equals_brute_force(n, d, multi):
    instance = inst(n, d, multi=multi)
    best = max(evaluate(instance, Topology(x), routing="optimal").throughput for x in regular_graphs(n, d, multi))
    sol = exact(instance)
    assert sol.status == "optimal"
    assert sol.objective == pytest.approx(best, rel=1e-6)
    # The MILP's own routing, scored by the independent evaluator, gives the MILP objective.
    assert sol.metrics["throughput"] == pytest.approx(sol.objective, rel=1e-6)
    assert verify(instance, sol).valid, verify(instance, sol).violations


def test_ring_closed_form_and_formulations_agree():
    n = 7
    instance = inst(n, 2, multi=False)
    lam = 2 / math.floor(n * n / 4) * 1e9 / 1e9
    strong = exact(instance)
    naive = exact(instance, formulation="naive")
    assert strong.status == naive.status == "optimal"
    assert strong.objective == pytest.approx(lam, rel=1e-6) and naive.objective == pytest.approx(lam, rel=1e-6)


def test_allreduce_mutability_finds_the_stride_that_fits():
    # 6 servers, degree 2, one AllReduce: the best 2-regular design is the ring that the MILP's
    # chosen ring order runs along; ring time = 2(k-1)/k*S/B split over both directions.
    n, S = 6, 6e9
    instance = inst(n, 2, demand={"allreduce": [{"members": [0, 3, 1, 4, 2, 5], "bytes": S}]}, objective="comm_time")
    sol = exact(instance)
    assert sol.status == "optimal"  # latency 0: the bandwidth term is the whole comm time
    per_member = 2 * (n - 1) / n * S
    assert sol.metrics["comm_time_s"] == pytest.approx(per_member / 2 / 1e9, rel=1e-6)
    assert verify(instance, sol).valid


def test_mixed_demand_latency_is_settled_by_hop_limited_models():
    data = minimal(
        cluster={"servers": 6, "degree": 2, "link_bandwidth_gbps": 40, "hop_latency_us": 1.0},
        demand={"allreduce": [{"members": "all", "bytes": 20e6}], "mp": {"pairs": [[0, 3, 6e6], [3, 0, 6e6]]}},
    )
    instance = files.parse_instance(data)
    sol = exact(instance)
    assert sol.status == "optimal" and "status_note" not in sol.details
    assert sol.bound <= sol.objective == pytest.approx(sol.metrics["comm_time_s"])
    assert sol.gap <= 1e-4 and sol.details["latency"]["max_hops"] == sol.metrics["max_hops"]
    assert verify(instance, sol).valid
    # A time limit stops the hop-limited models: feasible, with the bound of what was settled
    limited = exact(instance, time_limit_s=0.05)
    assert limited.status in ("feasible", "no_solution")
    if limited.status == "feasible":
        assert limited.bound <= sol.objective * (1 + 1e-9) and limited.objective >= sol.objective * (1 - 1e-9)


def _hop_limited_comm_time(x, pairs, link_bytes_per_s, alpha):
    """Brute force, independent of the model: for every hop limit H, the least busiest-link time of
    the pairs' bytes over the simple paths of at most H hops (a path LP), plus alpha H."""
    from scipy.optimize import linprog

    n = len(x)
    arcs = {(int(u), int(v)): i for i, (u, v) in enumerate(zip(*np.nonzero(x)))}

    def paths(s, t, H):
        out, stack = [], [[s]]
        while stack:
            p = stack.pop()
            if p[-1] == t:
                out.append(p)
            elif len(p) <= H:
                stack += [p + [v] for v in np.flatnonzero(x[p[-1]]).tolist() if v not in p]
        return out

    best = math.inf
    for H in range(1, n):
        plist = [paths(s, t, H) for s, t, _ in pairs]
        if not all(plist):
            continue
        cols = sum(map(len, plist)) + 1  # path flows (units of 1e5 bytes), then T in microseconds
        a_eq, a_ub, j = np.zeros((len(pairs), cols)), np.zeros((len(arcs), cols)), 0
        for k, ps in enumerate(plist):
            for p in ps:
                a_eq[k, j] = 1.0
                for a in zip(p, p[1:]):
                    a_ub[arcs[a], j] += 1.0
                j += 1
        for a, i in arcs.items():
            a_ub[i, -1] = -link_bytes_per_s * 1e-6 / 1e5 * x[a]
        c = np.zeros(cols)
        c[-1] = 1.0
        res = linprog(
            c,
            A_ub=a_ub,
            b_ub=np.zeros(len(arcs)),
            A_eq=a_eq,
            b_eq=np.array([b for *_, b in pairs]) / 1e5,
            method="highs",
        )
        best = min(best, res.fun * 1e-6 + alpha * H)
    return best


@pytest.mark.parametrize("seed", [0, 3, 5, 10])
def test_comm_time_with_latency_equals_brute_force(seed):
    """Every 3-regular simple graph on 6 servers, every hop limit: the exact comm time (bandwidth +
    latency) equals the least over all of them. The hop latency is large enough that the
    bandwidth-optimal design is not the optimum (seed 3: 26.0 us against 24.0 us, a 3-hop design
    after a 2-hop one had improved on it)."""
    from conftest import bounded_multigraphs
    from topoopt_ilp import Cluster, Demand, Instance
    from topoopt_ilp.models import ExactOptions
    from topoopt_ilp.models.topology.solve import solve_topology_routing

    rng = np.random.default_rng(seed)
    n, d = 6, 3
    ordered = [(s, t) for s in range(n) for t in range(n) if s != t]
    pairs = tuple((*ordered[i], float(rng.choice([1, 2, 4]) * 1e5)) for i in rng.choice(len(ordered), 9, replace=False))
    instance = Instance(
        Cluster(n, d, 100.0, hop_latency_us=2.0, multi_links=False), Demand(mp=pairs), objective="comm_time"
    )
    c = instance.cluster
    brute = min(
        _hop_limited_comm_time(np.array(x), pairs, c.link_bytes_per_s, c.hop_latency_s)
        for x in bounded_multigraphs(n, d, regular=True, max_multiplicity=1)
    )
    sol = exact(instance)
    assert sol.status == "optimal" and sol.objective == pytest.approx(brute, rel=1e-6)
    assert sol.bound <= sol.objective and sol.metrics["comm_time_s"] == pytest.approx(sol.objective, rel=1e-12)
    assert verify(instance, sol).valid
    bandwidth_only = solve_topology_routing(instance, ExactOptions(warm_start="none"), latency=False)
    assert evaluate(instance, bandwidth_only, routing="given").comm_time_s >= brute * (1 - 1e-9)
    if seed == 3:
        assert evaluate(instance, bandwidth_only, routing="given").comm_time_s > brute * 1.05


def test_hop_limited_model_routes_within_its_limit():
    """The hop-limit rows: the decoded paths never exceed H, and H = n - 1 loses nothing."""
    from topoopt_ilp.models import ExactOptions
    from topoopt_ilp.models.common import run_model
    from topoopt_ilp.models.topology.milp import to_solution

    instance = inst(7, 2, demand={"mp": {"pairs": [[0, 3, 4e6], [1, 5, 2e6], [6, 2, 1e6], [3, 6, 4e6]]}})
    values = {}
    for H in (2, 3, 6, None):
        m = build_topology_routing(instance, "strong", max_hops=H)
        result = run_model(m.model, ExactOptions())
        sol = to_solution(instance, m, result, 0.0)
        values[H] = result.objective
        if H is not None:
            assert max(len(p) - 1 for p, _ in sol.routing.paths.to_lists()) <= H
    assert values[2] <= values[3] <= values[6] + 1e-9 and values[6] == pytest.approx(values[None], rel=1e-6)
    with pytest.raises(ValueError):
        build_topology_routing(instance, "naive", max_hops=2)


@pytest.mark.parametrize("backend", ["highs", "scip", "cbc"])
def test_backends_agree(backend):
    instance = inst(6, 3, multi=False)
    sol = exact(instance, backend=backend)
    assert sol.status == "optimal" and sol.backend == backend
    assert sol.objective == pytest.approx(exact(instance).objective, rel=1e-6)


def test_cpsat_refuses_the_flow_model():
    with pytest.raises(Exception, match="continuous"):
        exact(inst(5, 2), backend="cpsat")


def test_aspl_objective_equals_brute_force():
    n, d = 6, 3
    instance = inst(n, d, objective="aspl", multi=False)
    best = min(evaluate(instance, Topology(x), routing="shortest_path").aspl for x in regular_graphs(n, d, False))
    sol = exact(instance)
    assert (
        sol.status == "optimal" and sol.objective == pytest.approx(best) and sol.metrics["aspl"] == pytest.approx(best)
    )


def test_moore_bound_and_model_size():
    assert moore_hop_bound(np.ones(127), 8, False) == 309  # Cerf et al.: n=128, d=8 -> 309/127
    m = build_topology_routing(inst(8, 2))
    # 8 sources x 56 arcs of flow + 28 links + lambda (no rings)
    assert m.model.num_vars == 8 * 56 + 28 + 1


def test_warm_start_from_heuristic_is_accepted_and_time_limit_zero_is_no_solution():
    instance = inst(8, 4)
    started = exact(instance, warm_start="heuristic", time_limit_s=20)
    assert started.status in ("optimal", "feasible") and started.details["warm_start"] == "heuristic"
    none = solve(instance, method="exact", time_limit_s=0, warm_start="none")
    assert none.status == "no_solution" and none.topology is None


@pytest.mark.parametrize(
    "n, d, multi, expected",
    [
        (7, 2, True, 3),  # a connected 2-regular graph is a cycle: diameter floor(n/2)
        (10, 3, False, 2),  # the Petersen graph reaches the Moore bound
        (6, 3, False, None),  # brute force below
    ],
)
def test_diameter_objective(n, d, multi, expected):
    from topoopt_ilp.core.graph import diameter

    instance = inst(n, d, objective="diameter", multi=multi)
    if expected is None:
        expected = min(diameter(x) for x in regular_graphs(n, d, multi))
    sol = exact(instance, warm_start="none")
    assert sol.status == "optimal" and sol.objective == expected == sol.metrics["diameter"]
    assert verify(instance, sol).valid


def test_diameter_lower_bound_is_proven_by_an_infeasible_model():
    # Directed, n = 7, d = 2: the Moore bound (1 + 2 + 4 = 7) allows diameter 2, but no Moore digraph
    # with d > 1 and diameter > 1 exists (Plesnik & Znam; Bridges & Toueg), so the model for 2 must be
    # infeasible and the one for 3 feasible.
    instance = files.parse_instance(
        minimal(
            cluster={"servers": 7, "degree": 2, "link_bandwidth_gbps": B, "links": "directed", "multi_links": False},
            objective="diameter",
        )
    )
    sol = exact(instance, warm_start="none")
    assert sol.objective == 3 and sol.status == "optimal" and sol.bound == 3
    assert [m["status"] for m in sol.details["feasibility_models"]] == ["infeasible", "optimal"]
    assert verify(instance, sol).valid


@pytest.mark.parametrize("seed", range(4))
def test_ring_anchored_moore_cut_removes_no_optimum(seed, monkeypatch):
    # The Moore cut counts each source's MP bytes together with its anchor ring; switching the cut
    # off (all coefficients 0) must give the same optimum on random AllReduce + MP mixes, and the
    # optimum must be at least every single-ring design the evaluator scores on any regular graph.
    import topoopt_ilp.models.topology.milp as tr

    rng = np.random.default_rng(seed)
    n, d = (5, 2) if seed % 2 else (6, 3)
    members = sorted(rng.choice(n, size=n - 1 - seed % 2, replace=False).tolist())
    pairs = [
        [int(s), int(t), float(rng.choice([1, 4, 16]) * 1e8)]
        for s in range(n)
        for t in range(n)
        if s != t and rng.random() < 0.3
    ]
    demand = {
        "allreduce": [{"members": "all", "bytes": 4e9}, {"members": members, "bytes": 1e9}],
        "mp": {"pairs": pairs},
    }
    instance = inst(n, d, demand=demand, multi=False)
    with_cut = exact(instance)
    original = tr._moore_cut_coefficients
    monkeypatch.setattr(tr, "_moore_cut_coefficients", lambda *a: tuple(np.zeros_like(v) for v in original(*a)))
    without_cut = exact(instance)
    assert with_cut.status == without_cut.status == "optimal"
    assert with_cut.objective == pytest.approx(without_cut.objective, rel=1e-6)
    # Single-ring designs (listed member order) on every simple regular graph never beat it.
    best_listed = max(
        evaluate(instance, Topology(x), routing="optimal").throughput for x in regular_graphs(n, d, False)
    )
    assert best_listed <= with_cut.objective * (1 + 1e-6)


def test_strong_formulation_carries_its_solver_tuning_and_the_user_overrides_it(monkeypatch):
    """The strong model runs HiGHS with STRONG_TUNING; --solver-option values win parameter by
    parameter; the naive model and other backends get nothing of it. Same optimum either way."""
    import topoopt_ilp.models.common as common
    import topoopt_ilp.models.topology.solve as tr
    from topoopt_ilp.errors import InputError
    from topoopt_ilp.models.topology.milp import STRONG_TUNING

    seen = []
    real = common.solver_solve
    monkeypatch.setattr(
        common, "solver_solve", lambda model, **kw: seen.append(kw.get("native_options")) or real(model, **kw)
    )
    monkeypatch.setattr(tr, "_start_proof", lambda *a, **k: None)  # the MILP runs (a rounding would prove this one)
    demand = {"allreduce": [{"members": "all", "bytes": 20e6}], "mp": {"pairs": [[0, 3, 6e6], [3, 0, 6e6]]}}
    instance = inst(6, 2, demand=demand)
    results = [
        exact(instance),
        exact(instance, native_options={"highs": {"presolve": "on", "random_seed": 3}}),
        exact(instance, formulation="naive"),
        exact(instance, backend="cbc"),
    ]
    assert seen == [
        STRONG_TUNING,
        {"highs": {**STRONG_TUNING["highs"], "presolve": "on", "random_seed": 3}},
        None,
        None,
    ]
    assert all(r.status == "optimal" and r.objective == pytest.approx(results[0].objective, rel=1e-6) for r in results)
    with pytest.raises(InputError, match="unknown backend"):
        exact(instance, native_options={"gurobi": {"Presolve": 0}})
    # The catalogue search's LPs (all-to-all demand) get the user's parameters too.
    with pytest.raises(InputError, match="HiGHS rejected option no_such_parameter"):
        exact(inst(8, 3), native_options={"highs": {"no_such_parameter": 1}})


def test_diameter_with_a_disconnected_start_and_no_time_finds_nothing():
    # A disconnected start has diameter inf: it is no incumbent (was status feasible with objective inf).
    from topoopt_ilp.models.common import ExactOptions
    from topoopt_ilp.models.topology.solve import solve_diameter

    instance = inst(8, 2, objective="diameter")
    two_squares = np.zeros((8, 8), dtype=np.int64)
    for block in (range(4), range(4, 8)):
        ring = list(block)
        for a, b in zip(ring, ring[1:] + ring[:1]):
            two_squares[a, b] = two_squares[b, a] = 1
    sol = solve_diameter(instance, ExactOptions(time_limit_s=0), two_squares)
    assert sol.status == "no_solution" and sol.topology is None


def test_a_feasible_point_that_routes_nothing_is_no_solution(monkeypatch):
    # Found by a user: SCIP stopped at 2 s on mix-16 returned a disconnected topology with lam = 0
    # as "feasible" (iteration time inf, and --out then failed on the inf).
    import dataclasses

    from topoopt_ilp.models.topology import solve as tr
    from topoopt_ilp.solvers import SolveStatus

    real = tr.run_model

    def zero_lambda(model, options, start=None, **kw):
        result = real(model, options, start, **kw)
        values = np.zeros(model.num_vars)
        return dataclasses.replace(result, status=SolveStatus.FEASIBLE, values=values, objective=0.0, gap=math.inf)

    monkeypatch.setattr(tr, "run_model", zero_lambda)
    monkeypatch.setattr(tr, "_start_proof", lambda *a, **k: None)  # the MILP runs (a rounding would prove this one)
    sol = exact(inst(8, 2, demand={"allreduce": [{"members": "all", "bytes": 1e6}]}), warm_start="none")
    assert sol.status == "no_solution" and sol.topology is None and "lambda = 0" in sol.details["status_note"]


def test_a_demand_range_beyond_the_solver_tolerances_is_refused_before_building():
    # Found by a user: an AllReduce of 1e15 bytes next to MP pairs of 5e6 decoded into a topology
    # that left a pair unconnected ("does not connect 4 and 7"): the small pair was below tolerance.
    from topoopt_ilp.errors import UnsupportedError

    # At 1e13 bytes (the pair 3.3e-7 of the largest entry) the design came back with 4 and 7 unconnected.
    for big in (1e15, 1e13):
        wide = {"allreduce": [{"members": [0, 2, 4, 6], "bytes": big}], "mp": {"pairs": [[4, 7, 5e6]]}}
        with pytest.raises(UnsupportedError, match="spans a factor"):
            build_topology_routing(inst(8, 4, demand=wide))
    ok = {"allreduce": [{"members": [0, 2, 4, 6], "bytes": 1e12}], "mp": {"pairs": [[4, 7, 5e6]]}}
    sol = exact(inst(8, 4, demand=ok))
    assert sol.status == "optimal" and verify(inst(8, 4, demand=ok), sol).valid


def test_exact_never_worse_than_its_warm_start_and_optimal_at_its_bound():
    """A user's case: the MILP optimises the bandwidth term only, and HiGHS returned an equally wide
    design with 3-hop paths (0.3 % worse than the heuristic it started from, which meets the bound
    with 1-hop paths). The exact method now returns the better of the two, proven optimal since its
    objective meets the model's bound. Since every ring order of the 6 members is a candidate, the
    model beats that start by 17 % (comm time 552.1 us against 667.7 us): a backend whose design
    has a longer path than needed is ``feasible`` with its honest gap, never worse than the start."""
    from topoopt_ilp import Cluster, Demand, Instance, solve
    from topoopt_ilp.core.instance import AllReduceGroup

    inst = Instance(
        Cluster(6, 3, 100.0, multi_links=False),
        Demand(allreduce=(AllReduceGroup(tuple(range(6)), 1e7),), mp=((0, 3, 4e6), (1, 4, 4e6))),
    )
    heuristic = solve(inst, method="heuristic")
    for backend in ("highs", "cbc"):
        sol = solve(inst, method="exact", backend=backend, time_limit_s=30)
        assert sol.objective <= heuristic.objective * (1 + 1e-12) and verify(inst, sol).valid
        assert sol.bound == pytest.approx(552.1111e-6, rel=1e-6)
        if sol.status == "optimal":  # within the default gap of a valid bound, latency included
            assert sol.gap <= 1e-4 * (1 + 1e-9)
        else:
            assert sol.gap > 1e-4 and ("status_note" in sol.details or "returned" in sol.details)
        if backend == "highs":
            assert sol.status == "optimal"


def test_a_time_limited_throughput_solve_keeps_its_gap():
    """Throughput is maximised: a warm start returned with the model's (higher) bound has a positive
    gap. close_gap used the minimisation formula, found 0 and called it optimal (the verifier's new
    claim check caught it on the testbed)."""
    from dataclasses import replace as dc_replace

    inst = dc_replace(files.load_instance(INSTANCES / "testbed-12.json"), objective="throughput")
    sol = solve(inst, method="exact", time_limit_s=3)
    assert sol.has_solution and verify(inst, sol).valid, verify(inst, sol).violations
    if sol.status == "feasible":
        assert sol.bound > sol.objective and sol.gap == pytest.approx((sol.bound - sol.objective) / sol.objective)


def test_a_model_with_no_design_in_its_time_returns_its_warm_start():
    """all-to-all-16 at 3 s: the MILP found no design in its time and the exact method said
    no_solution (exit 4) although its heuristic start is a feasible design (a user's report). A time
    limit of 0 still runs nothing."""
    inst = files.load_instance(INSTANCES / "all-to-all-16.json")
    sol = solve(inst, method="exact", time_limit_s=3)
    assert sol.status in ("feasible", "optimal") and verify(inst, sol).valid
    assert sol.objective >= solve(inst, method="heuristic").objective * (1 - 1e-12)  # throughput: at least the start
    assert solve(inst, method="exact", time_limit_s=0).status == "no_solution"


# ------------------------------------------------------------------------------------------------
# Ring candidates: every ring order up to ALL_RINGS_UP_TO members, a stated restriction above it


def _ring_case(members, cycle, n):
    """One AllReduce over every server listed as ``members`` (40 MB) plus MP pairs of 30 MB along
    ``cycle``: the best ring follows ``cycle``, which need not be a stride of the listed order."""
    pairs = [[cycle[i], cycle[(i + 1) % n], 30e6] for i in range(n)]
    return files.parse_instance(
        minimal(
            cluster={"servers": n, "degree": 2, "link_bandwidth_gbps": 100, "hop_latency_us": 0.0},
            demand={"allreduce": [{"members": list(members), "bytes": 40e6}], "mp": {"pairs": pairs}},
            objective="throughput",
        )
    )


def test_small_groups_take_every_ring_order():
    """An audit's counterexample: 4 servers, the MP pairs along 0-2-1-3, the group listed 0,1,2,3.
    The strides of the listed order (0->1->2->3 and its reverse) reach 208.33; the ring 0-2-1-3 (a
    quarter of the bytes one way, the rest the other) reaches 277.78 (3.6 ms per iteration), and the
    method said 208.33 'optimal'. Every ring order is a candidate up to ALL_RINGS_UP_TO members."""
    listed = _ring_case(range(4), [0, 2, 1, 3], 4)
    best = _ring_case([0, 2, 1, 3], [0, 2, 1, 3], 4)  # the same demand, listed in the good order
    for instance in (listed, best):
        sol = exact(instance)
        assert sol.status == "optimal" and sol.objective == pytest.approx(1 / 3.6e-3, rel=1e-9)
        assert "rings_restricted" not in sol.details
        assert verify(instance, sol).valid, verify(instance, sol).violations
    from topoopt_ilp.models.joint import milp as joint
    from topoopt_ilp.models.topology import milp as topology_routing

    assert joint.ALL_RINGS_UP_TO is topology_routing.ALL_RINGS_UP_TO == 6  # one constant for every model's ring space


def _cycle8():
    return [0, 2, 1, 3, 5, 4, 6, 7]


def test_a_restricted_ring_optimum_says_so_and_never_beats_a_better_warm_start(tmp_path):
    """8 members (above ALL_RINGS_UP_TO): the candidates are the strides 1, 3, 5, 7 of the listed
    order 0..7, none of which follows the MP cycle 0-2-1-3-5-4-6-7. The model's 'optimal' 156.25 is
    optimal among those rings only (details say so); a warm start riding the cycle scores 250 and is
    returned instead (feasible, no bound: the model's bound holds among its candidates only). The
    exact method used to skip the comparison when the model said optimal."""
    from topoopt_ilp.files import save_solution

    listed = _ring_case(range(8), _cycle8(), 8)
    sol = exact(listed)
    assert sol.status == "optimal" and sol.objective == pytest.approx(156.25, rel=1e-9)
    note = sol.details["rings_restricted"]
    assert "group 0 (8 members)" in note and "[1, 3, 5, 7]" in note and "5,040" in note

    good = exact(_ring_case(_cycle8(), _cycle8(), 8))  # the cycle is stride 1 of this listing
    assert good.objective == pytest.approx(250.0, rel=1e-9)
    path = tmp_path / "good.json"
    save_solution(good, path, directed=False)
    started = exact(listed, warm_start=str(path))
    assert started.status == "feasible" and started.objective == pytest.approx(250.0, rel=1e-9)
    assert started.bound is None and started.gap is None
    assert "better than the model's 'optimal' design" in started.details["returned"]
    assert "rings_restricted" in started.details and "bound_dropped" in started.details
    assert verify(listed, started).valid, verify(listed, started).violations


def test_the_cli_prints_the_ring_restriction(tmp_path, capsys):
    import json

    from topoopt_ilp.cli import main

    path = tmp_path / "ring8.json"
    path.write_text(
        json.dumps(
            minimal(
                cluster={"servers": 8, "degree": 2, "link_bandwidth_gbps": 100, "hop_latency_us": 0.0},
                demand={
                    "allreduce": [{"members": list(range(8)), "bytes": 40e6}],
                    "mp": {"pairs": [[c, _cycle8()[(i + 1) % 8], 30e6] for i, c in enumerate(_cycle8())]},
                },
                objective="throughput",
            )
        )
    )
    main(["solve", str(path), "--method", "exact", "--warm-start", "none"])
    out = capsys.readouterr().out
    assert "rings_restricted" in out and "candidate rings only" in out


def test_noisy_ring_shares_are_snapped_and_the_objective_is_the_evaluators():
    """HiGHS returned ring shares 0.9999977 / 2.2e-6 and the method reported its raw lambda, 1.5e-6
    above the evaluator's score of the decoded design (verified NO). Here the optimum's shares are
    perturbed by 2.2e-6 towards a ring it does not use: the decoded design drops that ring and the
    objective is the evaluator's score of what is returned."""
    from topoopt_ilp.methods import finalize
    from topoopt_ilp.models import ExactOptions
    from topoopt_ilp.models.common import run_model
    from topoopt_ilp.models.topology.milp import to_solution

    instance = _ring_case(range(8), _cycle8(), 8)  # 4 stride rings, 2 of them used at the optimum
    m = build_topology_routing(instance)
    result = run_model(m.model, ExactOptions(time_limit_s=60))
    values = result.values.copy()
    z = values[m.z_cols]
    used, unused = int(np.argmax(z)), int(np.flatnonzero(z <= 1e-12)[0])
    lam = values[m.lam_col]
    values[m.z_cols[used]] -= 2.2e-6 * lam
    values[m.z_cols[unused]] += 2.2e-6 * lam
    sol = finalize(instance, to_solution(instance, m, type(result)(**{**result.__dict__, "values": values}), 0.1))
    assert sol.objective == evaluate(instance, sol).throughput
    assert verify(instance, sol).valid, verify(instance, sol).violations
    assert len(sol.routing.rings) == int((z > 1e-12).sum())  # the noise ring is gone


@pytest.mark.parametrize("use_catalogue", [True, False])
def test_export_model_writes_the_diameter_model(tmp_path, use_catalogue):
    """--export-model was silently ignored for objective diameter (the catalogue, the Moore circulant
    search and the sequence of feasibility models all dropped it): the first feasibility model,
    'diameter <= the Moore bound', is written."""
    from topoopt_ilp.models import ExactOptions
    from topoopt_ilp.models.topology.solve import solve_topology_routing

    instance = inst(8, 2, objective="diameter")
    path = tmp_path / "diameter.lp"
    sol = solve_topology_routing(
        instance, ExactOptions(time_limit_s=60, export_model=str(path)), use_catalogue=use_catalogue
    )
    assert sol.status == "optimal" and sol.objective == 4
    text = path.read_text()
    assert "reach" in text and "p_le_y" in text  # the feasibility model's rows, not the flow MILP's


def test_a_requested_gap_is_not_called_a_proven_bandwidth_term():
    """mix-16 at --gap 0.5: the MILP stopped with throughput 249.69 against a bound of 336.13, yet
    the note said 'bandwidth term proven optimal'. The note now states the gap it stopped at."""
    instance = files.load_instance(INSTANCES / "mix-16.json")
    sol = solve(instance, method="exact", gap=0.5, time_limit_s=20)
    d = sol.details
    bw_gap = (d["milp_throughput_bound"] - d["milp_throughput"]) / d["milp_throughput"]
    assert verify(instance, sol).valid and sol.bound <= sol.objective
    if sol.gap > 1e-4:  # the note states the comm-time gap it stopped at, never a proof
        assert sol.status == "feasible" and f"{sol.gap:.4g}" in d["status_note"] and "proven" not in d["status_note"]
        assert bw_gap > 1e-4 or sol.details["latency"]["hop_limited_models"] == []
    else:  # the solver closed the gap anyway: then the proof is real
        assert sol.status == "optimal"


def test_a_point_whose_decoded_design_carries_nothing_is_no_design():
    """A time-limited naive solve once ended 'feasible' with throughput 0: the solver's lambda was
    positive, the decoded design carried none of the demand. Such a point is no design (no_solution),
    as a point with lambda = 0 already was. Here the optimum's links are all removed."""
    from topoopt_ilp.models import ExactOptions
    from topoopt_ilp.models.common import run_model
    from topoopt_ilp.models.topology.milp import to_solution

    instance = _ring_case(range(8), _cycle8(), 8)
    m = build_topology_routing(instance)
    result = run_model(m.model, ExactOptions(time_limit_s=60))
    values = result.values.copy()
    values[m.x_cols] = 0.0
    point = type(result)(**{**result.__dict__, "values": values, "status": type(result.status).FEASIBLE})
    sol = to_solution(instance, m, point, 0.1)
    assert sol.status == "no_solution" and sol.topology is None
    assert "carries none of the demand" in sol.details["status_note"]


def test_a_warm_start_at_the_relaxation_bound_is_proven_by_two_lps(monkeypatch):
    """A warm start whose best routing meets the LP relaxation is optimal: no MILP runs. One that
    does not is withheld from the MILP (HiGHS took 2-4x longer with such a start). The optimum is
    the cold MILP's either way."""
    import topoopt_ilp.models.topology.solve as tr

    starts = []
    real = tr.run_model
    monkeypatch.setattr(
        tr,
        "run_model",
        lambda model, options, start=None, **kw: starts.append(start) or real(model, options, start, **kw),
    )
    ring_and_pair = {"allreduce": [{"members": "all", "bytes": 20e6}], "mp": {"pairs": [[0, 3, 6e6], [3, 0, 6e6]]}}
    two_groups = {
        "allreduce": [{"members": "all", "bytes": 20e6}, {"members": [0, 2, 4, 6], "bytes": 5e6}],
        "mp": {"pairs": [[0, 3, 6e6], [3, 0, 6e6], [1, 5, 4e6]]},
    }
    for instance, proved in ((inst(6, 2, demand=ring_and_pair), True), (inst(8, 3, demand=two_groups), False)):
        starts.clear()
        warm = exact(instance, warm_start="heuristic")
        assert warm.details.get("start_proved", "").startswith("the warm start") == proved
        assert starts == ([] if proved else [None])  # the MILP ran only when needed, and without the start
        cold = exact(instance)
        assert warm.status == cold.status == "optimal" and verify(instance, warm).valid
        assert warm.objective == pytest.approx(cold.objective, rel=1e-6)


NO_STARTS = {
    "relaxation_rounding": lambda m, values, degree, multi: np.zeros((m.n, m.n), dtype=np.int64),
    "ring_matching_starts": lambda m, values, degree, multi: [],
}


@pytest.mark.parametrize(
    "n, d, mp, source, switched_off",
    [
        # seed 4 of the benchmark's 6-server, degree-2 mixes: the relaxation's rounding meets its bound
        (
            6,
            2,
            [[0, 2, 32e6], [0, 4, 1e6], [2, 1, 1e6], [2, 5, 4e6], [3, 1, 4e6]],
            "a rounding of the LP relaxation",
            ("relaxation_rounding", "ring_matching_starts"),
        ),
        # seed 1 of the 6-server, degree-3 mixes: the rounding misses (0.72 of the bound), the heaviest
        # group's second ring class plus the matching of the MP bytes and the small group's ring meets it
        (
            6,
            3,
            [[0, 1, 1e6], [1, 2, 1e6], [3, 0, 4e6], [3, 1, 1e6], [3, 4, 32e6]],
            "ring-and-matching start",
            ("ring_matching_starts",),
        ),
        # seed 1 of the 8-server, degree-4 mixes: every one-ring start misses (0.90 of the bound at best),
        # two of the heaviest group's ring classes laid together plus the MP bytes' matching meet it
        (
            8,
            4,
            [
                [0, 1, 1e6],
                [0, 7, 1e6],
                [2, 1, 4e6],
                [2, 3, 1e6],
                [2, 5, 32e6],
                [4, 7, 4e6],
                [5, 0, 4e6],
                [6, 0, 4e6],
                [6, 7, 2e6],
            ],
            "ring-and-matching start",
            ("ring_matching_starts",),
        ),
    ],
)
def test_a_start_from_the_relaxation_can_prove_optimality_without_a_milp(monkeypatch, n, d, mp, source, switched_off):
    """A mix whose relaxation is tight (an AllReduce over every server, one over the even ones, MP
    pairs) is proved by the start named, with no MILP; with that start switched off the MILP runs (a
    topology without links proves nothing) and finds the same optimum."""
    import topoopt_ilp.models.topology.solve as tr
    import topoopt_ilp.models.topology.starts as rr

    evens = list(range(0, n, 2))
    instance = inst(
        n,
        d,
        demand={
            "allreduce": [{"members": "all", "bytes": 40e6}, {"members": evens, "bytes": 10e6}],
            "mp": {"pairs": mp},
        },
    )
    milps = []
    real = tr.run_model
    monkeypatch.setattr(tr, "run_model", lambda *a, **kw: milps.append(1) or real(*a, **kw))
    started = exact(instance)
    assert started.details["start_proved"].startswith(source) and not milps
    for name in switched_off:
        monkeypatch.setattr(rr, name, NO_STARTS[name])
    milp = exact(instance)
    assert milps and "start_proved" not in milp.details
    assert started.status == milp.status == "optimal" and verify(instance, started).valid
    assert started.objective == pytest.approx(milp.objective, rel=1e-6)


@pytest.mark.parametrize("milp_ends", ["no_design", "worse", "better"])
def test_a_milp_stopped_below_the_best_start_returns_the_start(monkeypatch, milp_ends):
    """Seed 3 of the 6-server, degree-2 mixes: no start proves itself, so the MILP runs. Made to stop
    at its limit with no design, or with one below the best start, the solve returns that start
    (feasible, its LP routing, verified, scored by the evaluator, the better bound kept); when the
    MILP's design is the better one it is kept."""
    import topoopt_ilp.models.topology.solve as tr
    from topoopt_ilp.solvers import SolveStatus

    instance = inst(
        6,
        2,
        demand={
            "allreduce": [{"members": "all", "bytes": 40e6}, {"members": [0, 2, 4], "bytes": 10e6}],
            "mp": {"pairs": [[1, 0, 1e6], [1, 5, 32e6], [3, 0, 32e6], [3, 4, 1e6], [4, 0, 4e6]]},
        },
    )
    optimum = exact(instance)
    assert optimum.status == "optimal" and "start_proved" not in optimum.details
    scored = []
    real_proof = tr._start_proof
    monkeypatch.setattr(tr, "_start_proof", lambda *a, **k: scored.append(real_proof(*a, **k)) or scored[-1])
    real = tr.run_model

    def stopped(model, options, start=None, **kw):
        res = real(model, options, start, **kw)
        if milp_ends == "no_design":
            return dataclasses.replace(res, status=SolveStatus.NO_SOLUTION, objective=None, values=None, bound=None)
        if milp_ends == "worse":  # an objective below the best start's
            return dataclasses.replace(
                res,
                status=SolveStatus.FEASIBLE,
                objective=0.5 * scored[-1].result.objective,
                bound=res.objective * 1.5,
                gap=2.0,
            )
        return dataclasses.replace(res, status=SolveStatus.FEASIBLE, bound=res.objective * 1.5, gap=0.5)

    monkeypatch.setattr(tr, "run_model", stopped)
    sol = exact(instance)
    best = scored[-1]
    assert best is not None and not best.proved and sol.status == "feasible" and verify(instance, sol).valid
    if milp_ends == "better":
        assert "returned" not in sol.details and sol.objective == pytest.approx(optimum.objective, rel=1e-6)
        return
    assert sol.details["returned"].startswith(best.source)
    assert sol.objective < optimum.objective * (1 - 1e-6)  # the start is not optimal (no start proved itself)
    assert sol.objective == pytest.approx(evaluate(instance, sol).throughput, rel=1e-9)
    assert sol.bound == pytest.approx(
        optimum.objective, rel=1e-6
    )  # the relaxation's bound (tight here), not the MILP's 1.5x


@pytest.mark.parametrize("multi", [True, False])
def test_ring_matching_starts_are_topologies_of_the_cluster(multi):
    """Whatever the relaxation's point, every ring-and-matching start is a d-regular symmetric
    topology without self-links (and without parallel links unless allowed), at most two per ring
    layout and no two alike; directed clusters get none."""
    from topoopt_ilp.models.topology.starts import RING_CLASSES_TRIED, ring_matching_starts

    rng = np.random.default_rng(5)
    demand = {
        "allreduce": [{"members": "all", "bytes": 40e6}, {"members": [0, 2, 4], "bytes": 10e6}],
        "mp": {"pairs": [[0, 2, 32e6], [3, 1, 4e6]]},
    }
    for n, d in ((6, 2), (6, 3), (8, 3), (9, 4), (10, 5)):
        instance = inst(n, d, demand=demand, multi=multi)
        m = build_topology_routing(instance)
        for _ in range(10):
            starts = ring_matching_starts(m, rng.random(m.model.num_vars) * rng.choice([0.1, 1.0, d]), d, multi)
            layouts = RING_CLASSES_TRIED + (math.comb(RING_CLASSES_TRIED, 2) if d >= 4 else 0)
            assert 1 <= len(starts) <= 2 * layouts
            assert len({X.tobytes() for X in starts}) == len(starts)
            for X in starts:
                assert (np.diag(X) == 0).all() and (X >= 0).all() and (X == X.T).all()
                assert (X.sum(axis=1) == d).all()
                assert multi or X.max() <= 1
    directed = files.parse_instance(
        minimal(
            cluster={"servers": 6, "degree": 2, "link_bandwidth_gbps": B, "links": "directed"},
            demand=demand,
            objective="throughput",
        )
    )
    m = build_topology_routing(directed)
    assert ring_matching_starts(m, np.ones(m.model.num_vars), 2, True) == []


def test_free_ports_go_to_the_heaviest_matching():
    """On a 6-ring with one free port per server, the three heavy pairs across the ring are the
    matching; without multi-links a heavy pair that is already linked is passed over."""
    from topoopt_ilp.models.topology.starts import _match_free_ports

    ring = np.zeros((6, 6), dtype=np.int64)
    for i in range(6):
        ring[i, (i + 1) % 6] = ring[(i + 1) % 6, i] = 1
    w = np.zeros((6, 6))
    for a, b, v in ((0, 3, 5.0), (1, 4, 4.0), (2, 5, 3.0), (0, 2, 1.0)):
        w[a, b] = w[b, a] = v
    X = ring.copy()
    _match_free_ports(X, w, 3, multi_links=False)
    assert {(i, j) for i, j in zip(*np.nonzero(X - ring)) if i < j} == {(0, 3), (1, 4), (2, 5)}
    w[0, 1] = w[1, 0] = 100.0  # heavier, but 0 - 1 is a ring link already
    X = ring.copy()
    _match_free_ports(X, w, 3, multi_links=False)
    assert X.max() == 1 and X[0, 3] == 1
    X = ring.copy()
    _match_free_ports(X, w, 3, multi_links=True)  # with multi-links the second 0 - 1 link wins
    assert X[0, 1] == 2 and (X.sum(axis=1) == 3).all()
    w[0, 1] = w[1, 0] = 11.0  # a second link carries half of it: 5.5 + 3 (with 2 - 5) < 5 + 4 + 3
    X = ring.copy()
    _match_free_ports(X, w, 3, multi_links=True)
    assert X[0, 1] == 1 and X[0, 3] == 1


@pytest.mark.parametrize("directed, multi", [(False, True), (False, False), (True, True), (True, False)])
def test_relaxation_roundings_are_topologies_of_the_cluster(directed, multi):
    """Whatever the relaxation's point, the rounding is a d-regular topology of the cluster: no
    self-link, symmetric when undirected, no parallel links without multi-links (checked on random
    points of the model's columns, which need not be feasible: nothing in the rounding assumes it)."""
    from topoopt_ilp.models.topology.starts import relaxation_rounding

    rng = np.random.default_rng(3)
    for n, d in ((6, 2), (7, 2), (8, 3), (9, 4)):
        demand = {
            "allreduce": [{"members": "all", "bytes": 40e6}, {"members": [0, 2, 4], "bytes": 10e6}],
            "mp": {"pairs": [[0, 2, 32e6], [3, 1, 4e6]]},
        }
        instance = files.parse_instance(
            minimal(
                cluster={
                    "servers": n,
                    "degree": d,
                    "link_bandwidth_gbps": B,
                    "multi_links": multi,
                    "links": "directed" if directed else "undirected",
                },
                demand=demand,
                objective="throughput",
            )
        )
        m = build_topology_routing(instance)
        for _ in range(20):
            values = rng.random(m.model.num_vars) * rng.choice([0.1, 1.0, d])
            X = relaxation_rounding(m, values, d, multi)
            assert (np.diag(X) == 0).all() and (X >= 0).all()
            assert (X.sum(axis=1) == d).all() and (X.sum(axis=0) == d).all()
            assert directed or (X == X.T).all()
            assert multi or X.max() <= 1


def test_the_start_proof_knows_that_aspl_is_minimised():
    """aspl's model minimises a hop total: the relaxation is a lower bound there. On 8 servers of
    degree 3 the cube (hop total 12 per source) is no optimum and must not be proven one; the
    Moebius ladder (3 at one hop, 4 at two: 11, the Moore floor) is."""
    import time

    import networkx as nx

    from topoopt_ilp.models.common import ExactOptions
    from topoopt_ilp.models.topology.solve import _start_proof

    instance = inst(8, 3, objective="aspl", multi=False)
    m = build_topology_routing(instance)
    cube = nx.to_numpy_array(nx.convert_node_labels_to_integers(nx.hypercube_graph(3))).astype(int)
    ladder = nx.to_numpy_array(nx.circulant_graph(8, [1, 4])).astype(int)
    options = ExactOptions(time_limit_s=30)
    assert not _start_proof(instance, m, cube, options, time.perf_counter(), rounding=False).proved
    proof = _start_proof(instance, m, ladder, options, time.perf_counter(), rounding=False)
    assert proof.proved and proof.result.objective == pytest.approx(11 / 7)
