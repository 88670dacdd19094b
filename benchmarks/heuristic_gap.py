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

from _args import seconds
import numpy as np

from topoopt_ilp.heuristic import circulant_stats
from topoopt_ilp.core.instance import Cluster, Demand, Instance
from topoopt_ilp.models.topology.circulant import heuristic_jumps, jump_set_throughput, solve_circulant
from topoopt_ilp.models.common import ExactOptions


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="16,24,32,48,64,96,128")
    ap.add_argument("--degrees", default="4,6,8")
    ap.add_argument("--time-limit", type=seconds, default=120.0)
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    degrees = [int(x) for x in args.degrees.split(",")]
    print(f"coprime circulants, all-to-all demand; geometric rule (paper mode: jumps <= n/2) vs exact; "
          f"time limit {args.time_limit:g} s per MILP; '*' = not proven optimal")
    hdr = (f"{'n':>4} {'d':>2} {'geo jumps':<16} {'aspl_geo':>8} {'aspl_opt':>8} {'diam_geo':>8} {'diam_opt':>8} "
           f"{'thr_geo':>9} {'thr_opt':>9} {'thr_ratio':>9} {'t_aspl':>7} {'t_diam':>7} {'t_thr':>7}")
    print(hdr)
    print("-" * len(hdr))
    rows = []
    for d in degrees:
        for n in sizes:
            geo = heuristic_jumps(n, d, False, "coprime_circulant")
            if geo is None:
                print(f"{n:>4} {d:>2}  (no geometric set of distinct classes)")
                continue
            diam_g, aspl_g = circulant_stats(n, geo)
            res, times, flags = {}, {}, {}
            for obj in ("aspl", "diameter", "throughput"):
                inst = Instance(Cluster(n, d, 100.0, hop_latency_us=0.0), Demand(all_to_all=1e6),
                                objective=obj, topology_family="coprime_circulant")
                t0 = time.perf_counter()
                sol = solve_circulant(inst, ExactOptions(time_limit_s=args.time_limit))
                times[obj] = time.perf_counter() - t0
                res[obj] = sol.objective if sol.has_solution else float("nan")
                flags[obj] = "" if sol.status == "optimal" else "*"
            inst = Instance(Cluster(n, d, 100.0, hop_latency_us=0.0), Demand(all_to_all=1e6),
                            objective="throughput", topology_family="coprime_circulant")
            thr_g = jump_set_throughput(inst, geo)
            rows.append((n, d, aspl_g, res["aspl"], diam_g, res["diameter"], thr_g, res["throughput"], flags))
            print(f"{n:>4} {d:>2} {str(list(geo)):<16} {aspl_g:>8.4f} {res['aspl']:>7.4f}{flags['aspl']:1} "
                  f"{diam_g:>8d} {res['diameter']:>7.0f}{flags['diameter']:1} {thr_g:>9.2f} {res['throughput']:>8.2f}"
                  f"{flags['throughput']:1} {thr_g / res['throughput']:>9.4f} {times['aspl']:>7.1f} {times['diameter']:>7.1f} "
                  f"{times['throughput']:>7.1f}", flush=True)
    if not rows:
        return
    a = np.array([r[:8] for r in rows], dtype=float)
    tot = len(rows)
    print("\nsummary over", tot, "(n, d) cases")
    miss = a[:, 2] > a[:, 3] + 1e-9
    print(f"  ASPL:       geometric misses the optimum in {int(miss.sum())}/{tot}; excess mean "
          f"{np.mean(a[:, 2] / a[:, 3] - 1) * 100:.2f}%, max {np.max(a[:, 2] / a[:, 3] - 1) * 100:.2f}%")
    miss = a[:, 4] > a[:, 5]
    print(f"  diameter:   geometric misses the optimum in {int(miss.sum())}/{tot}; excess hops "
          f"max {int(np.max(a[:, 4] - a[:, 5]))}, total {int(np.sum(a[:, 4] - a[:, 5]))}")
    ratio = a[:, 6] / a[:, 7]
    miss = ratio < 1 - 1e-6
    print(f"  throughput: geometric misses the optimum in {int(miss.sum())}/{tot}; geo/opt mean {ratio.mean():.4f}, "
          f"min {ratio.min():.4f}")
    unproven = sum(1 for r in rows for f in r[8].values() if f)
    print(f"  MILPs not proven optimal within the limit: {unproven}")


if __name__ == "__main__":
    main()
