"""Errors and the CLI exit codes they map to (docs/guide/cli.md)."""

from __future__ import annotations

__all__ = [
    "EXIT_OK",
    "EXIT_ERROR",
    "EXIT_BAD_INPUT",
    "EXIT_INFEASIBLE",
    "EXIT_NO_SOLUTION",
    "EXIT_INTERRUPTED",
    "TopoOptError",
    "InputError",
    "InstanceError",
    "SolutionFileError",
    "UnsupportedError",
    "StartInfeasibleError",
    "NoFeasibleParallelisationError",
]

EXIT_OK = 0  # solved: optimal or feasible
EXIT_ERROR = 1  # anything else (also: a solution that fails verification)
EXIT_BAD_INPUT = 2  # bad input file or usage
EXIT_INFEASIBLE = 3  # proven infeasible
EXIT_NO_SOLUTION = 4  # a limit was reached without a solution
EXIT_INTERRUPTED = 130  # Ctrl-C (SIGINT), as shells report it


class TopoOptError(Exception):
    """Base class of every error this package raises on purpose."""

    exit_code = EXIT_ERROR


class InputError(TopoOptError):
    """Bad input: a file, a field or an option. ``str()`` is the one-line message users see."""

    exit_code = EXIT_BAD_INPUT

    def __init__(self, reason: str, *, source: str | None = None, field: str | None = None) -> None:
        self.source = source
        self.field = field
        self.reason = reason
        parts = [p for p in (source, field) if p]
        super().__init__(": ".join(parts + [reason]))


class InstanceError(InputError):
    """An instance file or object that violates the instance format."""


class SolutionFileError(InputError):
    """A solution file that violates the solution format."""


class UnsupportedError(InputError):
    """A well-formed request that this version cannot carry out (said plainly, never faked)."""


class StartInfeasibleError(TopoOptError):
    """A heuristic's start rule gives no feasible design for a valid instance (e.g. its block
    placement breaks server memory, which another placement might not): the method has no answer,
    the instance may still have one (exit 1)."""


class NoFeasibleParallelisationError(TopoOptError):
    """A training job that no parallelisation fits: the enumeration of every ``tp x pp x dp x ep``
    and micro-batch size proved that none fits the accelerators' memory (exit 3)."""

    exit_code = EXIT_INFEASIBLE
