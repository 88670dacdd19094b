"""TopoOpt's geometric jump rule against the exact optimum of its own family (coprime circulants).

For each n (default 16, 24, 32, 48, 64, 96, 128) and d = 4, 6, 8, with all-to-all demand: the
geometric set's ASPL, diameter and throughput (its best routing: the max-concurrent-flow LP of the
fixed set) next to the exact optimum of each objective (three circulant MILPs, each with a time
limit), then a summary per objective: how many (n, d) the rule misses and by how much.

    .venv/bin/python benchmarks/heuristic_gap.py [--sizes 16,24,...] [--degrees 4,6,8] [--time-limit 120]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _args import seconds
from _results import Record, add_out_argument

from topoopt_ilp.core.instance import Cluster, Demand, Instance
from topoopt_ilp.heuristic import circulant_stats
from topoopt_ilp.models.common import ExactOptions
from topoopt_ilp.models.topology.circulant import heuristic_jumps, jump_set_throughput, solve_circulant


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="16,24,32,48,64,96,128")
    ap.add_argument("--degrees", default="4,6,8")
    ap.add_argument("--time-limit", type=seconds, default=120.0)
    add_out_argument(ap)
    args = ap.parse_args()
    record = Record(args)
    sizes = [int(x) for x in args.sizes.split(",")]
    degrees = [int(x) for x in args.degrees.split(",")]
    table = record.table(
        f"coprime circulants, all-to-all demand; geometric rule (paper mode: jumps <= n/2) vs exact; "
        f"time limit {args.time_limit:g} s per MILP; '*' = not proven optimal",
        [
            ("n", ">4"),
            ("d", ">2"),
            ("geo jumps", "<16"),
            ("aspl_geo", ">8.4f"),
            ("aspl_opt", ">8.4f"),
            ("*", "<1"),
            ("diam_geo", ">8d"),
            ("diam_opt", ">8.0f"),
            ("*", "<1"),
            ("thr_geo", ">9.2f"),
            ("thr_opt", ">9.2f"),
            ("*", "<1"),
            ("thr_ratio", ">9.4f"),
            ("t_aspl", ">7.1f"),
            ("t_diam", ">7.1f"),
            ("t_thr", ">7.1f"),
        ],
    )
    print(table.title)
    print(table.rule())
    rows = []
    for d in degrees:
        for n in sizes:
            geo = heuristic_jumps(n, d, False, "coprime_circulant")
            if geo is None:
                print(table.note(f"n={n} d={d}: no geometric set of distinct classes"))
                continue
            diam_g, aspl_g = circulant_stats(n, geo)
            res, times, flags = {}, {}, {}
            for obj in ("aspl", "diameter", "throughput"):
                inst = Instance(
                    Cluster(n, d, 100.0, hop_latency_us=0.0),
                    Demand(all_to_all=1e6),
                    objective=obj,
                    topology_family="coprime_circulant",
                )
                t0 = time.perf_counter()
                sol = solve_circulant(inst, ExactOptions(time_limit_s=args.time_limit))
                times[obj] = time.perf_counter() - t0
                res[obj] = sol.objective if sol.has_solution else float("nan")
                flags[obj] = "" if sol.status == "optimal" else "*"
            inst = Instance(
                Cluster(n, d, 100.0, hop_latency_us=0.0),
                Demand(all_to_all=1e6),
                objective="throughput",
                topology_family="coprime_circulant",
            )
            thr_g = jump_set_throughput(inst, geo)
            rows.append((n, d, aspl_g, res["aspl"], diam_g, res["diameter"], thr_g, res["throughput"], flags))
            print(
                table.add(
                    n,
                    d,
                    list(geo),
                    aspl_g,
                    res["aspl"],
                    flags["aspl"],
                    diam_g,
                    res["diameter"],
                    flags["diameter"],
                    thr_g,
                    res["throughput"],
                    flags["throughput"],
                    thr_g / res["throughput"],
                    times["aspl"],
                    times["diameter"],
                    times["throughput"],
                ),
                flush=True,
            )
    if not rows:
        record.write()
        return
    a = np.array([r[:8] for r in rows], dtype=float)
    tot = len(rows)
    print("\nsummary over", tot, "(n, d) cases")
    miss = a[:, 2] > a[:, 3] + 1e-9
    print(
        "  "
        + table.note(
            f"ASPL:       geometric misses the optimum in {int(miss.sum())}/{tot}; excess mean "
            f"{np.mean(a[:, 2] / a[:, 3] - 1) * 100:.2f}%, max {np.max(a[:, 2] / a[:, 3] - 1) * 100:.2f}%"
        )
    )
    miss = a[:, 4] > a[:, 5]
    print(
        "  "
        + table.note(
            f"diameter:   geometric misses the optimum in {int(miss.sum())}/{tot}; excess hops "
            f"max {int(np.max(a[:, 4] - a[:, 5]))}, total {int(np.sum(a[:, 4] - a[:, 5]))}"
        )
    )
    ratio = a[:, 6] / a[:, 7]
    miss = ratio < 1 - 1e-6
    print(
        "  "
        + table.note(
            f"throughput: geometric misses the optimum in {int(miss.sum())}/{tot}; geo/opt mean "
            f"{ratio.mean():.4f}, min {ratio.min():.4f}"
        )
    )
    record.ratios.update(
        {
            "throughput geo/opt mean": ratio.mean(),
            "throughput geo/opt min": ratio.min(),
            "aspl geo/opt mean": np.mean(a[:, 2] / a[:, 3]),
            "aspl geo/opt max": np.max(a[:, 2] / a[:, 3]),
        }
    )
    unproven = sum(1 for r in rows for f in r[8].values() if f)
    print("  " + table.note(f"MILPs not proven optimal within the limit: {unproven}"))
    record.write()


if __name__ == "__main__":
    main()
