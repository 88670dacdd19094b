"""Every back-end on the same exact models, side by side: time to proven optimality and the result.

    python benchmarks/backends.py [--limit 60] [--backends highs,scip,cbc] [--warm-start none|heuristic]

No warm start by default: with TopoOpt's design as a start, the topology rows whose start is
optimal are settled by two LPs before any MILP (``topology_routing``'s start proof), which compares
LP solvers, not MILP solvers.

Only models that reach a MILP are listed: uniform all-to-all demand (and, on up to 12 servers, any
aspl or diameter objective) is settled by the graph catalogue or the circulant search without a
solver, so it would compare nothing. The rows:

* ``mix n=8 d=3``, ``mix n=10 d=2``: the skewed AllReduce + MP mixes of ``exact_vs_naive.py``
  (``skewed_mix``), throughput, the strong ``topology_routing`` MILP;
* ``mix n=8 d=4``: a hand-made AllReduce + MP mix, same model;
* ``aspl circ n=32``: ``instances/coprime-circulant-32.json``, the circulant jump-set MILP (aspl);
* ``place dlrm-8``: ``instances/dlrm-mini-8-fixed.json`` with ``formulation="milp"``, the placement
  MILP on a fixed topology (the time includes the local search and bounds that run before it, the
  same for every backend).

The times include model translation and the guard process (a time limit is set, so each solve runs
isolated); the ratio column is each backend's time over the first backend's on the same model in
the same run. Each cell: status, objective, wall time, ratio.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from _args import seconds

from topoopt_ilp import Cluster, Demand, Instance, load_instance, solve
from topoopt_ilp.core.instance import AllReduceGroup
from topoopt_ilp.solvers import guard

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import Record, add_out_argument
from exact_vs_naive import skewed_mix


def instances():
    yield "mix n=8 d=3", skewed_mix(8, 3), {}
    yield "mix n=10 d=2", skewed_mix(10, 2), {}
    mix = Demand(
        allreduce=(AllReduceGroup(tuple(range(8)), 40e6), AllReduceGroup((0, 2, 4, 6), 10e6)),
        mp=((0, 1, 30e6), (1, 0, 30e6), (2, 5, 20e6), (6, 3, 10e6)),
    )
    yield "mix n=8 d=4", Instance(Cluster(8, 4, 100.0, hop_latency_us=0.0), mix, objective="throughput"), {}
    yield "aspl circ n=32", load_instance(ROOT / "instances/coprime-circulant-32.json"), {}
    yield "place dlrm-8", load_instance(ROOT / "instances/dlrm-mini-8-fixed.json"), {"formulation": "milp"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--limit", type=seconds, default=60.0)
    ap.add_argument("--backends", default="highs,scip,cbc")
    ap.add_argument("--warm-start", choices=("none", "heuristic"), default="none")
    add_out_argument(ap)
    args = ap.parse_args()
    record = Record(args)
    backends = args.backends.split(",")
    guard.prestart()  # so that no backend pays the worker's start-up
    solve(skewed_mix(8, 2), method="heuristic")  # nor the heuristic's one-time imports
    columns = [("model", "<15"), ("solved by", "<28")]
    for b in backends:  # per backend: status, objective, wall time, time over the first backend's
        columns += [
            "|",
            (f"{b} status", ">9"),
            (f"{b} obj", ">9.5g"),
            (f"{b} s", ">6.2f", "s"),
            (f"{b}/{backends[0]}", ">5.1f", "x"),
        ]
    table = record.table(f"time limit {args.limit:g} s, warm start: {args.warm_start}", columns)
    print(table.title)
    print(table.header())
    for label, inst, kw in instances():
        cells, base, by = [], None, ""
        for b in backends:
            t = time.perf_counter()
            sol = solve(inst, method="exact", backend=b, time_limit_s=args.limit, warm_start=args.warm_start, **kw)
            secs = time.perf_counter() - t
            base = base or secs
            by = (
                by
                or f"{sol.details.get('model', '?')} {sol.details.get('algorithm', sol.details.get('formulation', ''))}"
            )
            cells += [sol.status, sol.objective, secs, secs / base]
        print(table.add(label, by, *cells), flush=True)
    record.write()


if __name__ == "__main__":
    main()
