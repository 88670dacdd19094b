"""``verify --prove``: a stated bound checked by solving again. The exact method's own claim is
confirmed, a heuristic design relabelled as a proven optimum is refuted, a time limit too short to
decide is exit 4, and a solution without a bound has nothing to prove."""

from __future__ import annotations

from dataclasses import replace

import pytest

from conftest import INSTANCES
from topoopt_ilp import files, solve
from topoopt_ilp.cli import main
from topoopt_ilp.methods.prove import check_bound

MIX8 = str(INSTANCES / "mix-8.json")


@pytest.fixture(scope="module")
def mix8():
    inst = files.load_instance(MIX8)
    return inst, solve(inst, method="exact"), solve(inst, method="heuristic")


def test_the_exact_methods_claim_is_confirmed(mix8, tmp_path, capsys):
    inst, exact, _ = mix8
    assert exact.status == "optimal"
    check = check_bound(inst, exact, time_limit_s=60)
    assert check.verdict == "confirmed" and check.exact.bound >= exact.bound * (1 - 1e-4)
    path = tmp_path / "exact.json"
    files.save_solution(exact, path, directed=False)
    assert main(["verify", MIX8, str(path), "--prove"]) == 0
    assert "is confirmed" in capsys.readouterr().out


def test_a_relabelled_heuristic_design_is_refuted(mix8, tmp_path, capsys):
    """The design passes every check verify can make without solving; only a solve shows that a better
    design exists."""
    inst, exact, heuristic = mix8
    assert heuristic.objective > exact.objective * 1.1  # the heuristic is not optimal here
    forged = replace(heuristic, method="exact", status="optimal", bound=heuristic.objective, gap=0.0)
    path = tmp_path / "forged.json"
    files.save_solution(forged, path, directed=False)
    assert main(["verify", MIX8, str(path)]) == 0  # its claims are consistent
    capsys.readouterr()
    assert main(["verify", MIX8, str(path), "--prove"]) == 1
    out = capsys.readouterr().out
    assert "is refuted: the exact method found a design with iteration_time 0.001803" in out


def test_a_time_limit_that_decides_nothing_is_exit_4(mix8, tmp_path, capsys):
    inst, exact, _ = mix8
    path = tmp_path / "exact.json"
    files.save_solution(exact, path, directed=False)
    assert main(["verify", MIX8, str(path), "--prove", "--time-limit", "0"]) == 4
    assert "neither confirmed nor refuted within 0 s" in capsys.readouterr().out


def test_no_bound_nothing_to_prove(mix8, tmp_path, capsys):
    _, _, heuristic = mix8
    path = tmp_path / "heuristic.json"
    files.save_solution(heuristic, path, directed=False)
    assert main(["verify", MIX8, str(path), "--prove"]) == 0
    assert "no bound: there is no claim to prove" in capsys.readouterr().out


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--time-limit", "3"], "--time-limit and --backend apply to --prove only"),
        (["--prove", "--backend", "nope"], "unknown solver backend 'nope'"),
    ],
)
def test_bad_prove_options_exit_2(mix8, tmp_path, capsys, extra, message):
    _, exact, _ = mix8
    path = tmp_path / "exact.json"
    files.save_solution(exact, path, directed=False)
    assert main(["verify", MIX8, str(path), *extra]) == 2
    assert message in capsys.readouterr().err


def test_a_negative_time_limit_is_a_usage_error(tmp_path):
    with pytest.raises(SystemExit) as info:
        main(["verify", MIX8, str(tmp_path / "any.json"), "--prove", "--time-limit", "-1"])
    assert info.value.code == 2
