"""The verifier rejects designs that cannot serve the demand, false bound/gap/optimality claims, and
reports every violation at once (found by a user: all three were accepted or hidden)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from test_verify import instance, valid_solution

from conftest import minimal
from topoopt_ilp import files, solve
from topoopt_ilp.core.solution import Solution, Topology
from topoopt_ilp.evaluation.verify import verify

NR8 = {
    "format": "topoopt-instance",
    "version": 1,
    "name": "nr8",
    "cluster": {"servers": 8, "degree": 2, "link_bandwidth_gbps": 100, "regular": False},
    "demand": {"all_to_all": 1e6},
}


def two_rings(n: int = 8) -> np.ndarray:
    """Two disjoint undirected rings, 0..n/2-1 and n/2..n-1."""
    x = np.zeros((n, n), dtype=np.int64)
    h = n // 2
    for base in (0, h):
        for k in range(h):
            a, b = base + k, base + (k + 1) % h
            x[a, b] = x[b, a] = 1
    return x


# --- 1. every demand pair needs a path -----------------------------------------------------------


def test_the_users_empty_topology_is_rejected():
    inst = files.parse_instance(NR8)
    sol = files.parse_solution(
        {
            "format": "topoopt-solution",
            "version": 1,
            "status": "feasible",
            "method": "heuristic",
            "topology": {"servers": 8, "directed": False, "links": []},
        },
        directed=False,
    )
    assert verify(inst, sol).violations == ("no path from 0 to 1 in the topology, but the demand sends bytes 0->1",)


@pytest.mark.parametrize("regular", [False, True])
def test_two_disjoint_rings_are_rejected(regular):
    inst = files.parse_instance({**NR8, "cluster": {**NR8["cluster"], "regular": regular}})
    report = verify(inst, Solution("feasible", "heuristic", Topology(two_rings())))
    assert report.violations == ("no path from 0 to 4 in the topology, but the demand sends bytes 0->4",)


def test_an_mp_pair_and_an_allreduce_group_across_components():
    data = minimal(
        cluster={"servers": 8, "degree": 2, "link_bandwidth_gbps": 100, "regular": False},
        demand={
            "allreduce": [{"members": [0, 1, 2], "bytes": 1e6}, {"members": [1, 6], "bytes": 1e6}],
            "mp": {"pairs": [[2, 3, 1e6], [3, 5, 1e6]]},
        },
    )
    inst = files.parse_instance(data)
    report = verify(inst, Solution("feasible", "heuristic", Topology(two_rings())))
    assert report.violations == (
        "no path from 3 to 5 in the topology, but the demand sends bytes 3->5",
        "no path from 1 to 6 in the topology, but both are members of AllReduce group 1, whose ring sends bytes between them",
    )
    # Only the pairs that carry bytes need a path: servers 4..7 without demand may sit apart.
    fine = files.parse_instance(
        {**data, "demand": {"allreduce": [{"members": [0, 1, 2], "bytes": 1e6}], "mp": {"pairs": [[2, 3, 1e6]]}}}
    )
    assert verify(fine, Solution("feasible", "heuristic", Topology(two_rings())), check_metrics=False).valid


def test_directed_topologies_need_directed_paths():
    # A directed line 0->1->...->7: every server reaches the higher ones, none the lower ones.
    line = np.zeros((8, 8), dtype=np.int64)
    line[np.arange(7), np.arange(1, 8)] = 1
    cluster = {"servers": 8, "degree": 1, "link_bandwidth_gbps": 100, "regular": False, "links": "directed"}
    forward = files.parse_instance(minimal(cluster=cluster, demand={"mp": {"pairs": [[0, 7, 1e6], [2, 5, 1e6]]}}))
    assert verify(forward, Solution("feasible", "x", Topology(line)), check_metrics=False).valid
    backward = files.parse_instance(minimal(cluster=cluster, demand={"mp": {"pairs": [[0, 7, 1e6], [5, 2, 1e6]]}}))
    assert verify(backward, Solution("feasible", "x", Topology(line))).violations == (
        "no path from 5 to 2 in the topology, but the demand sends bytes 5->2",
    )
    group = files.parse_instance(minimal(cluster=cluster, demand={"allreduce": [{"members": [1, 4], "bytes": 1e6}]}))
    assert verify(group, Solution("feasible", "x", Topology(line))).violations == (
        "no path from 4 to 1 in the topology, but both are members of AllReduce group 0, whose ring sends bytes between them",
    )


def test_a_workloads_demand_comes_from_its_placement():
    from conftest import instance_data
    from topoopt_ilp.core.routes import Routing

    data = instance_data("dlrm-mini-6")
    data["cluster"]["regular"] = False
    inst = files.parse_instance(data)
    sol = solve(inst, method="heuristic")
    assert verify(inst, sol).valid
    split = replace(sol, topology=Topology(two_rings(inst.n)), routing=Routing(), metrics={}, objective=None)
    report = verify(inst, split).violations
    assert report and all(v.startswith("no path from ") for v in report), report


def test_only_solutions_that_claim_a_design_are_checked():
    inst = files.parse_instance(NR8)
    assert verify(inst, Solution("no_solution", "exact", None)).valid


# --- 2. bound and gap claims ---------------------------------------------------------------------


def claims(inst, sol, **over):
    """The violations of ``sol`` with claims ``over``, stated by the exact method (the only one of this
    toolkit's methods that proves bounds)."""
    return [v for v in verify(inst, replace(sol, **{"method": "exact", **over})).violations]


def test_a_bound_on_the_wrong_side_of_a_minimised_objective():
    inst = instance()
    sol = valid_solution(inst)
    obj = sol.objective
    for status in ("optimal", "feasible"):
        report = claims(inst, sol, status=status, bound=obj * 1.01)
        assert any("is above the objective" in v for v in report), report
    assert claims(inst, sol, status="feasible", bound=obj * (1 + 1e-9)) == []  # within the tolerance
    assert claims(inst, sol, status="feasible", bound=obj * 0.9) == []
    assert claims(inst, sol, status="optimal", bound=obj) == []


def test_a_bound_on_the_wrong_side_of_a_maximised_objective():
    inst = replace(instance(), objective="throughput")
    sol = valid_solution(inst)
    obj = sol.objective
    assert obj == pytest.approx(sol.metrics["throughput"])
    for status in ("optimal", "feasible"):
        report = claims(inst, sol, status=status, bound=obj * 0.99)
        assert any("is below the objective" in v for v in report), report
    assert claims(inst, sol, status="feasible", bound=obj * 1.5) == []
    assert claims(inst, sol, status="optimal", bound=obj, gap=0.0) == []


def test_a_gap_that_contradicts_objective_and_bound():
    inst = instance()
    sol = valid_solution(inst)
    obj = sol.objective
    report = claims(inst, sol, status="feasible", bound=obj * 0.8, gap=0.01)
    assert any(v.startswith("gap is 0.01, but objective") and "= 0.2" in v for v in report), report
    assert claims(inst, sol, status="feasible", bound=obj * 0.8, gap=0.2) == []
    assert any("never negative" in v for v in claims(inst, sol, status="feasible", gap=-0.5))
    # Throughput: the same definition, |objective - bound| / |objective|.
    tinst = replace(inst, objective="throughput")
    tsol = valid_solution(tinst)
    assert claims(tinst, tsol, status="feasible", bound=tsol.objective * 1.25, gap=0.25) == []
    assert any(
        v.startswith("gap is 0, but")
        for v in claims(tinst, tsol, status="feasible", bound=tsol.objective * 1.25, gap=0.0)
    )


def test_optimal_needs_its_gap_closed():
    inst = instance()
    sol = valid_solution(inst)
    obj = sol.objective
    report = claims(inst, sol, status="optimal", bound=obj * 0.9, gap=0.1)
    assert report == [
        f"status optimal but objective {obj:.12g} and bound {obj * 0.9:.12g} are 0.1 apart (relative), "
        "more than the gap 0.0001 within which a solve is called optimal"
    ]
    # Within the exact methods' default gap (1e-4) it is optimal; an instance's solver.gap widens it.
    assert claims(inst, sol, status="optimal", bound=obj * (1 - 5e-5), gap=5e-5) == []
    loose = replace(inst, solver=replace(inst.solver, gap=0.2))
    assert claims(loose, sol, status="optimal", bound=obj * 0.9, gap=0.1) == []

    # The same numbers with status feasible claim nothing false.
    assert claims(inst, sol, status="feasible", bound=obj * 0.9, gap=0.1) == []


# --- 3. every violation, not only the first ------------------------------------------------------


def test_optimal_without_a_bound_does_not_hide_the_other_violations():
    inst = instance()
    sol = valid_solution(inst)
    m = sol.topology.matrix.copy()
    m[0, 4] = m[4, 0] = 1
    bad = replace(sol, status="optimal", bound=None, topology=Topology(m, sol.topology.jumps))
    report = verify(inst, bad).violations
    assert "status optimal but the solution states no bound" in report
    assert any("server 0 has degree 3, needs exactly 2" in v for v in report), report


def test_claims_are_reported_with_the_structural_violations():
    inst = files.parse_instance(NR8)
    sol = Solution("optimal", "heuristic", Topology(two_rings()), objective=1.0, bound=2.0, gap=0.0)
    report = verify(inst, sol).violations
    assert any("is above the objective" in v for v in report)
    assert any(v.startswith("gap is 0, but") for v in report)
    assert any(v.startswith("status optimal but objective") for v in report)
    assert any(v.startswith("no path from 0 to 4") for v in report)
