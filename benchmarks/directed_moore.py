"""Directed links, uniform all-to-all: the Moore circulant search vs the topology MILP, side by side.

For each size and objective, the exact method as shipped (the search of models/topology/moore_circulant.py
first; the MILP with the time left when it proves nothing) and the MILP alone (``use_catalogue=False``),
one after the other on the same backend, no warm start. The ratio MILP/search is the result; a '>'
marks a MILP that hit the time limit.

    python benchmarks/directed_moore.py [--limit 60] [--sizes 8x3,8x4,9x3,10x4,11x4,12x4,13x4]
                                        [--objectives throughput,aspl]
"""

from __future__ import annotations

import argparse
import time

from _args import seconds
from _results import Record, add_out_argument
from joint_small import _warm_up_solver_worker

from topoopt_ilp import Cluster, Demand, Instance
from topoopt_ilp.models.common import ExactOptions
from topoopt_ilp.models.topology.solve import solve_topology_routing


def run(instance: Instance, limit: float, use_search: bool):
    _warm_up_solver_worker()
    options = ExactOptions(backend="highs", time_limit_s=limit, warm_start="none")
    t = time.perf_counter()
    sol = solve_topology_routing(instance, options, use_catalogue=use_search)
    return sol, time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--limit", type=seconds, default=60.0)
    ap.add_argument("--sizes", default="8x3,8x4,9x3,10x4,11x4,12x4,13x4")
    ap.add_argument("--objectives", default="throughput,aspl")
    add_out_argument(ap)
    args = ap.parse_args()
    record = Record(args)
    table = record.table(
        f"directed links, all-to-all, HiGHS, time limit {args.limit:g} s per solve, no warm start; "
        "MILP/method is a lower bound where the MILP is not optimal",
        [
            ("objective", "<10"),
            ("n", ">3"),
            ("d", ">2"),
            "|",
            ("method", ">8"),
            ("method_s", ">8.3f", "s"),
            ("method_obj", ">9.5g"),
            ("algorithm", "<22"),
            "|",
            ("milp", ">8"),
            ("milp_s", ">7.2f", "s"),
            ("milp_obj", ">9.5g"),
            "|",
            ("MILP/method", ">10.1f", "x"),
        ],
    )
    print(table.title)
    print(table.header())
    for size in args.sizes.split(","):
        n, d = map(int, size.split("x"))
        for objective in args.objectives.split(","):
            inst = Instance(
                Cluster(n, d, 100.0, hop_latency_us=0.0, links="directed"), Demand(all_to_all=1e6), objective=objective
            )
            (s, ts), (m, tm) = run(inst, args.limit, True), run(inst, args.limit, False)
            how = s.details.get("algorithm", "MILP")
            print(
                table.add(
                    objective,
                    n,
                    d,
                    s.status,
                    ts,
                    s.objective,
                    how,
                    m.status,
                    tm,
                    m.objective,
                    tm / ts if s.status == "optimal" else None,
                ),
                flush=True,
            )
    record.write()


if __name__ == "__main__":
    main()
