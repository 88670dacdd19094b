"""Exporters: a design as the files that build it (docs/guide/export.md).

Every exporter has the signature ``(instance, solution, path, **options) -> None``, refuses a
solution that does not fit its instance or a design its format cannot express (an
:class:`~topoopt_ilp.errors.InputError`, exit 2, no file) and writes atomically. :data:`EXPORTERS`
maps a format name to its exporter: a new format is one line there.
"""

from __future__ import annotations

from collections.abc import Callable

from topoopt_ilp.core.instance import Instance
from topoopt_ilp.core.solution import Solution
from topoopt_ilp.errors import InputError
from topoopt_ilp.export.assignment import FABRICS, Assignment, assign_interfaces
from topoopt_ilp.export.cabling import CABLING_COLUMNS, write_cabling
from topoopt_ilp.export.graph_formats import GRAPH_FORMATS
from topoopt_ilp.export.msccl import msccl_rings, msccl_xml, write_msccl
from topoopt_ilp.export.ns3 import ns3_lines, write_ns3
from topoopt_ilp.export.ocs import OCS_FORMAT, OCS_VERSION, ocs_config, write_ocs_config
from topoopt_ilp.export.simai import GPU_TYPES, simai_lines, write_simai

__all__ = [
    "EXPORTERS",
    "GRAPH_FORMATS",
    "FABRICS",
    "Assignment",
    "assign_interfaces",
    "export",
    "formats",
    "write_cabling",
    "write_ocs_config",
    "write_msccl",
    "msccl_rings",
    "msccl_xml",
    "write_ns3",
    "ns3_lines",
    "write_simai",
    "simai_lines",
    "GPU_TYPES",
    "ocs_config",
    "CABLING_COLUMNS",
    "OCS_FORMAT",
    "OCS_VERSION",
]

Exporter = Callable[..., None]

#: Format name -> exporter ``(instance, solution, path, **options) -> None``.
EXPORTERS: dict[str, Exporter] = {
    "cabling": write_cabling,
    "ocs": write_ocs_config,
    "msccl": write_msccl,
    "ns3": write_ns3,
    "simai": write_simai,
    **GRAPH_FORMATS,
}


def formats() -> dict[str, str]:
    """Each format with the first line of its exporter's docstring (``topoopt export --list``)."""
    return {name: (fn.__doc__ or "").strip().split("\n")[0] for name, fn in EXPORTERS.items()}


def export(instance: Instance, solution: Solution, path: str, format: str, **options) -> None:
    """Write ``solution`` as ``format`` (a key of :data:`EXPORTERS`) to ``path``."""
    if format not in EXPORTERS:
        raise InputError(f"unknown export format {format!r}; choose one of {', '.join(EXPORTERS)}")
    EXPORTERS[format](instance, solution, path, **options)
