"""The interface assignment of ``topoopt export`` at cluster sizes, beside the heuristic that made the design.

For each n (degree 8) one instance: an AllReduce over all servers plus sparse model-parallel pairs
(each server sends to 2 random others), so that TopoOpt's heuristic builds rings and MP links (not a
circulant). Timed, each the best of ``--repeat``: the heuristic design (``solve(method="heuristic")``),
then ``assign_interfaces`` for a patch panel (counter), for one OCS per interface index (a proper
8-edge-colouring: circulant, 2-factor or exact route, named in ``route``), and for the same demand
with directed links (König's split into permutations, exact). ``check_s``: the independent check of
the OCS cabling plan (``evaluation.cabling.check_cabling``) on the written CSV. ``cpsat_s``: the exact
colouring model (``models.interfaces.edge_colouring``, CP-SAT) on the whole design, run once with
``--exact-limit`` seconds, and its status.

Usage: python benchmarks/interface_assignment.py [--sizes 128 1024 4096] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np
from _results import Record, add_out_argument

from topoopt_ilp import solve
from topoopt_ilp.evaluation.cabling import check_cabling
from topoopt_ilp.export import assign_interfaces, write_cabling
from topoopt_ilp.files import parse_instance
from topoopt_ilp.models.common import ExactOptions
from topoopt_ilp.models.interfaces import edge_colouring


def instance(n: int, links: str, seed: int = 0):
    rng = np.random.default_rng(seed)
    pairs = []
    for s in range(n):
        for t in rng.choice(np.delete(np.arange(n), s), size=2, replace=False):
            pairs.append([s, int(t), 1e9])
    return parse_instance(
        {
            "format": "topoopt-instance",
            "version": 1,
            "cluster": {"servers": n, "degree": 8, "link_bandwidth_gbps": 100, "links": links},
            "demand": {"allreduce": [{"members": list(range(n)), "bytes": 1e9}], "mp": {"pairs": pairs}},
        }
    )


def best(fn, repeat: int):
    out, t = None, float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        t = min(t, time.perf_counter() - start)
    return out, t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[128, 1024, 4096])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--time-limit", type=float, default=600.0, help="of the exact colouring search, seconds")
    ap.add_argument("--exact-limit", type=float, default=300.0, help="time limit of the whole-design CP-SAT solve")
    add_out_argument(ap)
    args = ap.parse_args()
    record = Record(args)
    t = record.table(
        "interface assignment, degree 8 (seconds, best of --repeat)",
        [
            ("n", ">5"),
            ("heuristic_s", ">11.3f"),
            ("patch_panel_s", ">13.4f"),
            ("ocs_s", ">8.3f"),
            ("route", ">21"),
            ("check_s", ">8.3f"),
            ("directed_heur_s", ">15.3f"),
            ("konig_s", ">8.3f"),
            ("cpsat_s", ">8.2f"),
            ("cpsat_status", ">12"),
        ],
    )
    print(t.header())
    for n in args.sizes:
        inst = instance(n, "undirected")
        sol, t_heur = best(lambda: solve(inst, method="heuristic"), args.repeat)
        _, t_pp = best(lambda: assign_interfaces(inst, sol, fabric="patch_panel"), args.repeat)
        plan, t_ocs = best(
            lambda: assign_interfaces(inst, sol, fabric="ocs", time_limit_s=args.time_limit), args.repeat
        )
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "plan.csv")
            write_cabling(inst, sol, path, fabric="ocs", time_limit_s=args.time_limit)
            report, t_check = best(lambda: check_cabling(inst, sol, path, fabric="ocs"), args.repeat)
        assert report.valid, report.violations[:3]
        dinst = instance(n, "directed")
        dsol, t_dheur = best(lambda: solve(dinst, method="heuristic"), args.repeat)
        _, t_konig = best(lambda: assign_interfaces(dinst, dsol), args.repeat)
        x = sol.topology.matrix
        a, b = np.nonzero(np.triu(x, 1))
        a, b = np.repeat(a, x[a, b]), np.repeat(b, x[a, b])
        options = ExactOptions(backend="cpsat", time_limit_s=args.exact_limit, warm_start="none")
        start = time.perf_counter()
        exact = edge_colouring(a, b, n, 8, options)
        t_exact = time.perf_counter() - start
        row = (n, t_heur, t_pp, t_ocs, plan.method, t_check, t_dheur, t_konig, t_exact, exact.status)
        print(t.add(*row), flush=True)
    record.write()


if __name__ == "__main__":
    main()
