"""Proven-optimal throughput jump sets of coprime circulants at scale (all-to-all demand).

For n = 32, 64, 128, 256 and d = 4, 8: the exact circulant MILP (source-0 flows, jump 1 fixed,
orbit rows, counting and distance-bound cuts, heuristic warm start) with a per-instance time limit,
next to TopoOpt's geometric jump set scored by the same LP (its best routing). Prints one table:
status, time, the optimal set, throughput of both, their ratio, and the proven bound.

    .venv/bin/python benchmarks/circulant_scale.py [--time-limit 120] [--sizes 32,64,128,256] [--degrees 4,8]
"""

from __future__ import annotations

import argparse
import time

from _args import seconds
from _results import Record, add_out_argument

from topoopt_ilp.core.instance import Cluster, Demand, Instance
from topoopt_ilp.evaluation.evaluate import evaluate
from topoopt_ilp.models.common import ExactOptions
from topoopt_ilp.models.topology.circulant import heuristic_jumps, jump_set_throughput, solve_circulant


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=seconds, default=120.0)
    ap.add_argument("--sizes", default="32,64,128,256")
    ap.add_argument("--degrees", default="4,8")
    ap.add_argument("--formulation", default="strong", choices=["strong", "basic"])
    add_out_argument(ap)
    args = ap.parse_args()
    record = Record(args)
    sizes = [int(x) for x in args.sizes.split(",")]
    degrees = [int(x) for x in args.degrees.split(",")]
    table = record.table(
        f"coprime circulant, all-to-all 1 MB per pair, 100 Gbps links, throughput objective, "
        f"time limit {args.time_limit:g} s per instance, formulation {args.formulation}",
        [
            ("n", ">4"),
            ("d", ">2"),
            ("status", ">9"),
            ("time_s", ">8.1f"),
            ("exact jumps", "<22"),
            ("thr_exact", ">10.2f"),
            ("thr_bound", ">10.2f"),
            ("geo jumps", "<22"),
            ("thr_geo", ">10.2f"),
            ("geo/exact", ">9.4f"),
            ("eval_given", ">10.2f"),
        ],
    )
    print(table.title)
    print(table.rule())
    for d in degrees:
        for n in sizes:
            inst = Instance(
                Cluster(n, d, 100.0, hop_latency_us=0.0),
                Demand(all_to_all=1e6),
                objective="throughput",
                topology_family="coprime_circulant",
            )
            t0 = time.perf_counter()
            sol = solve_circulant(inst, ExactOptions(time_limit_s=args.time_limit, formulation=args.formulation))
            dt = time.perf_counter() - t0
            geo = heuristic_jumps(n, d, False, "coprime_circulant")
            thr_geo = jump_set_throughput(inst, geo) if geo else float("nan")
            geo = list(geo) if geo else None
            if sol.has_solution:
                ev = evaluate(inst, sol, routing="given").throughput  # independent check of the routes
                print(
                    table.add(
                        n,
                        d,
                        sol.status,
                        dt,
                        list(sol.topology.jumps),
                        sol.objective,
                        sol.bound,
                        geo,
                        thr_geo,
                        thr_geo / sol.objective,
                        ev,
                    ),
                    flush=True,
                )
            else:
                print(table.add(n, d, sol.status, dt, None, None, None, geo, thr_geo, None, None), flush=True)
    record.write()


if __name__ == "__main__":
    main()
