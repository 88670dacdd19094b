"""Model export to free-format MPS and CPLEX-LP (and reading them back), through highspy.

Export is a property of the model, not of the backend that solves it: every model can be
written whichever backend is used; only the ``highspy`` package is needed.
"""

from __future__ import annotations

import os
from pathlib import Path

from topoopt_ilp.solvers.errors import BackendUnavailableError, ModelError
from topoopt_ilp.solvers.model import LinearModel

__all__ = ["write_model", "FORMATS"]

#: File extension -> format name. HiGHS writes ``.mps`` as free MPS (names are never truncated).
FORMATS = {".mps": "mps", ".lp": "lp"}


def write_model(model: LinearModel, path: str | os.PathLike[str]) -> Path:
    """Write ``model`` to ``path``; the extension (``.mps`` or ``.lp``) chooses the format.

    Columns and rows carry the readable block names (``x[0,3]``, ``cap[2]``), with characters
    the LP format forbids replaced by ``_``. The file is written to a temporary name in the same
    folder, then renamed, so a failed write leaves no partial file.

    Returns
    -------
    pathlib.Path
        The path written.

    Raises
    ------
    ModelError
        For an unknown extension.
    BackendUnavailableError
        When highspy is missing.
    """
    path = Path(path)
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise ModelError(f"{path}: unknown model file extension {path.suffix!r}; use one of {sorted(FORMATS)}")
    try:
        import highspy
    except ImportError:
        raise BackendUnavailableError("writing MPS/LP files needs highspy: pip install highspy") from None
    from topoopt_ilp.solvers.highs import load  # start-up time: highspy loads only when a model is written

    h = load(model)
    for j, name in enumerate(_safe(model.column_names(), "x")):
        h.passColName(j, name)
    for i, name in enumerate(_safe(model.row_names(), "r")):
        h.passRowName(i, name)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}{path.suffix}")
    try:
        if h.writeModel(str(tmp)) == highspy.HighsStatus.kError:
            raise OSError(f"{path}: HiGHS could not write the model")
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


_TRANS = str.maketrans({c: "_" for c in " []:,+-*/<>=^()\"'\\"})


def _safe(names: list[str], prefix: str) -> list[str]:
    """LP-safe, unique names: forbidden characters become ``_``; clashes get the index appended."""
    out, seen = [], set()
    for k, name in enumerate(names):
        s = name.translate(_TRANS).strip("_") or f"{prefix}{k}"
        if s[0].isdigit() or s[0] in ".eE":
            s = f"{prefix}_{s}"  # LP names must not look like numbers or exponents
        if s in seen:
            s = f"{s}_{k}"
        seen.add(s)
        out.append(s)
    return out
