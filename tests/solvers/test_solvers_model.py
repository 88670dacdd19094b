"""ModelBuilder / LinearModel / SolveOptions: arrays in, arrays out, errors said plainly."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from topoopt_ilp.solvers import LinearModel, ModelBuilder, ModelError, Sense, SolveOptions, VarKind

INF = np.inf


def _small() -> LinearModel:
    b = ModelBuilder("small")
    x = b.add_variables((2, 3), ub=4, kind="integer", name="x")
    y = b.add_variables(2, lb=-1, ub=INF, name="y")
    # row 0 lists (0, x[0,0]) twice: duplicates are summed
    b.add_constraints(
        [0, 0, 0, 1, 1], [x[0, 0], x[0, 0], y[1], x[1, 2], y[0]], [1, 2, 5, 1, -1], lb=[-INF, 2], ub=[7, 2], name="row"
    )
    b.add_constraints([0, 0], [y[0], y[1]], 1.0, lb=-3, ub=3, name="rng")
    b.set_objective([x[0, 0], y[1], y[1]], [1, 2, 0.5], sense="maximize", constant=3)
    return b.build()


def test_builder_produces_csr_bounds_kinds_and_objective():
    m = _small()
    assert (m.num_vars, m.num_rows, m.num_nonzeros) == (8, 3, 6)
    dense = m.matrix.toarray()
    assert dense[0].tolist() == [3, 0, 0, 0, 0, 0, 0, 5]
    assert dense[1].tolist() == [0, 0, 0, 0, 0, 1, -1, 0]
    assert dense[2].tolist() == [0, 0, 0, 0, 0, 0, 1, 1]
    assert m.matrix.indices.dtype == np.int32 and m.matrix.indptr.dtype == np.int32
    assert m.row_lower.tolist() == [-INF, 2, -3] and m.row_upper.tolist() == [7, 2, 3]
    assert m.col_lower.tolist() == [0] * 6 + [-1, -1] and m.col_upper.tolist() == [4] * 6 + [INF, INF]
    assert m.integrality.tolist() == [True] * 6 + [False] * 2
    assert m.objective.tolist() == [1, 0, 0, 0, 0, 0, 0, 2.5] and m.objective_offset == 3
    assert m.sense is Sense.MAXIMIZE and m.is_mip and m.has_continuous


def test_blocks_give_indices_and_readable_names():
    b = ModelBuilder()
    x = b.add_variables((2, 3), name="x")
    z = b.add_variables(1, name="z")
    assert x.index.tolist() == [[0, 1, 2], [3, 4, 5]] and x[1, 2] == 5 and x[:, 0].tolist() == [0, 3]
    assert z[0] == 6 and (x.size, z.start, z.stop) == (6, 6, 7)
    rows = b.add_constraints([0, 1], [x[0, 0], z[0]], 1.0, ub=[1, 2], name="cap")
    m = b.build()
    assert m.column_names() == ["x[0,0]", "x[0,1]", "x[0,2]", "x[1,0]", "x[1,1]", "x[1,2]", "z"]
    assert m.row_names() == ["cap[0]", "cap[1]"] and rows.index.tolist() == [0, 1]


def test_binary_bounds_are_clipped_and_kind_recorded():
    b = ModelBuilder()
    x = b.add_variables(3, lb=-5, ub=7, kind=VarKind.BINARY)
    m = b.build()
    assert m.col_lower.tolist() == [0, 0, 0] and m.col_upper.tolist() == [1, 1, 1]
    assert m.col_kind.tolist() == [VarKind.BINARY.code] * 3 and x.kind is VarKind.BINARY


def test_model_arrays_are_read_only_and_replace_derives_a_new_model():
    m = _small()
    with pytest.raises(ValueError):
        m.col_upper[0] = 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.name = "other"  # type: ignore[misc]
    feas = m.with_objective(None)
    assert not feas.objective.any() and feas.objective_offset == 0 and m.objective[0] == 1


def test_objective_value_and_violation():
    m = _small()
    x = np.zeros(8)
    x[0], x[5], x[6], x[7] = 1, 2, 0, 0.8  # row0: 3 + 4 = 7 ok; row1: 2 - 0 = 2 ok; rng: 0.8 ok
    assert m.objective_value(x) == pytest.approx(1 + 2.5 * 0.8 + 3)
    assert m.max_violation(x) == 0.0
    x[0] = 1.5  # fractional integer and row 0 = 4.5 + 4 = 8.5 > 7
    assert m.max_violation(x) == pytest.approx(1.5)


@pytest.mark.parametrize(
    "build, match",
    [
        (lambda b: b.add_constraints([0], [5], [1.0], ub=1), "column index"),
        (lambda b: b.add_constraints([3], [0], [1.0], ub=[1, 1]), "local row index"),
        (lambda b: b.add_constraints([0, 1], [0], [1.0]), "different lengths"),
        (lambda b: b.add_variables(2, lb=[0, 0, 0]), "lb has 3 entries"),
        (lambda b: b.set_objective([9], [1.0]), "column index"),
    ],
)
def test_builder_rejects_bad_input(build, match):
    b = ModelBuilder()
    b.add_variables(2)
    with pytest.raises(ModelError, match=match):
        build(b)


@pytest.mark.parametrize(
    "lb, ub, rlb, match",
    [(2.0, 1.0, 0.0, "lower bound > upper bound"), (np.nan, 1.0, 0.0, "NaN"), (0.0, 1.0, 5.0, "lower bound > upper")],
)
def test_build_validates_bounds(lb, ub, rlb, match):
    b = ModelBuilder()
    b.add_variables(1, lb=lb, ub=ub, name="v")
    b.add_constraints([0], [0], [1.0], lb=rlb, ub=1.0)
    with pytest.raises(ModelError, match=match):
        b.build()


def test_empty_model_builds():
    m = ModelBuilder().build()
    assert (m.num_vars, m.num_rows, m.matrix.shape, m.is_mip) == (0, 0, (0, 0), False)


def test_options_validation_and_warm_start_vector():
    with pytest.raises(ValueError, match="time_limit_s"):
        SolveOptions(time_limit_s=-1)
    with pytest.raises(ValueError, match="threads"):
        SolveOptions(threads=0)
    with pytest.raises(ValueError, match="rel_gap"):
        SolveOptions(rel_gap=-0.1)
    with pytest.raises(TypeError, match="unknown solve option"):
        SolveOptions.from_kwargs(time_limt_s=3)
    merged = SolveOptions.from_kwargs(SolveOptions(time_limit_s=5, seed=1), seed=2)
    assert (merged.time_limit_s, merged.seed) == (5, 2)
    vec = SolveOptions(warm_start={1: 3.0, 3: 0.0}).warm_start_vector(4)
    assert np.isnan(vec[[0, 2]]).all() and vec[[1, 3]].tolist() == [3.0, 0.0]
    assert SolveOptions(warm_start=[1, np.nan]).warm_start_vector(2)[0] == 1.0
    with pytest.raises(ModelError, match="outside"):
        SolveOptions(warm_start={7: 1.0}).warm_start_vector(4)
    with pytest.raises(ModelError, match="entries"):
        SolveOptions(warm_start=[1.0]).warm_start_vector(4)
