"""MPS / LP export: write, read back with highspy, same optimum."""

from __future__ import annotations

import highspy
import pytest
import solvers_cases as cases

from topoopt_ilp import solvers as S

OPTIMAL_CASES = [f for f in cases.ALL_CASES if f().status is S.SolveStatus.OPTIMAL]


def _read_and_solve(path) -> tuple[highspy.HighsModelStatus, float, highspy.Highs]:
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    assert h.readModel(str(path)) == highspy.HighsStatus.kOk
    h.setOptionValue("mip_rel_gap", 0.0)
    h.run()
    return h.getModelStatus(), h.getInfo().objective_function_value, h


@pytest.mark.parametrize("ext", [".mps", ".lp"])
@pytest.mark.parametrize("make", OPTIMAL_CASES, ids=lambda f: f.__name__)
def test_round_trip_same_optimum(tmp_path, make, ext):
    case = make()
    path = S.write_model(case.model, tmp_path / f"model{ext}")
    assert path.exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    status, objective, h = _read_and_solve(path)
    assert status == highspy.HighsModelStatus.kOptimal
    assert objective == pytest.approx(case.objective, abs=1e-6)
    assert h.getNumCol() == case.model.num_vars
    assert sum(int(v) for v in h.getLp().integrality_) == int(case.model.integrality.sum())


def test_names_are_readable_and_lp_safe(tmp_path):
    text = S.write_model(cases.assignment().model, tmp_path / "a.lp").read_text()
    assert "assign_0_3" in text and "row_2" in text and "[" not in text


def test_mps_is_free_format_with_full_names(tmp_path):
    b = S.ModelBuilder()
    x = b.add_variables(2, kind="binary", name="a_rather_long_block_name")
    b.add_constraints([0, 0], x.index, 1.0, ub=1, name="c")
    b.set_objective(x.index, [1, 2], sense="maximize")
    text = S.write_model(b.build(), tmp_path / "m.mps").read_text()
    assert "a_rather_long_block_name_1" in text  # fixed MPS would cut names at 8 characters


def test_unknown_extension_is_refused(tmp_path):
    with pytest.raises(S.ModelError, match="unknown model file extension '.txt'"):
        S.write_model(cases.knapsack().model, tmp_path / "m.txt")
    assert list(tmp_path.iterdir()) == []
