"""The cabling plan: one CSV row per physical link (docs/guide/export.md).

Columns: ``link`` (0, 1, ...), ``server_a``, ``interface_a``, ``port_a``, ``server_b``,
``interface_b``, ``port_b``, ``role``. Directed links run from a (its TX port) to b (its RX port);
undirected links list a < b. ``port = server * degree + interface`` on the patch panel (or on the
panel's TX and RX sides for directed links). ``role``: ``mp`` (a model-parallel link), ``allreduce``
(a ring link of a design that records its MP links, as the heuristic's do) or ``link``.
"""

from __future__ import annotations

import csv

from topoopt_ilp.core.instance import Instance
from topoopt_ilp.core.solution import Solution
from topoopt_ilp.export.assignment import assign_interfaces
from topoopt_ilp.export.common import checked_options, require_design
from topoopt_ilp.files import check_writable, write_atomic

__all__ = ["CABLING_COLUMNS", "write_cabling"]

CABLING_COLUMNS = ("link", "server_a", "interface_a", "port_a", "server_b", "interface_b", "port_b", "role")


def write_cabling(instance: Instance, solution: Solution, path: str, **options) -> None:
    """Cabling plan (CSV): one row per link, interfaces and patch-panel ports at both ends, its role."""
    fabric, time_limit_s = checked_options(options, fabric=True)
    check_writable(path, "-o")
    require_design(instance, solution)
    plan = assign_interfaces(instance, solution, fabric=fabric, time_limit_s=time_limit_s)

    def render(tmp: str) -> None:
        with open(tmp, "w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh, lineterminator="\n")
            w.writerow(CABLING_COLUMNS)
            for e, ((a, b), (ia, ib), role) in enumerate(zip(plan.ends.tolist(), plan.interfaces.tolist(), plan.roles)):
                w.writerow([e, a, ia, plan.port(a, ia), b, ib, plan.port(b, ib), role])

    write_atomic(path, render)
