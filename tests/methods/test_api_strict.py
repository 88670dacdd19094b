"""The Python API refuses bad arguments with the package's own errors (one line naming the field),
and the dataclasses it builds are really immutable, hashable and round-trip through files."""

from __future__ import annotations

import numpy as np
import pytest

from topoopt_ilp import files
from topoopt_ilp.core.instance import (
    AllReduceGroup,
    Cluster,
    CostModel,
    Demand,
    FixedTopology,
    Instance,
    SolverDefaults,
)
from topoopt_ilp.core.solution import Solution, Topology
from topoopt_ilp.errors import InputError, InstanceError
from topoopt_ilp.methods import method_options, solve

CLUSTER = Cluster(servers=8, degree=2, link_bandwidth_gbps=100)


def small(**kw) -> Instance:
    kw.setdefault("demand", Demand(allreduce=(AllReduceGroup((0, 1, 2, 3), 1e6),), all_to_all=1e5))
    return Instance(CLUSTER, **kw)


# 1. Sequences are stored as tuples ------------------------------------------------------------
def test_lists_become_tuples_and_the_instance_is_hashable(tmp_path):
    members = [0, 1, 2, 3]
    group = AllReduceGroup(members, 1e6)
    members.append(99)  # mutating the caller's list no longer reaches the instance
    assert group.members == (0, 1, 2, 3)
    demand = Demand(allreduce=[group], mp=[[0, 5, 1e3]])
    assert demand.allreduce == (group,) and demand.mp == ((0, 5, 1e3),)
    inst = Instance(CLUSTER, demand)
    hash(inst)
    assert inst == Instance(CLUSTER, Demand(allreduce=(AllReduceGroup((0, 1, 2, 3), 1e6),), mp=((0, 5, 1e3),)))
    path = tmp_path / "inst.json"
    files.save_instance(inst, path)
    assert files.load_instance(path) == inst
    assert solve(inst, method="heuristic").has_solution


def test_numpy_members_become_plain_tuples():
    group = AllReduceGroup(np.arange(4), 1e6)
    assert group.members == (0, 1, 2, 3) and all(type(m) is int for m in group.members)


def test_fixed_topology_and_cost_lists_become_tuples(tmp_path):
    jumps = [1]
    fixed = FixedTopology(jumps=jumps)
    jumps.append(3)
    assert fixed.jumps == (1,)
    links = FixedTopology(links=[[i, (i + 1) % 8, 1] for i in range(8)])
    assert links.links[0] == (0, 1, 1)
    cost = CostModel(transceiver_usd=[[100, 50.0], [400, 90.0]])
    assert cost.transceiver_usd == ((100, 50.0), (400, 90.0))
    inst = small(topology_family="circulant", fixed_topology=fixed, cost=cost)
    hash(inst)
    path = tmp_path / "inst.json"
    files.save_instance(inst, path)
    assert files.load_instance(path) == inst
    hash(small(fixed_topology=links))


def test_a_non_list_is_still_refused_with_its_field():
    with pytest.raises(InstanceError, match=r"demand\.allreduce\[0\]\.members: expected a list"):
        small(demand=Demand(allreduce=(AllReduceGroup(5, 1e6),)))
    with pytest.raises(InstanceError, match=r"fixed_topology\.jumps: expected a list"):
        small(fixed_topology=FixedTopology(jumps=1))


# 2. name and description are strings -----------------------------------------------------------
@pytest.mark.parametrize("field", ["name", "description"])
def test_name_and_description_must_be_strings(field):
    with pytest.raises(InstanceError) as exc:
        small(**{field: 5})
    assert exc.value.field == field and "expected a string" in str(exc.value)


# 3. Wrong argument types of Instance ------------------------------------------------------------
@pytest.mark.parametrize(
    "kw, field",
    [
        ({"demand": {"all_to_all": 1.0}}, "demand"),
        ({"fixed_topology": [1]}, "fixed_topology"),
        ({"solver": {"backend": "highs"}}, "solver"),
        ({"cost": {"fabric": "ocs"}}, "cost"),
        ({"demand": None, "workload": "w.json"}, "workload"),
    ],
)
def test_instance_refuses_wrong_argument_types(kw, field):
    with pytest.raises(InstanceError) as exc:
        small(**kw)
    assert exc.value.field == field and "expected a" in str(exc.value)


def test_instance_refuses_a_dict_as_cluster():
    with pytest.raises(InstanceError, match="cluster: expected a Cluster, got dict"):
        Instance({"servers": 8}, Demand(all_to_all=1.0))


# 4. Topology matrices -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "matrix, message",
    [
        (np.full((8, 8), 0.5), "must be integers"),
        (np.full((4, 4), np.nan), "must be integers"),
        (-np.ones((4, 4), dtype=int), ">= 0"),
        (np.ones((3, 4), dtype=int), "square"),
        (np.ones(4, dtype=int), "square"),
        ([["a", "b"], ["c", "d"]], "integer link counts"),
    ],
)
def test_topology_refuses_bad_matrices(matrix, message):
    with pytest.raises(InputError, match=message) as exc:
        Topology(matrix)
    assert exc.value.field == "topology.matrix"


def test_topology_rounds_near_integers_instead_of_truncating():
    ring = np.roll(np.eye(8), 1, axis=1)
    ring = ring + ring.T
    topo = Topology(ring * (1 - 1e-12))  # 0.999999999999 is a link, not none
    assert np.array_equal(topo.matrix, ring.astype(np.int64)) and topo.matrix.dtype == np.int64
    assert not topo.matrix.flags.writeable


# 5. Solution fields -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kw, field",
    [
        ({"status": "great"}, "status"),
        ({"method": ""}, "method"),
        ({"method": 3}, "method"),
        ({"topology": np.eye(2)}, "topology"),
        ({"objective": "1.0"}, "objective"),
    ],
)
def test_solution_refuses_bad_fields(kw, field):
    args = {"status": "feasible", "method": "given", "topology": None, **kw}
    with pytest.raises(InputError) as exc:
        Solution(**args)
    assert exc.value.field == field


# 6. solve()'s arguments -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "method, options, field, message",
    [
        ("heuristic", {"select": "worst"}, "select", "unknown select rule 'worst'"),
        ("heuristic", {"mode": "x"}, "mode", "unknown mode 'x'"),
        ("heuristic", {"seed": "x"}, "seed", "integer >= 0"),
        ("heuristic", {"seed": -1}, "seed", "integer >= 0"),
        ("exact", {"threads": 0}, "threads", "integer in 1..1024"),
        ("exact", {"time_limit_s": "5"}, "time_limit_s", "finite number >= 0"),
        ("exact", {"gap": float("nan")}, "gap", "finite number >= 0"),
        ("baseline", {"baseline": "nope"}, "baseline", "unknown baseline"),
        ("alternating", {"rounds": 2.5}, "rounds", "integer"),
    ],
)
def test_solve_refuses_bad_option_values(method, options, field, message):
    with pytest.raises(InputError, match=message) as exc:
        solve(small(), method=method, **options)
    assert exc.value.field == field and "\n" not in str(exc.value)


@pytest.mark.parametrize(
    "method, key", [("heuristic", "foo"), ("heuristic", "time_limit_s"), ("exact", "select"), ("baseline", "mode")]
)
def test_solve_refuses_unknown_options_naming_the_accepted_ones(method, key):
    with pytest.raises(InputError) as exc:
        solve(small(), method=method, **{key: 1})
    text = str(exc.value)
    assert text.startswith(f"solve: unknown option {key!r} for method {method}; it takes: ")
    for name in method_options(method):
        assert name in text


def test_time_limit_for_the_heuristic_says_where_it_applies():
    with pytest.raises(InputError, match=r"time_limit_s is an option of exact and alternating"):
        solve(small(), method="heuristic", time_limit_s=5)


@pytest.mark.parametrize("given", ["file.json", {"cluster": {}}, None])
def test_solve_needs_an_instance(given):
    with pytest.raises(InputError, match="solve: instance: expected an Instance") as exc:
        solve(given)
    assert ("load_instance" in str(exc.value)) == isinstance(given, str)


def test_solve_refuses_an_unhashable_method_name():
    with pytest.raises(InputError, match="unknown method"):
        solve(small(), method=["heuristic"])


def test_a_user_method_gets_its_own_options_checked_by_signature():
    def mine(instance, *, flavour="plain"):
        return Solution(
            "feasible",
            "given",
            Topology(np.roll(np.eye(8, dtype=int), 1, 1) + np.roll(np.eye(8, dtype=int), -1, 1)),
            details={"flavour": flavour},
        )

    assert solve(small(), mine, flavour="x").details["flavour"] == "x"  # values are its own business
    with pytest.raises(InputError, match="unknown option 'seed' for method mine; it takes: flavour"):
        solve(small(), mine, seed=1)


def test_valid_options_still_run():
    inst = small()
    assert solve(inst, method="heuristic", select="best", mode="authors", seed=3).has_solution
    assert solve(inst, method="baseline", baseline="expander", seed=1).has_solution


# 7. The instance's solver section is applied by solve(method="exact") ------------------------------
def test_solve_exact_takes_the_instance_solver_section_as_defaults(monkeypatch):
    import topoopt_ilp.models as models

    seen = {}

    class Stop(Exception):
        pass

    def fake(instance, options, **starts):  # starts: what the method layer hands the models
        seen["options"] = options
        raise Stop

    monkeypatch.setattr(models, "solve_exact", fake)
    inst = small(solver=SolverDefaults(backend="scip", time_limit_s=10, gap=0.01, threads=2))
    with pytest.raises(Stop):
        solve(inst, method="exact")
    o = seen["options"]
    assert (o.backend, o.time_limit_s, o.gap, o.threads) == ("scip", 10, 0.01, 2)
    with pytest.raises(Stop):  # keyword arguments override the instance; None counts as not given
        solve(inst, method="exact", backend="highs", time_limit_s=3, gap=None)
    o = seen["options"]
    assert (o.backend, o.time_limit_s, o.gap, o.threads) == ("highs", 3, 0.01, 2)


def test_solve_exact_uses_the_instance_backend_end_to_end(monkeypatch):
    """An unknown backend is refused with the instance; a known one the machine lacks, by the solve
    that would use it (and a backend given to solve overrides the instance's)."""
    from topoopt_ilp.solvers.registry import BackendInfo

    with pytest.raises(InputError, match="solver.backend: must be one of"):
        small(solver=SolverDefaults(backend="no-such-solver"))
    inst = small(solver=SolverDefaults(backend="cbc"))
    monkeypatch.setattr(BackendInfo, "is_available", lambda self: self.name != "cbc")
    with pytest.raises(InputError, match="cbc"):
        solve(inst, method="exact")
    monkeypatch.undo()
    assert solve(inst, method="exact", backend="highs", time_limit_s=30).has_solution


def test_alternating_takes_the_instance_backend_and_time_limit(monkeypatch):
    """The alternating method's backend and overall budget come from the solver section too (the CLI
    used to pass its own default backend, so an instance asking for CBC got HiGHS)."""
    import topoopt_ilp.methods.alternating as alternating

    seen = {}

    class Stop(Exception):
        pass

    def fake(instance, *, backend="highs", time_limit_s=None, rounds=5):
        seen.update(backend=backend, time_limit_s=time_limit_s)
        raise Stop

    monkeypatch.setattr(alternating, "solve_alternating", fake)
    inst = small(solver=SolverDefaults(backend="cbc", time_limit_s=7, gap=0.01))
    with pytest.raises(Stop):
        solve(inst, method="alternating")
    assert seen == {"backend": "cbc", "time_limit_s": 7}  # gap and threads are not the alternating method's
    seen.clear()
    with pytest.raises(Stop):
        solve(inst, method="alternating", backend=None, time_limit_s=3)
    assert seen == {"backend": "cbc", "time_limit_s": 3}


def test_a_solutions_mappings_are_read_only_copies():
    """The dataclass is frozen, and so are its metrics, details and placement (they used to be
    plain dicts anyone could change after the verifier had seen them)."""
    from topoopt_ilp.core.solution import Solution

    details = {"note": "mine"}
    sol = Solution(status="feasible", method="given", topology=None, details=details, placement={"layer_degree": [1]})
    details["note"] = "changed later"
    assert sol.details["note"] == "mine"  # a copy: the caller's dict stays theirs
    for mapping in (sol.details, sol.placement, sol.metrics):
        with pytest.raises(TypeError):
            mapping["x"] = 1
    with pytest.raises(InputError, match="expected a mapping"):
        Solution(status="feasible", method="given", topology=None, details=[("a", 1)])
