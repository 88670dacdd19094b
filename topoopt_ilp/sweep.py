"""``sweep``: the comparison of :mod:`.compare` over many instance files, its solves run in parallel.

Every instance file is read and checked first (a bad file stops the sweep before any solve). Each
(instance, method, backend) solve is then one task: run one after another in this process, or
handed to any :class:`concurrent.futures.Executor` - a process pool (``topoopt sweep --jobs N``) or
a Dask cluster (``--dask ADDRESS``: ``distributed.Client(ADDRESS).get_executor()``), so a sweep
scales out with no code of its own for either. The tasks are independent: the distances of
:func:`~topoopt_ilp.compare.annotate` are computed per instance once all its rows are back.

Results are returned in input order (instance, then the comparison's order of methods and
back-ends), whatever order the tasks finished in, so a sweep's output does not depend on ``--jobs``.
A solve that fails unexpectedly (an internal error, a worker that died) is a row with status
``error`` and the exception: it does not cost the other rows.
"""

from __future__ import annotations

import csv
import glob
import io as _io
import math
import os
from concurrent.futures import Executor, as_completed
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence

from .compare import CompareRow, annotate, rows_table, plan_runs, run_one
from .errors import InputError
from .instance import Instance

__all__ = ["SweepRow", "expand_paths", "format_sweep", "sweep"]


@dataclass(frozen=True)
class SweepRow:
    """One solve of a sweep: the instance file it belongs to and the comparison's row."""

    instance: str
    servers: int
    degree: int
    objective_name: str
    row: CompareRow

    def as_dict(self) -> dict:
        return {"instance": self.instance, "servers": self.servers, "degree": self.degree,
                "objective_name": self.objective_name, **asdict(self.row)}


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
            raise InputError(f"{pat}: no instance files (not a file, nor a directory with .json files, nor a "
                             f"pattern that matches any)")
        for p in found:
            if os.path.realpath(p) not in seen:
                seen.add(os.path.realpath(p))
                out.append(p)
    return out


def sweep(paths: Sequence[str | os.PathLike], methods: Sequence[str] | None = None,
          backends: Sequence[str] = ("highs",), time_limit_s: float | None = 60.0, seed: int = 0,
          native_options: Mapping[str, Mapping[str, object]] | None = None, executor: Executor | None = None,
          progress: Callable[[int, int, str, CompareRow], None] | None = None) -> list[SweepRow]:
    """Compare ``methods`` (default: :func:`~topoopt_ilp.compare.compare`'s) on every instance file
    in ``paths``. Solves run in ``executor`` when given (its workers must have this package
    installed), else here one by one; ``progress(done, total, path, row)`` is called as each ends.
    Raises :class:`InputError` naming the file when an instance file is bad, before any solve."""
    from .io import load_instance

    paths = [os.fspath(p) for p in paths]
    if not paths:
        raise InputError("no instance files given")
    instances: list[Instance] = [load_instance(p) for p in paths]
    tasks = [(k, j, run) for k, inst in enumerate(instances)
             for j, run in enumerate(plan_runs(inst, methods, backends, time_limit_s, seed, native_options))]
    rows: dict[tuple[int, int], CompareRow] = {}

    def done(key: tuple[int, int], row: CompareRow) -> None:
        rows[key] = row
        if progress is not None:
            progress(len(rows), len(tasks), paths[key[0]], row)

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
                row = crashed((k, j), exc)
            done((k, j), row)
    else:
        futures = {executor.submit(run_one, instances[k], *run): (k, j) for k, j, run in tasks}
        try:
            for fut in as_completed(futures):
                try:
                    row = fut.result()
                except Exception as exc:  # noqa: BLE001 - reported in the row
                    row = crashed(futures[fut], exc)
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
        import json

        from .io import json_safe

        return json.dumps(json_safe({"rows": [r.as_dict() for r in rows]}), indent=1)
    if fmt == "csv":
        buf = _io.StringIO()
        fields = list(rows[0].as_dict()) if rows else ["instance"]
        w = csv.DictWriter(buf, fieldnames=fields)
        w.writeheader()
        for r in rows:
            w.writerow({k: ("" if isinstance(v, float) and not math.isfinite(v) else v) for k, v in r.as_dict().items()})
        return buf.getvalue()
    if fmt != "table":
        raise InputError(f"unknown format {fmt!r}; choose table, json or csv")
    blocks: list[str] = []
    for path in dict.fromkeys(r.instance for r in rows):
        mine = [r for r in rows if r.instance == path]
        head = f"{path}: {mine[0].servers} servers x {mine[0].degree}, objective {mine[0].objective_name}"
        blocks.append(head + "\n" + rows_table(mine[0].objective_name, [r.row for r in mine]))
    return "\n\n".join(blocks)
