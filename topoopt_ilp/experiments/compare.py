"""``compare``: several methods and back-ends on one instance, scored by the same evaluator.

Each row is one solve. The heuristic's (and baselines') distance is measured against the best
proven optimum among the exact rows, or, when none is proven, against the best bound (then it is an
upper limit on the true distance). For a workload without any exact result (the joint model is for
small clusters) distances are measured against the best design any method found.
"""

from __future__ import annotations

import csv
import io as _io
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace

from topoopt_ilp.core.instance import Instance
from topoopt_ilp.errors import InputError, TopoOptError
from topoopt_ilp.evaluation.verify import verify
from topoopt_ilp.files import json_safe
from topoopt_ilp.methods import METHODS, solve
from topoopt_ilp.solvers import get_backend

__all__ = [
    "CompareRow",
    "annotate",
    "check_request",
    "compare",
    "format_rows",
    "rows_table",
    "plan_runs",
    "run_one",
    "run_label",
]

MAXIMIZE = {"throughput"}


@dataclass(frozen=True)
class CompareRow:
    method: str
    backend: str
    status: str
    objective: float | None
    bound: float | None
    gap: float | None
    time_s: float
    verified: bool | None
    distance: float | None = None  # relative distance from the reference (optimum or bound)
    reference: str = ""  # "optimum" | "bound" | "best" (workloads: the best design found) | ""
    message: str = ""

    @classmethod
    def failed(cls, method: str, backend: str, message: str) -> CompareRow:
        """The row of a solve that gave no result (refused, or an error), with the reason."""
        return cls(method, backend, "error", None, None, None, 0.0, None, message=message)


def _distance(value: float | None, ref: float | None, maximize: bool) -> float | None:
    if value is None or ref is None or not math.isfinite(value) or not math.isfinite(ref) or ref == 0:
        return None
    return max(0.0, (ref - value) / abs(ref)) if maximize else max(0.0, (value - ref) / abs(ref))


def check_request(instance: Instance, methods: Sequence[str] | None, backends: Sequence[str]) -> tuple[str, ...]:
    """The methods to run on ``instance`` (the defaults when ``methods`` is None: heuristic and exact,
    plus alternating for a workload), after refusing an unknown method or back-end before any solve."""
    if methods is None:
        methods = ("heuristic", "alternating", "exact") if instance.workload is not None else ("heuristic", "exact")
    if not methods:
        raise InputError(f"no methods given; choose from {', '.join(METHODS)}")
    for m in methods:
        if m not in METHODS:
            raise InputError(f"unknown method {m!r}; choose from {', '.join(METHODS)}")
    if "exact" in methods:
        if not backends:
            raise InputError("no backends given for the exact method")
        for b in backends:
            try:
                get_backend(b)
            except (ValueError, ImportError) as exc:  # unknown or not installed: before any solve starts
                raise InputError(str(exc)) from None
    return tuple(dict.fromkeys(methods))  # a method named twice runs once


def plan_runs(
    instance: Instance,
    methods: Sequence[str] | None = None,
    backends: Sequence[str] = ("highs",),
    time_limit_s: float | None = 60.0,
    seed: int = 0,
    native_options: Mapping[str, Mapping[str, object]] | None = None,
    search_moves: int | None = None,
) -> list[tuple[str, str, dict]]:
    """The solves of a comparison, as (method, backend, options for :func:`~topoopt_ilp.methods.solve`);
    the backend is ``-`` for the methods that use none. ``search_moves`` goes to the solves that have
    the placement's local search: alternating, and exact on a workload with a fixed topology."""
    runs = []
    backends = tuple(dict.fromkeys(backends))  # as methods: a back-end named twice runs once
    for method in check_request(instance, methods, backends):
        for backend in backends if method == "exact" else ("-",):
            if method == "exact":
                options = {"backend": backend, "time_limit_s": time_limit_s, "native_options": native_options}
            elif method == "alternating":
                options = {"seed": seed, "time_limit_s": time_limit_s}
            else:
                options = {"seed": seed}
            placement = method == "alternating" or (
                method == "exact" and instance.workload is not None and instance.fixed_topology is not None
            )
            if search_moves is not None and placement:  # only when given: earlier journals' keys stay valid
                options["search_moves"] = search_moves
            runs.append((method, backend, options))
    return runs


def run_one(instance: Instance, method: str, backend: str, options: Mapping[str, object]) -> CompareRow:
    """One solve of a comparison, verified. A method that refuses the instance or fails (e.g. the
    exact model is too large, alternating has nothing to alternate with a fixed topology) gives a row
    with status ``error`` and the reason: the other methods' rows still count."""
    try:
        sol = solve(instance, method=method, **options)
    except TopoOptError as exc:
        return CompareRow.failed(method, backend, str(exc))
    ok = verify(instance, sol).valid if sol.has_solution else None
    why = (
        str(sol.details.get("infeasible", "")) if sol.status == "infeasible" else ""
    )  # the models say why there: a note
    if sol.has_solution and sol.details.get("rings_restricted"):  # its optimum / bound hold among candidate rings only
        why = str(sol.details["rings_restricted"])
    return CompareRow(
        method, sol.backend or backend, sol.status, sol.objective, sol.bound, sol.gap, sol.wall_time_s, ok, message=why
    )


def annotate(instance: Instance, rows: Sequence[CompareRow]) -> list[CompareRow]:
    """``rows`` with each result's distance from the reference: the best proven optimum among the
    exact rows, else their tightest bound, else (a workload) the best design any method found."""
    maximize = instance.objective in MAXIMIZE
    exact_rows = [r for r in rows if r.method == "exact"]
    optimal = [r.objective for r in exact_rows if r.status == "optimal" and r.objective is not None]
    bounds = [r.bound for r in exact_rows if r.bound is not None and math.isfinite(r.bound)]
    found = [r.objective for r in rows if r.objective is not None and r.status in ("optimal", "feasible")]
    if optimal:
        ref, kind = (max(optimal) if maximize else min(optimal)), "optimum"
    elif bounds:
        ref, kind = (min(bounds) if maximize else max(bounds)), "bound"  # the tightest valid bound
    elif instance.workload is not None and found:
        # No exact reference (e.g. the joint model refused a large workload): the best design found.
        ref, kind = (max(found) if maximize else min(found)), "best"
    else:
        ref, kind = None, ""
    out = []
    for r in rows:
        d = _distance(r.objective, ref, maximize) if r.objective is not None else None
        out.append(replace(r, distance=d, reference=kind if d is not None else ""))
    return out


def run_label(method: str, backend: str) -> str:
    """A solve as progress lines name it: ``heuristic``, ``exact [highs]``."""
    return method + (f" [{backend}]" if backend != "-" else "")


def compare(
    instance: Instance,
    methods: Sequence[str] | None = None,
    backends: Sequence[str] = ("highs",),
    time_limit_s: float | None = 60.0,
    seed: int = 0,
    native_options: Mapping[str, Mapping[str, object]] | None = None,
    search_moves: int | None = None,
    *,
    progress: Callable[[int, int, str], None] | None = None,
    solver_progress: Callable[[dict[str, float | None]], None] | None = None,
) -> list[CompareRow]:
    """Solve ``instance`` with every method (exact: with every backend) and compare the results.
    Default methods: heuristic and exact, plus alternating for a workload. ``native_options``
    (``{backend: {parameter: value}}``) go to the exact solves, each backend reading its own entry;
    ``search_moves`` to the placement's local search (:func:`plan_runs`).

    ``progress(done, total, what)`` is called before each solve (``what``: e.g. ``exact [highs]``)
    and once when all are done (``what`` empty); ``solver_progress`` goes to the exact solves as their
    ``progress`` callback (see :class:`~topoopt_ilp.solvers.SolveOptions`)."""
    runs = plan_runs(instance, methods, backends, time_limit_s, seed, native_options, search_moves)
    rows = []
    for done, (method, backend, options) in enumerate(runs):
        if progress is not None:
            progress(done, len(runs), run_label(method, backend))
        if method == "exact" and solver_progress is not None:
            options = {**options, "progress": solver_progress}
        rows.append(run_one(instance, method, backend, options))
    if progress is not None:
        progress(len(runs), len(runs), "")
    return annotate(instance, rows)


def _fmt(v, pct=False) -> str:
    if v is None:
        return "-"
    if pct:
        return f"{v:.2%}" if math.isfinite(v) else "inf"
    return f"{v:.6g}" if isinstance(v, float) else str(v)


def format_rows(instance: Instance, rows: Sequence[CompareRow], fmt: str = "table") -> str:
    if fmt == "json":
        import json

        # no reference is null, as its distance is (the row keeps "" for it)
        out = [{**asdict(r), "reference": r.reference or None} for r in rows]
        return json.dumps(json_safe({"objective": instance.objective, "rows": out}), indent=1)
    if fmt == "csv":
        buf = (
            _io.StringIO()
        )  # the objective's name in every row, as sweep's CSV has it (the table heads its column with it)
        w = csv.DictWriter(buf, fieldnames=["objective_name"] + [f.name for f in fields(CompareRow)])
        w.writeheader()
        for r in rows:
            w.writerow({"objective_name": instance.objective, **asdict(r)})
        return buf.getvalue()
    if fmt != "table":
        raise InputError(f"unknown format {fmt!r}; choose table, json or csv")
    return rows_table(instance.objective, rows)


def rows_table(objective: str, rows: Sequence[CompareRow]) -> str:
    """The rows as an aligned text table (``objective`` names the objective column), each row's
    message in full under it."""
    head = ["method", "backend", "status", objective, "bound", "gap", "time", "verified", "distance"]
    body = []
    notes: list[str] = []  # a row's message in full, under the table (a table cell would cut it)
    for r in rows:
        dist = (
            "-"
            if r.distance is None
            else (f"{r.distance:.2%}" + {"bound": " (from bound)", "best": " (from best)"}.get(r.reference, ""))
        )
        body.append(
            [
                r.method,
                r.backend,
                r.status + (f" (note {len(notes) + 1})" if r.message else ""),
                _fmt(r.objective),
                _fmt(r.bound),
                _fmt(r.gap, pct=True),
                f"{r.time_s:.2f} s",
                {True: "yes", False: "NO", None: "-"}[r.verified],
                dist,
            ]
        )
        if r.message:
            notes.append(
                f"note {len(notes) + 1}: {r.method}"
                + (f" [{r.backend}]" if r.backend != "-" else "")
                + f": {r.message}"
            )
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body)]
    lines = ["  ".join(str(x).ljust(w) for x, w in zip(line, widths)).rstrip() for line in [head] + body]
    lines.insert(1, "  ".join("-" * w for w in widths))
    if notes:
        lines += [""] + notes
    return "\n".join(lines)
