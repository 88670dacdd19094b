"""Strict JSON in, atomic JSON out: what every file format of the toolkit shares.

Reading is strict: NaN/Infinity literals, keys given twice, files that are not UTF-8 and files
larger than a limit are refused with one :class:`~topoopt_ilp.errors.InputError` naming the file;
:func:`json_object` and :func:`json_list` check a section's shape and name its field path.
Writing goes through a temporary file and ``os.replace``, so a failed write never leaves a
partial file, and :func:`check_writable` refuses a bad output path before any work is done.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from topoopt_ilp.core.checks import brief, type_name
from topoopt_ilp.errors import InputError, InstanceError

__all__ = [
    "MAX_FILE_BYTES",
    "FILE_KINDS",
    "read_json",
    "read_text",
    "json_object",
    "json_list",
    "check_format",
    "with_source",
    "json_safe",
    "check_writable",
    "write_atomic",
    "write_json_atomic",
    "dumps",
]

# A dense 8192 x 8192 demand matrix alone would be ~1 GB of JSON; files this large are refused
# before parsing so that a hostile file costs a second, not the machine.
MAX_FILE_BYTES = 64 * 1024 * 1024
#: The toolkit's file kinds by their ``format`` value, so that a file of the wrong kind is named as such.
FILE_KINDS = {"topoopt-instance": "an instance file", "topoopt-solution": "a solution file"}


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def read_text(path: str | os.PathLike, error: type[InputError], limit: int | None = None) -> str:
    """The UTF-8 text in ``path``; ``limit``: largest file accepted (default :data:`MAX_FILE_BYTES`).
    A file too large, unreadable or not UTF-8 raises ``error`` naming the file."""
    source = str(path)
    limit = MAX_FILE_BYTES if limit is None else limit
    try:
        size = os.path.getsize(path)
    except OSError as exc:
        raise error(f"cannot read file: {exc.strerror or exc}", source=source) from None
    if size > limit:
        raise error(f"file is {size / 2**20:.0f} MiB, larger than the {limit // 2**20} MiB limit", source=source)
    try:
        with open(path, "rb") as fh:
            text = fh.read().decode("utf-8")
    except UnicodeDecodeError:
        raise error("file is not UTF-8 text", source=source) from None
    except OSError as exc:
        raise error(f"cannot read file: {exc.strerror or exc}", source=source) from None
    return text


def read_json(path: str | os.PathLike, error: type[InputError], limit: int | None = None) -> Any:
    """The JSON value in ``path``; ``limit``: largest file accepted (default :data:`MAX_FILE_BYTES`)."""
    source = str(path)
    text = read_text(path, error, limit)
    try:
        return json.loads(text, parse_constant=_reject_constant, object_pairs_hook=_no_duplicate_keys)
    except json.JSONDecodeError as exc:
        raise error(f"malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}", source=source) from None
    except (ValueError, RecursionError) as exc:
        raise error(f"malformed JSON: {exc}", source=source) from None


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict:
    """A JSON object as a dict, refusing a key given twice (json would keep the last one silently)."""
    out: dict = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"key {brief(key)} appears twice in one object")
        out[key] = value
    return out


def json_object(value: Any, path: str, allowed: set[str], required: set[str] = frozenset(), err=InstanceError) -> dict:
    """``value`` as a JSON object with keys from ``allowed`` and every key of ``required``, or ``err``
    with the field ``path`` (the first unknown or missing key is named)."""
    if not isinstance(value, dict):
        raise err(f"expected an object, got {type_name(value)}", field=path or None)
    unknown = sorted(set(value) - allowed, key=str)
    if unknown:
        raise err(f"unknown key {brief(unknown[0])} (allowed: {', '.join(sorted(allowed))})", field=path or None)
    missing = sorted(required - set(value))
    if missing:
        raise err(f"missing required key {brief(missing[0])}", field=path or None)
    return value


def json_list(value: Any, path: str, err=InstanceError, max_len: int | None = None) -> list:
    """``value`` as a JSON list of at most ``max_len`` entries, or ``err`` with the field ``path``."""
    if not isinstance(value, list):
        raise err(f"expected a list, got {type_name(value)}", field=path)
    if max_len is not None and len(value) > max_len:
        raise err(f"has {len(value)} entries, more than the {max_len} allowed", field=path)
    return value


def check_format(data: Any, expected: str, err: type[InputError]) -> None:
    """Name a file of the wrong kind before complaining about its keys."""
    if isinstance(data, dict) and "format" in data and data["format"] != expected:
        other = FILE_KINDS.get(data["format"]) if isinstance(data["format"], str) else None
        raise err(
            f"expected {expected!r}, got {brief(data['format'])}" + (f" (this is {other})" if other else ""),
            field="format",
        )


def with_source(fn: Callable[[], Any], source: str | None, error: type[InputError]) -> Any:
    """``fn()``, with the file name ``source`` added to an :class:`InputError` that has none."""
    try:
        return fn()
    except InputError as exc:
        if source and not exc.source:
            raise error(exc.reason, source=source, field=exc.field) from None
        raise


def json_safe(v: Any) -> Any:
    """JSON has no infinity or NaN: a non-finite number (a disconnected topology's time) becomes null."""
    if isinstance(v, (np.generic, np.ndarray)):
        v = v.tolist()  # numpy scalars and arrays as plain Python numbers and lists
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, Mapping):  # dicts, and a Solution's read-only mappings
        return {k: json_safe(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [json_safe(x) for x in v]
    return v


def _output_problem(path: str | os.PathLike) -> str | None:
    """Why ``path`` cannot be an output file (its directory missing, it being a directory), or None."""
    text = os.fspath(path)
    if not str(text).strip():
        return "the file name is empty"
    target = Path(text)
    if target.is_dir():
        return "is a directory"
    if text.endswith(tuple(sep for sep in (os.sep, os.altsep) if sep)):
        # Path() drops a trailing separator: "out.json/" would write (or replace) "out.json"
        return (
            f"the name ends in {text[-1]}, so it names a directory, and {target} is a file"
            if target.exists()
            else f"directory {target} does not exist"
        )
    directory = target.parent
    if not directory.exists():
        return f"directory {directory} does not exist"
    if not directory.is_dir():
        return f"{directory} is not a directory"
    return None


def check_writable(
    path: str | os.PathLike,
    option: str = "--out",
    inputs: Mapping[str, str | os.PathLike | Sequence[str | os.PathLike] | None] | None = None,
    what: str = "the output",
) -> None:
    """Raise :class:`InputError` (exit 2) when ``path`` cannot be written, or is one of the
    command's ``inputs`` (role -> path or paths, e.g. ``{"instance": ...}``; ``what`` would overwrite it):
    called before a long computation, so that a typo in an output path costs nothing. Probes the
    directory with a temporary file (permission bits alone do not tell, e.g. for root or on /proc)."""
    text = os.fspath(path)
    if not str(text).strip():
        raise InputError(f"{option} needs a file name, got {brief(text)}")
    for role, given in (inputs or {}).items():
        for one in [] if given is None else [given] if isinstance(given, (str, os.PathLike)) else given:
            if os.path.exists(text) and os.path.exists(one) and os.path.samefile(text, one):
                name = text if os.fspath(one) == text else f"{text} ({one})"
                raise InputError(f"{option} {name} is the {role} file itself: {what} would overwrite it")
    problem = _output_problem(path)
    if problem:
        raise InputError(f"cannot write {text}: {problem}")
    target = Path(text)
    if _is_special(text):  # written into, not replaced (write_atomic): its own permission decides
        if not os.access(text, os.W_OK):
            raise InputError(f"cannot write {text}: permission denied")
        return
    try:
        fd, probe = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".probe", dir=target.parent)
    except OSError as exc:
        raise InputError(
            f"cannot write {text}: directory {target.parent} is not writable ({exc.strerror or exc})"
        ) from None
    os.close(fd)
    os.unlink(probe)


def _is_special(path: str | os.PathLike) -> bool:
    """Does ``path`` (through links) exist as something other than a regular file or a directory: a
    device such as /dev/null, a FIFO, a socket?"""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def write_atomic(path: str | os.PathLike, render: Callable[[str], None]) -> None:
    """Let ``render`` write a temporary file beside ``path`` (same extension, so matplotlib picks the
    format) and rename it into place: a failed or interrupted run never leaves a partial file. A
    symbolic link is written through (its target replaced, the link kept); a device or FIFO (e.g.
    /dev/null) is written into once the whole output is rendered, never replaced by a file."""
    problem = _output_problem(path)
    if problem:
        raise InputError(f"cannot write {os.fspath(path)}: {problem}")
    if _is_special(path):
        with tempfile.TemporaryDirectory() as scratch:
            tmp = os.path.join(scratch, "output" + Path(path).suffix)
            render(tmp)
            with open(tmp, "rb") as src, open(path, "wb") as dst:
                shutil.copyfileobj(src, dst)
        return
    target = Path(os.path.realpath(path)) if os.path.islink(path) else Path(path)
    directory = target.parent if str(target.parent) else Path(".")
    try:
        # the suffix as given (a link's target may have another): matplotlib picks the format by it
        fd, tmp = tempfile.mkstemp(
            prefix=f".{target.name}.", suffix=Path(path).suffix or target.suffix or ".tmp", dir=directory
        )
    except OSError as exc:
        raise InputError(
            f"cannot write {os.fspath(path)}: directory {directory} is not writable ({exc.strerror or exc})"
        ) from None
    os.close(fd)
    try:
        render(tmp)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; the result is an ordinary file
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_json_atomic(path: str | os.PathLike, data: Any) -> None:
    """Write JSON atomically (see :func:`write_atomic`), laid out by :func:`dumps`."""

    def dump(tmp: str) -> None:
        with open(tmp, "w") as fh:
            fh.write(dumps(data))

    write_atomic(path, dump)


#: Encodes one line of a file: the C encoder (it is used only when there is no indent).
_LINE = json.JSONEncoder(allow_nan=False, separators=(", ", ": "))


def dumps(data: Any) -> str:
    """JSON as the tool writes its files: objects one key per line, a list of numbers or strings on one
    line, and a list of lists one item per line (a link ``[i, j, count]``, a path ``[fraction,
    [nodes]]``). A solution with a million paths is then a million short lines, encoded by the C
    encoder, where one number per line made it three times larger and ten times slower to write."""
    parts: list[str] = []
    _lay_out(data, "", parts)
    parts.append("\n")
    return "".join(parts)


def _flat(value: Any) -> bool:
    return not isinstance(value, (dict, list, tuple))


def _lay_out(value: Any, indent: str, parts: list[str]) -> None:
    inner = indent + " "
    if isinstance(value, Mapping) and value:
        parts.append("{")
        for k, (key, item) in enumerate(value.items()):
            parts.append(f"{',' if k else ''}\n{inner}{_LINE.encode(key)}: ")
            _lay_out(item, inner, parts)
        parts.append(f"\n{indent}}}")
    elif isinstance(value, (list, tuple)) and not all(map(_flat, value)):
        parts.append("[")
        for k, item in enumerate(value):
            parts.append(f"{',' if k else ''}\n{inner}")
            if isinstance(item, (list, tuple)) and all(
                _flat(x) or (isinstance(x, list) and all(map(_flat, x))) for x in item
            ):
                parts.append(_LINE.encode(item))
            else:
                _lay_out(item, inner, parts)
        parts.append(f"\n{indent}]")
    else:
        parts.append(_LINE.encode(value))
