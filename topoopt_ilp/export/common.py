"""What the exporters share: the options they take and the check that a solution fits its instance."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import Any

from topoopt_ilp.core.instance import Instance
from topoopt_ilp.core.solution import Solution
from topoopt_ilp.errors import InputError, SolutionFileError
from topoopt_ilp.evaluation.verify import verify
from topoopt_ilp.export.assignment import FABRICS
from topoopt_ilp.files.jsonio import write_atomic

__all__ = ["checked_options", "require_design", "write_text"]


def checked_options(options: Mapping[str, Any], *, fabric: bool) -> tuple[str | None, float | None]:
    """``(fabric, time_limit_s)`` from an exporter's keyword options; an option it does not take is refused."""
    known = {"fabric", "time_limit_s"} if fabric else set()
    unknown = sorted(set(options) - known)
    if unknown:
        raise InputError(f"this format takes no option {', '.join(unknown)}")
    chosen = options.get("fabric")
    if chosen is not None and chosen not in FABRICS:
        raise InputError(f"unknown fabric {chosen!r}; choose one of {', '.join(FABRICS)}")
    limit = options.get("time_limit_s")
    if limit is not None and (
        isinstance(limit, bool) or not isinstance(limit, (int, float)) or not math.isfinite(limit) or limit < 0
    ):
        raise InputError(f"time limit must be a finite number >= 0, got {limit!r}")
    return chosen, limit


def require_design(instance: Instance, solution: Solution) -> None:
    """Refuse (exit 2, a :class:`~topoopt_ilp.errors.SolutionFileError` the CLI names the solution
    file in) a solution that holds no design or that the verifier finds wrong for ``instance``."""
    if not isinstance(solution, Solution) or not isinstance(instance, Instance):
        raise InputError("expected an Instance and a Solution")
    if not solution.has_solution:
        raise SolutionFileError(f"the solution holds no design (status {solution.status}): nothing to export")
    report = verify(instance, solution, check_metrics=False)
    if not report.valid:
        extra = f" (and {len(report.violations) - 1} more)" if len(report.violations) > 1 else ""
        raise SolutionFileError(f"the solution does not fit the instance: {report.violations[0]}{extra}")


def write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` to ``path`` atomically (a temporary file renamed into place)."""

    def render(tmp: str) -> None:
        with open(tmp, "w") as fh:
            fh.write(text)

    write_atomic(path, render)
