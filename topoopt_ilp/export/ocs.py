"""OCS configurations: the cross-connects of one optical circuit switch per interface index
(docs/guide/export.md).

Switch k joins interface k of every server; its port i is interface k of server i. The file::

    {"format": "topoopt-ocs-config", "version": 1, "servers": n, "degree": d,
     "links": "undirected" | "directed",
     "switches": [{"switch": k, "connections": [[a, b], ...]}, ...]}

Undirected links: each connection ``[a, b]`` (a < b) joins ports a and b both ways, and the
connections of a switch are a matching. Directed links: ``[a, b]`` sends port a's input (the TX of
server a) to port b's output (the RX of server b), and the connections are a permutation.
"""

from __future__ import annotations

from topoopt_ilp.core.instance import Instance
from topoopt_ilp.core.solution import Solution
from topoopt_ilp.errors import InputError
from topoopt_ilp.export.assignment import assign_interfaces
from topoopt_ilp.export.common import checked_options, require_design
from topoopt_ilp.files import check_writable, write_json_atomic

__all__ = ["OCS_FORMAT", "OCS_VERSION", "ocs_config", "write_ocs_config"]

OCS_FORMAT = "topoopt-ocs-config"
OCS_VERSION = 1


def ocs_config(instance: Instance, solution: Solution, *, time_limit_s: float | None = None) -> dict:
    """The configuration as the file holds it (see the module's docstring)."""
    plan = assign_interfaces(instance, solution, fabric="ocs", time_limit_s=time_limit_s)
    switches: list[list[list[int]]] = [[] for _ in range(instance.d)]
    for (a, b), (k, _) in zip(plan.ends.tolist(), plan.interfaces.tolist()):
        switches[k].append([a, b])
    return {
        "format": OCS_FORMAT,
        "version": OCS_VERSION,
        "servers": instance.n,
        "degree": instance.d,
        "links": instance.cluster.links,
        "switches": [{"switch": k, "connections": sorted(c)} for k, c in enumerate(switches)],
    }


def write_ocs_config(instance: Instance, solution: Solution, path: str, **options) -> None:
    """OCS configurations (JSON): per interface index k, the port-to-port cross-connects of switch k."""
    fabric, time_limit_s = checked_options(options, fabric=True)
    if fabric not in (None, "ocs"):
        raise InputError(f"the ocs format configures one OCS per interface index; --fabric {fabric} has none")
    check_writable(path, "-o")
    require_design(instance, solution)
    write_json_atomic(path, ocs_config(instance, solution, time_limit_s=time_limit_s))
