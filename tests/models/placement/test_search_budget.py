"""The local search budgeted in moves (placement_search.SearchBudget): the same seed and move budget
give the same strategy however fast the machine runs, and every entry point checks the budget."""

from __future__ import annotations

import json
import math
import time

import numpy as np
import pytest

from topoopt_ilp import files
from topoopt_ilp.cli import main
from topoopt_ilp.errors import InputError
from topoopt_ilp.files.zoo import generate
from topoopt_ilp.models.common import ExactOptions
from topoopt_ilp.models.placement import milp as pl
from topoopt_ilp.models.placement.milp import improve_strategy, shortest_path_fractions, solve_placement
from topoopt_ilp.models.placement.scoring import SearchBudget, StrategyScorer


@pytest.fixture(scope="module")
def dlrm8():
    """The zoo's DLRM on 8 servers (64 tables): large enough for solve_placement's local search, on
    the ring topology with jumps 1, 2."""
    inst = files.parse_instance(generate("dlrm", 8, 4, 100.0))
    n = inst.n
    X = np.zeros((n, n), dtype=int)
    for i in range(n):
        for j in (1, 2):
            X[i, (i + j) % n] = X[(i + j) % n, i] = 1
    return inst, X


def test_a_budget_counts_its_moves_into_every_part_and_stops_on_either_limit():
    b = SearchBudget(math.inf, 5)
    part = b.part(moves=3)
    assert not part.spent()
    for _ in range(3):
        part.charge()
    assert part.spent() and not b.spent() and b.used == 3  # one count, each its own limit
    b.charge(), b.charge()
    assert b.spent() and b.used == 5
    assert SearchBudget(time.perf_counter() - 1).spent()  # the deadline alone
    assert b.part(deadline=time.perf_counter() - 1).spent() and not SearchBudget(math.inf).part(moves=1).spent()


def _starts(inst, rf):
    """The first four memory-feasible start candidates of solve_placement."""
    return [c for c in pl._candidates(inst.workload, inst.n, rf) if pl._memory_feasible(inst.workload, inst.n, c)][:4]


def _slow(monkeypatch, seconds: float) -> None:
    """Every segment move takes ``seconds`` longer: a machine that much slower (or busier)."""
    real = StrategyScorer.segment_move

    def slow(self, i, j):
        time.sleep(seconds)
        return real(self, i, j)

    monkeypatch.setattr(StrategyScorer, "segment_move", slow)


def test_a_move_budget_gives_the_same_strategy_on_a_slower_machine(dlrm8, monkeypatch):
    inst, X = dlrm8
    rf = shortest_path_fractions(X, inst.cluster.link_bytes_per_s)
    starts = _starts(inst, rf)
    ls = StrategyScorer(inst, rf)
    fast = improve_strategy(inst, rf, starts, 600.0, ls=ls, moves=400)
    assert ls.moves_scored == 400  # kicked on until the budget was spent (a stall would stop it short)
    _slow(monkeypatch, 0.002)
    ls2 = StrategyScorer(inst, rf)
    slow = improve_strategy(inst, rf, starts, 600.0, ls=ls2, moves=400)
    assert slow == fast and ls2.moves_scored == 400
    # the budget fixes the work, not the path: another seed searches its own way to a valid strategy
    other = improve_strategy(inst, rf, starts, 600.0, seed=1, moves=400)
    assert not pl.validate_strategy(inst.workload, inst.n, other)


def test_without_a_move_budget_the_search_stops_on_its_time(dlrm8):
    inst, X = dlrm8
    rf = shortest_path_fractions(X, inst.cluster.link_bytes_per_s)
    starts = _starts(inst, rf)
    t0 = time.perf_counter()
    ls = StrategyScorer(inst, rf)
    improve_strategy(inst, rf, starts, 0.5, ls=ls, max_stall=10**9)
    assert time.perf_counter() - t0 < 0.5 + 0.5 and ls.moves_scored > 0


def test_solve_placement_with_a_move_budget_is_reproducible_and_reports_its_moves(dlrm8, monkeypatch):
    # the MILP skipped as at 128 servers (there it is too large to solve in time): both local-search
    # stages share the move budget, a quarter before the bounds and the rest after them
    inst, X = dlrm8
    monkeypatch.setattr(pl, "MILP_SEARCH_NONZEROS", 0)
    opts = ExactOptions(time_limit_s=300, gap=1e-6, search_moves=300)
    first = solve_placement(inst, opts, X, chain_bound_s=0)
    d = first.details
    assert d["local_search_moves"] == 300 and d["local_search_timed_out"] is False
    assert d["milp"].endswith("the moves left went to local search")
    _slow(monkeypatch, 0.002)
    second = solve_placement(inst, opts, X, chain_bound_s=0)
    assert dict(second.placement) == dict(first.placement) and second.objective == first.objective
    # the time limit stays the safety net, and says so
    cut = solve_placement(inst, ExactOptions(time_limit_s=1.5, gap=1e-6, search_moves=10**9), X, chain_bound_s=0)
    assert cut.has_solution and cut.details["local_search_timed_out"] is True


@pytest.mark.parametrize("bad", [0, -3, 2.5, True])
def test_a_move_budget_must_be_a_positive_integer(bad):
    with pytest.raises(InputError, match="search moves must be an integer >= 1"):
        ExactOptions(search_moves=bad)


def test_the_cli_checks_search_moves(tmp_path, capsys):
    from conftest import INSTANCES

    with pytest.raises(SystemExit) as usage:  # argparse's usage error
        main(["solve", str(INSTANCES / "dlrm-mini-8-fixed.json"), "--search-moves", "0"])
    assert usage.value.code == 2
    assert "--search-moves" in capsys.readouterr().err
    assert (
        main(["solve", str(INSTANCES / "dlrm-mini-8-fixed.json"), "--method", "heuristic", "--search-moves", "5"]) == 2
    )
    assert "applies to --method exact or alternating" in capsys.readouterr().err
    assert main(["solve", str(INSTANCES / "mix-8.json"), "--method", "exact", "--search-moves", "5"]) == 2
    err = capsys.readouterr().err
    assert "workload with a fixed_topology" in err and err.count("\n") == 1
    out = tmp_path / "sol.json"
    assert (
        main(
            [
                "solve",
                str(INSTANCES / "dlrm-mini-8-fixed.json"),
                "--method",
                "exact",
                "--search-moves",
                "50",
                "--time-limit",
                "30",
                "--out",
                str(out),
                "--quiet",
            ]
        )
        == 0
    )
    assert json.loads(out.read_text())["placement"]


def test_compare_and_sweep_hand_the_budget_to_the_placement_searches_only():
    from conftest import INSTANCES
    from topoopt_ilp.experiments.compare import plan_runs

    fixed = files.load_instance(INSTANCES / "dlrm-mini-8-fixed.json")
    free = files.load_instance(INSTANCES / "dlrm-like-6.json")
    runs = {m: o for m, _, o in plan_runs(fixed, ["heuristic", "exact"], search_moves=7)}
    assert runs["exact"]["search_moves"] == 7 and "search_moves" not in runs["heuristic"]
    runs = {m: o for m, _, o in plan_runs(free, ["heuristic", "exact", "alternating"], search_moves=7)}
    assert runs["alternating"]["search_moves"] == 7  # the joint models have no local search: not theirs
    assert "search_moves" not in runs["exact"] and "search_moves" not in runs["heuristic"]
    # not given: no key at all (a sweep journal's keys of earlier runs stay the same)
    assert all("search_moves" not in o for _, _, o in plan_runs(free, ["exact", "alternating"]))


def test_the_cli_compares_with_a_move_budget(capsys):
    from conftest import INSTANCES

    assert (
        main(
            [
                "compare",
                str(INSTANCES / "dlrm-mini-8-fixed.json"),
                "--methods",
                "heuristic,exact",
                "--search-moves",
                "50",
                "--time-limit",
                "30",
                "--format",
                "json",
            ]
        )
        == 0
    )
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert {r["method"] for r in rows} == {"heuristic", "exact"} and all(r["status"] != "error" for r in rows)
