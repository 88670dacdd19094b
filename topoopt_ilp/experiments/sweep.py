"""``sweep``: the comparison of :mod:`.compare` over many instance files, its solves run in parallel.

Every instance file is read and checked first (a bad file stops the sweep before any solve). Each
(instance, method, backend) solve is then one task: run one after another in this process, or
handed to any :class:`concurrent.futures.Executor` - a process pool (``topoopt sweep --jobs N``) or
a Dask cluster (``--dask ADDRESS``: ``distributed.Client(ADDRESS).get_executor()``), so a sweep
scales out with no code of its own for either. The tasks are independent: the distances of
:func:`~topoopt_ilp.experiments.compare.annotate` are computed per instance once all its rows are back.

Results are returned in input order (instance, then the comparison's order of methods and
back-ends), whatever order the tasks finished in, so a sweep's output does not depend on ``--jobs``.
A solve that fails unexpectedly (an internal error, a worker that died) is a row with status
``error`` and the exception: it does not cost the other rows.

A long sweep can keep a **journal** (``--journal FILE``): each solve's row is appended to it, one
JSON line, as soon as the solve ends, keyed by the instance file's content (SHA-256), the method,
the back-end and the solve's options. A sweep given the same journal again reuses every row whose
key is there instead of solving it, so an interrupted sweep resumes where it stopped, and an
instance file that was edited since is solved again. Rows of solves that failed unexpectedly are
not journalled (they are retried).
"""

from __future__ import annotations

import csv
import glob
import hashlib
import io as _io
import json
import math
import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor, as_completed
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from topoopt_ilp.core.instance import Instance
from topoopt_ilp.errors import InputError
from topoopt_ilp.experiments.compare import CompareRow, annotate, plan_runs, rows_table, run_one
from topoopt_ilp.files import json_safe, load_instance

__all__ = ["SweepRow", "expand_paths", "format_sweep", "read_journal", "sweep"]


@dataclass(frozen=True)
class SweepRow:
    """One solve of a sweep: the instance file it belongs to and the comparison's row."""

    instance: str
    servers: int
    degree: int
    objective_name: str
    row: CompareRow

    def as_dict(self) -> dict:
        return {
            "instance": self.instance,
            "servers": self.servers,
            "degree": self.degree,
            "objective_name": self.objective_name,
            **asdict(self.row),
        }


def expand_paths(patterns: Sequence[str]) -> list[str]:
    """Instance files named by ``patterns``: a file, a directory (its ``*.json``) or a glob pattern
    (``**`` recurses). Sorted within each pattern; a file named twice (by any spelling of its path)
    is kept once, where first named; a pattern that names nothing is an :class:`InputError`."""
    out: list[str] = []
    seen: set[str] = set()  # real paths: ./a.json, a.json and /abs/a.json are one file
    for pat in patterns:
        if os.path.isdir(pat):
            found = sorted(str(p) for p in Path(pat).glob("*.json"))
        elif os.path.exists(pat):
            found = [pat]
        else:
            found = sorted(p for p in glob.glob(pat, recursive=True) if os.path.isfile(p))
        if not found:
            raise InputError(
                f"{pat}: no instance files (not a file, nor a directory with .json files, nor a "
                f"pattern that matches any)"
            )
        for p in found:
            if os.path.realpath(p) not in seen:
                seen.add(os.path.realpath(p))
                out.append(p)
    return out


def _journal_key(content_sha256: str, method: str, backend: str, options: Mapping[str, object]) -> str:
    """What makes two solves the same: the instance file's bytes, the method, back-end and options."""
    text = json.dumps([content_sha256, method, backend, dict(options)], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _check_row(row: CompareRow) -> None:
    """A journalled row has the types a solve gives (else ValueError): the file is not trusted."""
    number = (int, float)
    ok = (
        isinstance(row.method, str)
        and isinstance(row.backend, str)
        and isinstance(row.status, str)
        and all(
            v is None or (isinstance(v, number) and not isinstance(v, bool))
            for v in (row.objective, row.bound, row.gap)
        )
        and isinstance(row.time_s, number)
        and (row.verified is None or isinstance(row.verified, bool))
        and isinstance(row.message, str)
    )
    if not ok:
        raise ValueError("a field of the wrong type")


def read_journal(path: str | os.PathLike) -> dict[str, CompareRow]:
    """The rows of a sweep journal by key (empty when the file does not exist). A last line cut
    short (the sweep was killed while writing it) is ignored; any other bad line is an
    :class:`InputError` naming it, since the file is then not a journal this sweep wrote."""
    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().split("\n")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"--journal {os.fspath(path)}: cannot read it ({exc})") from None
    names = {f.name for f in fields(CompareRow)}
    out: dict[str, CompareRow] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
            row = CompareRow(**{k: v for k, v in entry["row"].items() if k in names})
            _check_row(row)
            out[str(entry["key"])] = row
        except (ValueError, KeyError, TypeError, AttributeError):
            if number == len(lines):  # the unterminated last line of a killed sweep
                continue
            raise InputError(f"--journal {os.fspath(path)}: line {number} is not a sweep journal entry") from None
    return out


def _end_with_newline(path: str | os.PathLike) -> None:
    """Drop the unterminated last line a killed sweep may have left (:func:`read_journal` ignores
    it), so that the rows appended next start on a line of their own."""
    try:
        with open(path, "rb+") as fh:
            data = fh.read()
            if data and not data.endswith(b"\n"):
                fh.truncate(data.rfind(b"\n") + 1)
    except FileNotFoundError:
        pass


def sweep(
    paths: Sequence[str | os.PathLike],
    methods: Sequence[str] | None = None,
    backends: Sequence[str] = ("highs",),
    time_limit_s: float | None = 60.0,
    seed: int = 0,
    native_options: Mapping[str, Mapping[str, object]] | None = None,
    executor: Executor | None = None,
    progress: Callable[[int, int, str, CompareRow], None] | None = None,
    journal: str | os.PathLike | None = None,
    search_moves: int | None = None,
) -> list[SweepRow]:
    """Compare ``methods`` (default: :func:`~topoopt_ilp.experiments.compare.compare`'s) on every instance file
    in ``paths``. Solves run in ``executor`` when given (its workers must have this package
    installed), else here one by one; ``progress(done, total, path, row)`` is called as each ends.
    With ``journal`` (a file path) rows found in it are reused and every new row is appended to it
    (module docstring). ``search_moves``: the placement's local search budgeted in moves
    (:func:`~topoopt_ilp.experiments.compare.plan_runs`), so that a row does not depend on which worker ran it.
    Raises :class:`InputError` naming the file when an instance file is bad, before any solve."""
    paths = [os.fspath(p) for p in paths]
    if not paths:
        raise InputError("no instance files given")
    instances: list[Instance] = [load_instance(p) for p in paths]
    tasks = [
        (k, j, run)
        for k, inst in enumerate(instances)
        for j, run in enumerate(plan_runs(inst, methods, backends, time_limit_s, seed, native_options, search_moves))
    ]
    rows: dict[tuple[int, int], CompareRow] = {}
    keys: dict[tuple[int, int], str] = {}
    journalled: dict[str, CompareRow] = {}
    if journal is not None:
        journalled = read_journal(journal)
        _end_with_newline(journal)
        digests = [hashlib.sha256(Path(p).read_bytes()).hexdigest() for p in paths]
        keys = {(k, j): _journal_key(digests[k], *run) for k, j, run in tasks}

    total = len(tasks)

    def done(key: tuple[int, int], row: CompareRow, record: bool = True) -> None:
        rows[key] = row
        if journal is not None and record:
            with open(journal, "a", encoding="utf-8") as fh:  # one line per row, on disk as it ends
                fh.write(json.dumps({"key": keys[key], "instance": paths[key[0]], "row": asdict(row)}) + "\n")
                fh.flush()
                os.fsync(fh.fileno())
        if progress is not None:
            progress(len(rows), total, paths[key[0]], row)

    for k, j, _ in tasks:  # reused silently: progress counts on from them
        if journal is not None and keys[(k, j)] in journalled:
            rows[(k, j)] = journalled[keys[(k, j)]]
    tasks = [(k, j, run) for k, j, run in tasks if (k, j) not in rows]
    tasks_by_key = {(k, j): run for k, j, run in tasks}

    def crashed(key: tuple[int, int], exc: Exception) -> CompareRow:
        # One solve's internal error must not cost the rest of a long sweep: it becomes its row.
        method, backend, _ = tasks_by_key[key]
        return CompareRow.failed(method, backend, f"internal error: {type(exc).__name__}: {exc}")

    if executor is None:
        for k, j, run in tasks:
            try:
                row = run_one(instances[k], *run)
            except Exception as exc:  # noqa: BLE001 - reported in the row
                done((k, j), crashed((k, j), exc), record=False)
                continue
            done((k, j), row)
    else:
        futures = {executor.submit(run_one, instances[k], *run): (k, j) for k, j, run in tasks}
        try:
            for fut in as_completed(futures):
                try:
                    row = fut.result()
                except Exception as exc:  # noqa: BLE001 - reported in the row
                    done(futures[fut], crashed(futures[fut], exc), record=False)
                    continue
                done(futures[fut], row)
        except BaseException:
            for fut in futures:
                fut.cancel()
            raise
    out = []
    for k, inst in enumerate(instances):
        mine = annotate(inst, [rows[key] for key in sorted(key for key in rows if key[0] == k)])
        out += [SweepRow(paths[k], inst.n, inst.cluster.degree, inst.objective, r) for r in mine]
    return out


def format_sweep(rows: Sequence[SweepRow], fmt: str = "table") -> str:
    """``table`` (one block per instance, as ``topoopt compare`` prints it), ``csv`` or ``json``."""
    if fmt == "json":
        return json.dumps(json_safe({"rows": [r.as_dict() for r in rows]}), indent=1)
    if fmt == "csv":
        buf = _io.StringIO()
        fields = list(rows[0].as_dict()) if rows else ["instance"]
        w = csv.DictWriter(buf, fieldnames=fields)
        w.writeheader()
        for r in rows:
            w.writerow(
                {k: ("" if isinstance(v, float) and not math.isfinite(v) else v) for k, v in r.as_dict().items()}
            )
        return buf.getvalue()
    if fmt != "table":
        raise InputError(f"unknown format {fmt!r}; choose table, json or csv")
    blocks: list[str] = []
    for path in dict.fromkeys(r.instance for r in rows):
        mine = [r for r in rows if r.instance == path]
        head = f"{path}: {mine[0].servers} servers x {mine[0].degree}, objective {mine[0].objective_name}"
        blocks.append(head + "\n" + rows_table(mine[0].objective_name, [r.row for r in mine]))
    return "\n\n".join(blocks)
