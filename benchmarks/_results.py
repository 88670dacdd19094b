"""The benchmark scripts' result records: one JSON file per run, written with ``--out``.

A script builds its printed tables from :class:`Table` objects (each row is formatted from the same
values that go into the record), collects them in a :class:`Record`, and calls
:meth:`Record.write` at the end::

    from _results import Record, add_out_argument

    add_out_argument(ap)                       # --out [PATH]
    args = ap.parse_args()
    record = Record(args)
    t = record.table("title line", [("instance", "<20"), ("time_s", ">7.2f"), ("ratio", ">6.1f", "x")])
    print(t.header())
    print(t.add("dlrm", 1.234, 2.0))           # prints 'dlrm                    1.23   2.0x'
    record.write()                             # does nothing unless --out was given

The record (``benchmarks/report.py`` renders it into the docs pages)::

    {"script": stem, "command": "python benchmarks/<stem>.py ...", "commit": short hash [+ "-dirty"],
     "date": ISO 8601 UTC, "machine": {"cores", "platform", "python"}, "parameters": the parsed args,
     "tables": [{"title", "columns", "formats", "rows", "notes"}], "ratios": {name: value}}

``formats`` holds, per column, the ``str.format`` template of the printed cell without its width
(``"{:.3f}"``, ``"{:.1f}x"``; ``"{}"`` for plain values), so the docs show the printed precision.
Values are JSON-safe: NaN and infinities become null, numpy scalars and arrays plain numbers and lists.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import json
import math
import numbers
import os
import platform
import re
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

BENCHMARKS = Path(__file__).resolve().parent
ROOT = BENCHMARKS.parent
RESULTS = BENCHMARKS / "results"
AUTO = "auto"

# [[fill]align][sign][z][#][0][width][grouping][.precision][type]
_SPEC = re.compile(
    r"^(?:(?P<fill>.)?(?P<align>[<>=^]))?(?P<sign>[-+ ]?)(?P<z>z?)(?P<alt>#?)(?P<zero>0?)"
    r"(?P<width>\d*)(?P<grouping>[,_]?)(?P<precision>\.\d+)?(?P<type>[bcdeEfFgGnosxX%]?)$"
)


OUT_HELP = (
    "also write the tables as a JSON record to PATH (no value or 'auto': benchmarks/results/<script>-<YYYY-MM-DD>.json)"
)


def add_out_argument(parser: argparse.ArgumentParser, help: str = OUT_HELP, metavar: str = "PATH") -> None:
    """Add ``--out [PATH]``: write the run's record to PATH; no value or ``auto``: the default path."""
    parser.add_argument("--out", nargs="?", const=AUTO, default=None, metavar=metavar, help=help)


def default_path(script: str, when: _dt.datetime | None = None) -> Path:
    """``benchmarks/results/<script>-<YYYY-MM-DD>.json`` (the UTC date of ``when``, default now)."""
    when = when or _dt.datetime.now(_dt.UTC)
    return RESULTS / f"{script}-{when.astimezone(_dt.UTC):%Y-%m-%d}.json"


def out_path(out: str | None, script: str, when: _dt.datetime | None = None) -> Path | None:
    """Where ``--out`` writes: None when not given, the default path for ``auto``, else the path given."""
    if out is None:
        return None
    return default_path(script, when) if out == AUTO else Path(out)


def json_safe(value: Any) -> Any:
    """``value`` as plain JSON data: NaN/inf -> None, numpy scalars/arrays -> numbers/lists, tuples and
    sets -> lists, dataclasses -> dicts, mapping keys -> str, paths and anything else -> str."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return [json_safe(v) for v in sorted(value, key=repr)]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return json_safe(dataclasses.asdict(value))
    if hasattr(value, "tolist") and callable(value.tolist):  # numpy scalars and arrays
        return json_safe(value.tolist())
    if hasattr(value, "item") and callable(value.item):
        return json_safe(value.item())
    return str(value)


def _missing(value: Any) -> bool:
    """None, or a float (numpy's too) that is NaN or infinite: printed "-", recorded null."""
    if value is None:
        return True
    if isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral):
        return not math.isfinite(float(value))
    return False


@dataclasses.dataclass(frozen=True)
class Column:
    """A table column: its name, the format spec of its printed cell (``">9.3f"``, ``"<20"``) and a
    literal suffix printed after a number (``"x"``, ``"s"``). A missing value (None, NaN) prints "-";
    a string in a numeric column prints as it is; lists, tuples and bools print as ``str``."""

    name: str
    spec: str = ""
    suffix: str = ""

    def __post_init__(self):
        if _SPEC.match(self.spec) is None:
            raise ValueError(f"column {self.name!r}: not a format spec: {self.spec!r}")

    def _part(self, key: str) -> str:
        return _SPEC.match(self.spec)[key] or ""

    @property
    def width(self) -> int:
        """The printed width: the spec's (and the suffix), at least the name's."""
        w = self._part("width")
        return max((int(w) if w else 0) + len(self.suffix), len(self.name) if w else 0)

    @property
    def numeric(self) -> bool:
        return self._part("type") not in ("", "s", "c") or bool(self._part("precision") or self._part("grouping"))

    @property
    def align(self) -> str:
        return {"<": "<", "^": "^"}.get(self._part("align"), ">" if self._part("align") or self.numeric else "<")

    @property
    def template(self) -> str:
        """The ``str.format`` template of a value without width or alignment (what the record keeps)."""
        core = "".join(self._part(k) for k in ("sign", "z", "alt", "grouping", "precision", "type"))
        suffix = self.suffix.replace("{", "{{").replace("}", "}}")
        return ("{:" + core + "}" if core else "{}") + suffix

    def header(self) -> str:
        return format(self.name, f"{self.align}{self.width}")

    def cell(self, value: Any) -> str:
        pad = f"{self.align}{self.width}"
        if _missing(value):
            return format("-", pad)
        if isinstance(value, bool) or not isinstance(value, (str, numbers.Number)):
            value = str(list(value) if isinstance(value, tuple) else value)
        if isinstance(value, str):
            return format(value, pad)
        return format(format(value, self.spec) + self.suffix, pad)


class Table:
    """One printed table and its record: :meth:`add` keeps a row's values and returns its printed line.

    ``columns`` are :class:`Column` objects or ``(name, spec[, suffix])`` tuples; a plain string is
    printed as it is between columns (``"|"``) and is not part of the record. ``sep`` goes between
    every two pieces."""

    def __init__(
        self, title: str, columns: Sequence[Column | tuple | str], *, sep: str = " ", notes: Iterable[str] = ()
    ):
        self.title = title
        self.layout = [c if isinstance(c, (Column, str)) else Column(*c) for c in columns]
        self.columns = [c for c in self.layout if isinstance(c, Column)]
        self.sep = sep
        self.rows: list[list[Any]] = []
        self.notes: list[str] = list(notes)

    def header(self) -> str:
        return self.sep.join(c.header() if isinstance(c, Column) else c for c in self.layout)

    def rule(self) -> str:
        """The header and a line of dashes under it."""
        h = self.header()
        return f"{h}\n{'-' * len(h)}"

    def line(self, values: Sequence[Any]) -> str:
        if len(values) != len(self.columns):
            raise ValueError(f"table {self.title!r}: {len(values)} values for {len(self.columns)} columns")
        it = iter(values)
        return self.sep.join(c.cell(next(it)) if isinstance(c, Column) else c for c in self.layout)

    def add(self, *values: Any) -> str:
        """Keep the row and return its printed line."""
        text = self.line(values)
        self.rows.append(list(values))
        return text

    def note(self, text: str) -> str:
        """Keep a line printed with the table (a summary, a skipped case) and return it."""
        self.notes.append(text)
        return text

    def as_dict(self) -> dict:
        out = {
            "title": self.title,
            "columns": [c.name for c in self.columns],
            "formats": [c.template for c in self.columns],
            "rows": json_safe(self.rows),
        }
        if self.notes:
            out["notes"] = list(self.notes)
        return out


def _git(*args: str) -> str | None:
    try:
        r = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout.strip() if r.returncode == 0 else None


def commit() -> str:
    """``git rev-parse --short HEAD``, ``-dirty`` when a tracked file differs (the result files under
    benchmarks/results/ excepted); ``unknown`` outside a git checkout."""
    head = _git("rev-parse", "--short", "HEAD")
    if not head:
        return "unknown"
    status = _git("status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)benchmarks/results")
    return head + ("-dirty" if status else "")


def command(argv: Sequence[str] | None = None, script: str | None = None) -> str:
    """The command line in ``python benchmarks/<stem>.py ARGS`` form."""
    argv = list(sys.argv if argv is None else argv)
    stem = script or Path(argv[0]).stem
    return shlex.join(["python", f"benchmarks/{stem}.py", *argv[1:]])


def machine() -> dict:
    return {"cores": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()}


def _flat(value: Any) -> bool:
    return not isinstance(value, (dict, list)) or all(
        not isinstance(v, (dict, list)) for v in (value.values() if isinstance(value, dict) else value)
    )


def dumps(value: Any, indent: int = 0, key: str | None = None) -> str:
    """JSON, one key per line, a list of plain values on one line, and each table row on one line."""
    pad, inner = " " * indent, " " * (indent + 1)
    one = lambda v: json.dumps(v, allow_nan=False)  # noqa: E731
    if isinstance(value, dict) and value and not (key == "ratios" or _flat(value) and len(value) <= 3):
        items = [f"{inner}{one(str(k))}: {dumps(v, indent + 1, str(k))}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + f"\n{pad}}}"
    if isinstance(value, list) and value and (key == "rows" or not _flat(value)):
        items = [inner + (one(v) if key == "rows" else dumps(v, indent + 1)) for v in value]
        return "[\n" + ",\n".join(items) + f"\n{pad}]"
    return one(value)


def write_json(path: Path, data: Any) -> Path:
    """Write ``data`` as JSON to ``path`` atomically (a temporary file beside it, then os.replace)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = dumps(json_safe(data)) + "\n"
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


class Record:
    """A run's tables, ratios and metadata; :meth:`write` stores them when ``--out`` was given."""

    def __init__(
        self,
        args: argparse.Namespace | dict | None = None,
        *,
        script: str | None = None,
        argv: Sequence[str] | None = None,
    ):
        argv = list(sys.argv if argv is None else argv)
        self.script = script or Path(argv[0]).stem
        params = dict(vars(args) if isinstance(args, argparse.Namespace) else (args or {}))
        self.out = params.pop("out", None)
        self.parameters = params
        self.command = command(argv, self.script)
        self.date = _dt.datetime.now(_dt.UTC).replace(microsecond=0)
        self.commit = commit()  # the code as the run started
        self.tables: list[Table] = []
        self.ratios: dict[str, Any] = {}

    def table(self, title: str, columns: Sequence[Column | tuple | str], **kw) -> Table:
        t = Table(title, columns, **kw)
        self.tables.append(t)
        return t

    def as_dict(self) -> dict:
        data = {
            "script": self.script,
            "command": self.command,
            "commit": self.commit,
            "date": self.date.isoformat().replace("+00:00", "Z"),
            "machine": machine(),
            "parameters": json_safe(self.parameters),
            "tables": [t.as_dict() for t in self.tables],
        }
        if self.ratios:
            data["ratios"] = json_safe(self.ratios)
        return data

    @property
    def path(self) -> Path | None:
        return out_path(self.out, self.script, self.date)

    def write(self, path: str | Path | None = None) -> Path | None:
        """Write the record to ``path`` (default: where ``--out`` says); None when there is nowhere to write."""
        target = Path(path) if path is not None else self.path
        if target is None:
            return None
        write_json(target, self.as_dict())
        print(f"wrote {target}", file=sys.stderr)
        return target
