"""How often TopoOpt's geometric SelectPermutations rule misses the best circulant.

For every n in [N_MIN, N_MAX] and d in {4, 6, 8} (m = d/2 undirected jumps, full group k = n), compare
* geometric, authors' mode (candidates = all coprime jumps, may pick j and n-j),
* geometric, paper mode (candidates p <= n/2, no duplicates),
against the exact optimum over coprime jump sets (``best_rule`` run exhaustively: jump 1 fixed by the
multiplier symmetry, canonical forms deduplicated, every set scored by one BFS over residues).
"Miss" = geometric's ASPL (mean hop count over the n-1 other nodes) is strictly above the optimum.

Usage: python benchmarks/select_rule_misses.py [--nmin 16] [--nmax 128]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from topoopt_ilp.heuristic import best_rule, circulant_stats, select_permutations, totient_perms


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nmin", type=int, default=16)
    ap.add_argument("--nmax", type=int, default=128)
    ap.add_argument("--worst", type=int, default=5, help="worst cases listed per d")
    a = ap.parse_args()
    t0 = time.perf_counter()
    rows = []
    for d in (4, 6, 8):
        m = d // 2
        for n in range(a.nmin, a.nmax + 1):
            c = totient_perms(n, n)
            if len(c[2 * c <= n]) < m:  # fewer +-classes than jumps: nothing to choose
                continue
            ga = select_permutations(c, m, n=n, mode="authors")
            gp = select_permutations(c, m, n=n, mode="paper")
            b = best_rule(c[2 * c <= n], m, n=n, exhaustive_limit=10**7)
            (da, aa), (dp, ap_), (db, ab) = (circulant_stats(n, x) for x in (ga, gp, b))
            dup = len({min(j, n - j) for j in ga}) < m
            rows.append((d, n, ga, gp, b, aa, ap_, ab, da, dp, db, dup))
    el = time.perf_counter() - t0

    print(f"geometric SelectPermutations vs exact best (min ASPL, then diameter), full group k = n, undirected, "
          f"n = {a.nmin}..{a.nmax} (all n), {el:.1f} s")
    hdr = (f"{'d':>2} {'cases':>5} | {'authors: miss':>13} {'dup j,n-j':>9} {'mean +ASPL%':>11} {'max +ASPL%':>10} {'diam worse':>10} "
           f"| {'paper: miss':>11} {'mean +ASPL%':>11} {'max +ASPL%':>10} {'diam worse':>10}")
    print(hdr)
    print("-" * len(hdr))
    for d in (4, 6, 8):
        R = [r for r in rows if r[0] == d]
        aa = np.array([r[5] for r in R])
        ap_ = np.array([r[6] for r in R])
        ab = np.array([r[7] for r in R])
        ea, ep = (aa / ab - 1) * 100, (ap_ / ab - 1) * 100
        ma, mp = aa > ab + 1e-12, ap_ > ab + 1e-12
        dwa = sum(r[8] > r[10] for r in R)
        dwp = sum(r[9] > r[10] for r in R)
        dup = sum(r[11] for r in R)
        print(f"{d:>2} {len(R):>5} | {ma.sum():>6} ({ma.mean():>4.0%}) {dup:>9} {ea.mean():>11.2f} {ea.max():>10.2f} {dwa:>10} "
              f"| {mp.sum():>4} ({mp.mean():>4.0%}) {ep.mean():>11.2f} {ep.max():>10.2f} {dwp:>10}")
    print("(mean +ASPL% is over all cases, misses and hits; 'diam worse' = geometric diameter > the best set's)")
    for d in (4, 6, 8):
        R = sorted((r for r in rows if r[0] == d), key=lambda r: -(r[5] / r[7]))[: a.worst]
        print(f"\nworst authors-mode cases, d={d}:  n: geometric jumps (ASPL, diam) -> best jumps (ASPL, diam)")
        for r in R:
            print(f"  n={r[1]:>3}: {r[2]} ({r[5]:.3f}, {r[8]}) -> {r[4]} ({r[7]:.3f}, {r[10]})  +{(r[5] / r[7] - 1) * 100:.1f}%")


if __name__ == "__main__":
    main()
