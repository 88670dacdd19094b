"""Field checks shared by every data type and file section: one place decides what an integer, a
number, a choice, a flag or a name is, and how the error says it.

Each ``as_*`` function returns the value in its canonical Python type or raises
:class:`~topoopt_ilp.errors.InstanceError` carrying the field path (``cluster.servers``), so the
caller adds only the file name. Values are never echoed at length: a 400-digit integer is shown as
"an integer of 400 digits".
"""

from __future__ import annotations

import math
import reprlib
from typing import Any

import numpy as np

from topoopt_ilp.errors import InstanceError

__all__ = [
    "MAX_BYTES",
    "MAX_INDEX",
    "type_name",
    "many_digits",
    "brief",
    "brief_names",
    "as_int",
    "as_int_list",
    "as_number",
    "as_matrix",
    "as_choice",
    "as_bool",
    "as_str",
]

#: Largest byte count a file may give: far beyond any real job, and low enough that products of
#: sizes and rates stay finite in float64.
MAX_BYTES = 1e18


#: Largest count or index a file may give where no tighter limit applies (a ring's group, a task's
#: id): every integer the tool reads fits the int64 arrays it builds, with room for sums.
MAX_INDEX = 2**31 - 1

#: How much of an offending value a message echoes.
_BRIEF = reprlib.Repr()
_BRIEF.maxlevel, _BRIEF.maxlist, _BRIEF.maxtuple, _BRIEF.maxdict = 2, 6, 6, 4
_BRIEF.maxstring, _BRIEF.maxother, _BRIEF.maxlong = 40, 40, 30


def type_name(value: Any) -> str:
    return {bool: "a boolean", str: "a string", list: "a list", dict: "an object", type(None): "null"}.get(
        type(value), type(value).__name__
    )


def many_digits(value: int) -> str:
    """A huge integer as a message shows it: its length, not its 400 digits (one readable line)."""
    return f"an integer of {len(str(abs(int(value))))} digits"


def brief(value: Any) -> str:
    """An offending value as a one-line message echoes it: short values whole, a long string, list
    or nesting cut with ``...`` (a 20,000-character name, a list of 2,000 entries, an object nested
    900 deep), a huge integer by its length."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**30:
        return many_digits(value)
    return _BRIEF.repr(value)


def brief_names(names: Any, most: int = 8) -> str:
    """Names a file chose (dimensions, communicators) as a message lists them: each cut short, at
    most ``most`` of them, and how many there are in all when some are left out."""
    names = [str(n) for n in names]
    shown = ", ".join(_BRIEF.repr(n)[1:-1] for n in names[:most])
    return shown + (f", ... ({len(names)} in all)" if len(names) > most else "")


def as_int(value: Any, path: str, *, low: int | None = None, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise InstanceError(f"expected an integer, got {type_name(value)}", field=path)
    value = int(value)
    shown = value if abs(value) < 10**30 else many_digits(value)
    if low is not None and value < low:
        raise InstanceError(f"must be >= {low}, got {shown}", field=path)
    if high is not None and value > high:
        raise InstanceError(f"must be <= {high}, got {shown}", field=path)
    return value


def as_int_list(
    value: Any, path: str, *, low: int, high: int, min_len: int = 0, max_len: int | None = None
) -> list[int]:
    """A JSON list of integers in ``low..high`` (server ids, jumps); the error names the first bad
    entry (``path[k]``). Checked with C-speed ``min``/``max`` first, so a solution file with
    millions of path nodes reads fast, and entry by entry only to name the one that is wrong."""
    if not isinstance(value, list):
        raise InstanceError(f"expected a list of integers, got {type_name(value)}", field=path)
    if len(value) < min_len:
        raise InstanceError(f"needs at least {min_len} entries, got {len(value)}", field=path)
    if max_len is not None and len(value) > max_len:
        raise InstanceError(f"has {len(value)} entries, at most {max_len} are allowed", field=path)
    if not all(type(v) is int for v in value) or (value and (min(value) < low or max(value) > high)):
        for k, v in enumerate(value):
            as_int(v, f"{path}[{k}]", low=low, high=high)
    return value


def as_number(
    value: Any, path: str, *, positive: bool = False, nonnegative: bool = False, high: float | None = None
) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise InstanceError(f"expected a number, got {type_name(value)}", field=path)
    try:
        value = float(value)
    except OverflowError:  # a JSON integer literal beyond the float range (1 followed by 400 zeros)
        raise InstanceError(f"must be a finite number, got {many_digits(value)}", field=path) from None
    if not math.isfinite(value):
        raise InstanceError(f"must be a finite number, got {value}", field=path)
    if positive and value <= 0:
        raise InstanceError(f"must be > 0, got {value:g}", field=path)
    if nonnegative and value < 0:
        raise InstanceError(f"must be >= 0, got {value:g}", field=path)
    if high is not None and value > high:
        raise InstanceError(f"must be at most {high:g}, got {value:g}", field=path)
    return value


def as_matrix(
    value: Any, path: str, *, rows: int | None = None, columns: int | None = None, high: float = MAX_BYTES
) -> tuple[tuple[float, ...], ...]:
    """A rectangular list of lists of numbers in ``[0, high]`` (``rows`` and ``columns`` when given),
    as a tuple of tuples of floats; an error names the row (``path[1]``) or the entry (``path[1][2]``)."""
    if not isinstance(value, (list, tuple)) or not value:
        raise InstanceError(f"expected a non-empty list of rows, got {type_name(value)}", field=path)
    if rows is not None and len(value) != rows:
        raise InstanceError(f"has {len(value)} rows, expected {rows}", field=path)
    width = columns
    out = []
    for i, row in enumerate(value):
        if not isinstance(row, (list, tuple)):
            raise InstanceError(f"expected a list of numbers, got {type_name(row)}", field=f"{path}[{i}]")
        if width is None:
            width = len(row)
        if len(row) != width or not row:
            raise InstanceError(f"has {len(row)} entries, expected {width or 'at least 1'}", field=f"{path}[{i}]")
        out.append(tuple(as_number(v, f"{path}[{i}][{j}]", nonnegative=True, high=high) for j, v in enumerate(row)))
    return tuple(out)


def as_choice(value: Any, path: str, choices: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in choices:
        shown = brief(value) if isinstance(value, str) else type_name(value)
        raise InstanceError(f"must be one of {', '.join(choices)}; got {shown}", field=path)
    return value


def as_bool(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise InstanceError(f"expected true or false, got {type_name(value)}", field=path)
    return value


def as_str(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise InstanceError(f"expected a string, got {type_name(value)}", field=path)
    return value
