"""Errors raised by the solver layer.

They derive from the package-wide error classes in :mod:`topoopt_ilp.errors` (a leaf module with no
domain content), so the CLI maps them to exit codes like every other deliberate error:
a request a backend cannot honour is a usage error (exit 2), a missing package is exit 1.
"""

from __future__ import annotations

from topoopt_ilp.errors import TopoOptError, UnsupportedError

__all__ = [
    "SolverError",
    "UnknownBackendError",
    "BackendCapabilityError",
    "BackendUnavailableError",
    "ModelError",
    "NativeOptionError",
]


class SolverError(TopoOptError):
    """Base class of the errors of :mod:`topoopt_ilp.solvers`."""


class UnknownBackendError(SolverError, ValueError):
    """A backend name that is not in the registry; the message lists the known names."""


class BackendCapabilityError(UnsupportedError, SolverError):
    """A backend was asked for something it cannot honour (never silently ignored)."""

    def __init__(self, reason: str, *, backend: str | None = None) -> None:
        super().__init__(reason, source=f"backend {backend!r}" if backend else None)
        self.backend = backend


class BackendUnavailableError(SolverError, ImportError):
    """The Python package a backend needs is not installed; the message says what to install."""


class NativeOptionError(SolverError, ValueError):
    """A native solver parameter is malformed, or the solver rejected it."""


class ModelError(SolverError, ValueError):
    """A model that is malformed: bad shapes, bounds, indices or kinds."""
