"""Backend-neutral linear model: arrays in, arrays out.

A :class:`LinearModel` is what every backend receives::

    minimize / maximize   c @ x + offset
    subject to            row_lower <= A @ x <= row_upper      (A: CSR, ranged rows; lb == ub is "=")
                          col_lower <= x <= col_upper          (+-inf allowed)
                          x[j] integral where kind[j] is integer or binary

It is assembled by a :class:`ModelBuilder` from numpy index arrays (COO triplets), never from
per-term expression objects: models with 10^5-10^6 non-zeros are built in a few numpy calls, and
the CSR arrays go to HiGHS as they are (see ``benchmarks/model_build.py``).

Example
-------
>>> b = ModelBuilder()
>>> x = b.add_variables(3, ub=1, kind="binary", name="x")
>>> _ = b.add_constraints(rows=[0, 0, 0], cols=x.index, vals=[2, 3, 4], ub=5, name="cap")
>>> b.set_objective(x.index, [3, 4, 5], sense="maximize")
>>> m = b.build()
>>> m.num_vars, m.num_rows, m.is_mip
(3, 1, True)
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike

from topoopt_ilp.solvers.errors import ModelError

__all__ = [
    "VarKind",
    "Sense",
    "VarBlock",
    "RowBlock",
    "LinearModel",
    "ModelBuilder",
]

INF = float("inf")


class VarKind(str, enum.Enum):
    """Type of a column. ``BINARY`` is an integer column whose bounds lie within [0, 1]."""

    CONTINUOUS = "continuous"
    INTEGER = "integer"
    BINARY = "binary"

    @property
    def code(self) -> int:
        """The small integer stored per column in :attr:`LinearModel.col_kind`."""
        return _KIND_CODE[self]


_KIND_CODE = {VarKind.CONTINUOUS: 0, VarKind.INTEGER: 1, VarKind.BINARY: 2}


class Sense(str, enum.Enum):
    """Objective sense."""

    MINIMIZE = "minimize"
    MAXIMIZE = "maximize"


@dataclass(frozen=True)
class _Block:
    """A contiguous range of column (or row) indices, viewed with a shape."""

    name: str
    start: int
    shape: tuple[int, ...]

    @property
    def size(self) -> int:
        """Number of indices in the block."""
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def stop(self) -> int:
        """One past the last index."""
        return self.start + self.size

    @property
    def index(self) -> np.ndarray:
        """The global indices as an int64 array of :attr:`shape` (C order)."""
        return np.arange(self.start, self.stop, dtype=np.int64).reshape(self.shape)

    def __getitem__(self, key: Any) -> np.ndarray | int:
        """Global index (or indices) of an element of the block, numpy indexing rules."""
        out = self.index[key]
        return int(out) if np.ndim(out) == 0 else out

    def __len__(self) -> int:
        return self.shape[0] if self.shape else 1

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self.index if dtype is None else self.index.astype(dtype)

    def local(self, global_index: ArrayLike) -> np.ndarray:
        """Position inside the block (flat) of global indices."""
        return np.asarray(global_index) - self.start

    def element_name(self, flat: int) -> str:
        """Readable name of one element, ``name[i,j]`` style (``name`` alone for a scalar block)."""
        if not self.shape or self.shape == (1,):
            return self.name
        idx = np.unravel_index(flat, self.shape)
        return f"{self.name}[{','.join(str(int(i)) for i in idx)}]"


@dataclass(frozen=True)
class VarBlock(_Block):
    """Columns added by one :meth:`ModelBuilder.add_variables` call."""

    kind: VarKind = VarKind.CONTINUOUS


@dataclass(frozen=True)
class RowBlock(_Block):
    """Rows added by one :meth:`ModelBuilder.add_constraints` call."""


def _readonly(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False)
class LinearModel:
    """An immutable linear (mixed-integer) program stored as arrays.

    Attributes
    ----------
    col_lower, col_upper : float64 arrays (n,)
        Column bounds, +-inf allowed.
    col_kind : uint8 array (n,)
        ``VarKind.code`` per column (0 continuous, 1 integer, 2 binary).
    matrix : scipy.sparse.csr_array (m, n)
        Constraint matrix; int32 indices, sorted, duplicates summed, no explicit zeros.
    row_lower, row_upper : float64 arrays (m,)
        Row activity bounds (ranged rows; equality when equal).
    objective : float64 array (n,)
        Linear objective coefficients.
    objective_offset : float
        Constant added to the objective.
    sense : Sense
    var_blocks, row_blocks : tuple of blocks
        How columns / rows were added (names and shapes), used for readable names.
    name : str

    Arrays are read-only; use :func:`dataclasses.replace` (or :meth:`with_objective`) to derive
    a new model.
    """

    col_lower: np.ndarray
    col_upper: np.ndarray
    col_kind: np.ndarray
    matrix: sp.csr_array
    row_lower: np.ndarray
    row_upper: np.ndarray
    objective: np.ndarray
    objective_offset: float = 0.0
    sense: Sense = Sense.MINIMIZE
    var_blocks: tuple[VarBlock, ...] = ()
    row_blocks: tuple[RowBlock, ...] = ()
    name: str = "model"

    def __post_init__(self) -> None:
        n, m = self.col_lower.shape[0], self.row_lower.shape[0]
        for label, arr, size in (
            ("col_upper", self.col_upper, n),
            ("col_kind", self.col_kind, n),
            ("objective", self.objective, n),
            ("row_upper", self.row_upper, m),
        ):
            if arr.shape != (size,):
                raise ModelError(f"{label} has shape {arr.shape}, expected ({size},)")
        if self.matrix.shape != (m, n):
            raise ModelError(f"matrix has shape {self.matrix.shape}, expected {(m, n)}")
        if np.isnan(self.col_lower).any() or np.isnan(self.col_upper).any():
            raise ModelError("column bounds contain NaN")
        if np.isnan(self.row_lower).any() or np.isnan(self.row_upper).any():
            raise ModelError("row bounds contain NaN")
        if not np.isfinite(self.objective).all() or not np.isfinite(self.matrix.data).all():
            raise ModelError("objective or matrix contains a non-finite coefficient")
        if not np.isfinite(self.objective_offset):
            raise ModelError("objective offset is not finite")
        bad = np.flatnonzero(self.col_lower > self.col_upper)
        if bad.size:
            raise ModelError(f"column {self.column_name(int(bad[0]))}: lower bound > upper bound")
        bad = np.flatnonzero(self.row_lower > self.row_upper)
        if bad.size:
            raise ModelError(f"row {self.row_name(int(bad[0]))}: lower bound > upper bound")
        if (self.col_lower == INF).any() or (self.col_upper == -INF).any():
            raise ModelError("a column bound of +inf lower or -inf upper")
        binary = self.col_kind == VarKind.BINARY.code
        if ((self.col_lower[binary] < 0) | (self.col_upper[binary] > 1)).any():
            raise ModelError("binary columns must have bounds within [0, 1]")
        object.__setattr__(self, "sense", Sense(self.sense))

    # -- sizes and kinds ---------------------------------------------------------------------------
    @property
    def num_vars(self) -> int:
        """Number of columns."""
        return int(self.col_lower.shape[0])

    @property
    def num_rows(self) -> int:
        """Number of constraint rows."""
        return int(self.row_lower.shape[0])

    @property
    def num_nonzeros(self) -> int:
        """Non-zeros of the constraint matrix."""
        return int(self.matrix.nnz)

    @property
    def integrality(self) -> np.ndarray:
        """Boolean mask of the integer (incl. binary) columns."""
        return self.col_kind != VarKind.CONTINUOUS.code

    @property
    def is_mip(self) -> bool:
        """True when at least one column is integer or binary."""
        return bool(self.integrality.any())

    @property
    def has_continuous(self) -> bool:
        """True when at least one column is continuous."""
        return bool((~self.integrality).any())

    # -- names -------------------------------------------------------------------------------------
    def column_name(self, j: int) -> str:
        """Readable name of column ``j`` (``block[i,k]``), ``x{j}`` outside any block."""
        return _name_in(self.var_blocks, j, "x")

    def row_name(self, i: int) -> str:
        """Readable name of row ``i``, ``r{i}`` outside any block."""
        return _name_in(self.row_blocks, i, "r")

    def column_names(self) -> list[str]:
        """All column names (built on demand: a Python string per column is slow for big models)."""
        return [self.column_name(j) for j in range(self.num_vars)]

    def row_names(self) -> list[str]:
        """All row names."""
        return [self.row_name(i) for i in range(self.num_rows)]

    # -- evaluation --------------------------------------------------------------------------------
    def objective_value(self, x: ArrayLike) -> float:
        """Objective of an assignment (including the offset)."""
        return float(self.objective @ np.asarray(x, dtype=float) + self.objective_offset)

    def max_violation(self, x: ArrayLike) -> float:
        """Largest absolute violation of a row bound, column bound or integrality by ``x``."""
        x = np.asarray(x, dtype=float)
        if x.shape != (self.num_vars,):
            raise ModelError(f"assignment has shape {x.shape}, expected ({self.num_vars},)")
        act = self.matrix @ x
        parts = [
            np.maximum(self.row_lower - act, 0.0),
            np.maximum(act - self.row_upper, 0.0),
            np.maximum(self.col_lower - x, 0.0),
            np.maximum(x - self.col_upper, 0.0),
            np.abs(x[self.integrality] - np.round(x[self.integrality])),
        ]
        return max((float(p.max()) for p in parts if p.size), default=0.0)

    def with_objective(
        self, objective: ArrayLike | None = None, offset: float = 0.0, sense: Sense | str | None = None
    ) -> LinearModel:
        """Same constraints, another objective (``None``: the zero objective, a feasibility problem)."""
        c = np.zeros(self.num_vars) if objective is None else np.asarray(objective, dtype=float)
        return dataclasses.replace(
            self, objective=_readonly(c.copy()), objective_offset=float(offset), sense=Sense(sense or self.sense)
        )


def _name_in(blocks: Sequence[_Block], k: int, prefix: str) -> str:
    for b in blocks:
        if b.start <= k < b.stop:
            return b.element_name(k - b.start)
    return f"{prefix}{k}"


def _as_shape(shape: int | Sequence[int]) -> tuple[int, ...]:
    shp = (int(shape),) if np.isscalar(shape) else tuple(int(s) for s in shape)
    if any(s < 0 for s in shp):
        raise ModelError(f"negative block shape {shp}")
    return shp


def _bound_array(value: ArrayLike, size: int, label: str) -> np.ndarray:
    """Broadcast a scalar or an array of any shape with ``size`` elements to a flat float64 array."""
    a = np.asarray(value, dtype=np.float64)
    if a.ndim == 0:
        return np.full(size, float(a))
    if a.size != size:
        raise ModelError(f"{label} has {a.size} entries, expected {size}")
    return a.reshape(size)


@dataclass
class ModelBuilder:
    """Array-first assembly of a :class:`LinearModel`.

    Every method takes whole arrays: one call adds a block of variables or a block of rows.
    Duplicate (row, column) entries are summed, as in scipy's COO -> CSR conversion, so a
    block of rows can be described by several overlapping triplet sets.
    """

    name: str = "model"
    _var_blocks: list[VarBlock] = field(default_factory=list)
    _lower: list[np.ndarray] = field(default_factory=list)
    _upper: list[np.ndarray] = field(default_factory=list)
    _kind: list[np.ndarray] = field(default_factory=list)
    _row_blocks: list[RowBlock] = field(default_factory=list)
    _rows: list[np.ndarray] = field(default_factory=list)
    _cols: list[np.ndarray] = field(default_factory=list)
    _vals: list[np.ndarray] = field(default_factory=list)
    _row_lower: list[np.ndarray] = field(default_factory=list)
    _row_upper: list[np.ndarray] = field(default_factory=list)
    _obj_cols: np.ndarray | None = None
    _obj_vals: np.ndarray | None = None
    _obj_const: float = 0.0
    _sense: Sense = Sense.MINIMIZE
    num_vars: int = 0
    num_rows: int = 0

    def add_variables(
        self,
        shape: int | Sequence[int],
        lb: ArrayLike = 0.0,
        ub: ArrayLike = INF,
        kind: VarKind | str = VarKind.CONTINUOUS,
        name: str = "x",
    ) -> VarBlock:
        """Add a block of columns.

        Parameters
        ----------
        shape : int or tuple of int
            Number of columns, or the shape under which the block is indexed.
        lb, ub : scalar or array with ``prod(shape)`` entries
            Bounds; the default is ``[0, +inf)``.
        kind : VarKind or its value
            ``"continuous"``, ``"integer"`` or ``"binary"`` (binary: bounds clipped to [0, 1]).
        name : str
            Block name, used for readable column names ``name[i,j]``.

        Returns
        -------
        VarBlock
            The global column indices of the block (``block.index`` has ``shape``).
        """
        shp = _as_shape(shape)
        kind = VarKind(kind)
        block = VarBlock(name=name, start=self.num_vars, shape=shp, kind=kind)
        size = block.size
        lo, hi = _bound_array(lb, size, "lb"), _bound_array(ub, size, "ub")
        if kind is VarKind.BINARY:
            lo, hi = np.maximum(lo, 0.0), np.minimum(hi, 1.0)
        self._lower.append(lo)
        self._upper.append(hi)
        self._kind.append(np.full(size, kind.code, dtype=np.uint8))
        self._var_blocks.append(block)
        self.num_vars += size
        return block

    def add_constraints(
        self,
        rows: ArrayLike,
        cols: ArrayLike,
        vals: ArrayLike,
        lb: ArrayLike = -INF,
        ub: ArrayLike = INF,
        *,
        count: int | None = None,
        name: str = "c",
    ) -> RowBlock:
        """Add a block of rows ``lb <= A_block @ x <= ub`` from COO triplets.

        Parameters
        ----------
        rows : int array
            Row index of each non-zero, *local* to the block (0 .. count-1).
        cols : int array
            Global column index of each non-zero (e.g. from ``VarBlock.index``).
        vals : float array or scalar
            Coefficients (a scalar is broadcast). Duplicate (row, col) pairs are summed.
        lb, ub : scalar or array of ``count`` entries
            Row bounds; equal bounds make an equality row. Defaults: free.
        count : int, optional
            Number of rows; default: the length of ``lb``/``ub`` if either is an array,
            else ``max(rows) + 1``.
        name : str
            Block name for readable row names.

        Returns
        -------
        RowBlock
        """
        r = np.asarray(rows, dtype=np.int64).ravel()
        c = np.asarray(cols, dtype=np.int64).ravel()
        v = np.asarray(vals, dtype=np.float64)
        v = np.full(r.shape, float(v)) if v.ndim == 0 else v.ravel()
        if not (r.shape == c.shape == v.shape):
            raise ModelError(f"constraint block {name!r}: rows, cols, vals have different lengths")
        if count is None:
            sizes = {np.size(b) for b in (lb, ub) if np.ndim(b) > 0}
            if len(sizes) > 1:
                raise ModelError(f"constraint block {name!r}: lb and ub have different lengths")
            count = sizes.pop() if sizes else (int(r.max()) + 1 if r.size else 0)
        count = int(count)
        if r.size:
            if r.min() < 0 or r.max() >= count:
                raise ModelError(f"constraint block {name!r}: a local row index is outside 0..{count - 1}")
            if c.min() < 0 or c.max() >= self.num_vars:
                raise ModelError(f"constraint block {name!r}: a column index is outside 0..{self.num_vars - 1}")
        block = RowBlock(name=name, start=self.num_rows, shape=(count,))
        self._rows.append(r + self.num_rows if self.num_rows else r)
        self._cols.append(c)
        self._vals.append(v)
        self._row_lower.append(_bound_array(lb, count, "lb"))
        self._row_upper.append(_bound_array(ub, count, "ub"))
        self._row_blocks.append(block)
        self.num_rows += count
        return block

    def set_objective(
        self,
        cols: ArrayLike,
        coefs: ArrayLike,
        sense: Sense | str = Sense.MINIMIZE,
        constant: float = 0.0,
    ) -> None:
        """Set (replace) the objective ``sum coefs * x[cols] + constant``; duplicate columns are summed."""
        c = np.asarray(cols, dtype=np.int64).ravel()
        v = np.asarray(coefs, dtype=np.float64)
        v = np.full(c.shape, float(v)) if v.ndim == 0 else v.ravel()
        if c.shape != v.shape:
            raise ModelError("objective: cols and coefs have different lengths")
        if c.size and (c.min() < 0 or c.max() >= self.num_vars):
            raise ModelError(f"objective: a column index is outside 0..{self.num_vars - 1}")
        self._obj_cols, self._obj_vals = c, v
        self._obj_const = float(constant)
        self._sense = Sense(sense)

    def build(self) -> LinearModel:
        """Freeze the blocks into a :class:`LinearModel` (CSR with int32 indices)."""
        n, m = self.num_vars, self.num_rows
        cat = lambda parts, dt: np.concatenate(parts).astype(dt, copy=False) if parts else np.zeros(0, dt)  # noqa: E731
        rows, cols, vals = cat(self._rows, np.int32), cat(self._cols, np.int32), cat(self._vals, np.float64)
        # scipy's COO -> CSR sums duplicates and sorts each row's indices in compiled code.
        a = sp.csr_array((vals, (rows, cols)), shape=(m, n))
        a.sum_duplicates()
        a.eliminate_zeros()
        a.indices = a.indices.astype(np.int32, copy=False)
        a.indptr = a.indptr.astype(np.int32, copy=False)
        obj = np.zeros(n)
        if self._obj_cols is not None and self._obj_cols.size:
            obj = np.bincount(self._obj_cols, weights=self._obj_vals, minlength=n).astype(np.float64)
        return LinearModel(
            col_lower=_readonly(cat(self._lower, np.float64)),
            col_upper=_readonly(cat(self._upper, np.float64)),
            col_kind=_readonly(cat(self._kind, np.uint8)),
            matrix=a,
            row_lower=_readonly(cat(self._row_lower, np.float64)),
            row_upper=_readonly(cat(self._row_upper, np.float64)),
            objective=_readonly(obj),
            objective_offset=self._obj_const,
            sense=self._sense,
            var_blocks=tuple(self._var_blocks),
            row_blocks=tuple(self._row_blocks),
            name=self.name,
        )
