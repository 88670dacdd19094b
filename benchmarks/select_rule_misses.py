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
from _results import Record, add_out_argument

from topoopt_ilp.heuristic import best_rule, circulant_stats, select_permutations, totient_perms


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nmin", type=int, default=16)
    ap.add_argument("--nmax", type=int, default=128)
    ap.add_argument("--worst", type=int, default=5, help="worst cases listed per d")
    add_out_argument(ap)
    a = ap.parse_args()
    record = Record(a)
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

    table = record.table(
        f"geometric SelectPermutations vs exact best (min ASPL, then diameter), full group k = n, "
        f"undirected, n = {a.nmin}..{a.nmax} (all n), {el:.1f} s; A = authors' mode, P = paper mode",
        [
            ("d", ">2"),
            ("cases", ">5"),
            "|",
            ("A miss", ">6"),
            ("A miss %", ">4.0%"),
            ("dup j,n-j", ">9"),
            ("A mean +ASPL%", ">11.2f"),
            ("A max +ASPL%", ">10.2f"),
            ("A diam worse", ">10"),
            "|",
            ("P miss", ">4"),
            ("P miss %", ">4.0%"),
            ("P mean +ASPL%", ">11.2f"),
            ("P max +ASPL%", ">10.2f"),
            ("P diam worse", ">10"),
        ],
    )
    print(table.title)
    print(table.rule())
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
        print(
            table.add(
                d,
                len(R),
                ma.sum(),
                ma.mean(),
                dup,
                ea.mean(),
                ea.max(),
                dwa,
                mp.sum(),
                mp.mean(),
                ep.mean(),
                ep.max(),
                dwp,
            )
        )
    print(
        table.note(
            "(mean +ASPL% is over all cases, misses and hits; 'diam worse' = geometric diameter > the best set's)"
        )
    )
    worst = record.table(
        f"the {a.worst} worst authors-mode cases per d: geometric jumps against the best jumps",
        [
            ("d", ">2"),
            ("n", ">4"),
            ("geometric jumps", "<16"),
            ("geo ASPL", ">8.3f"),
            ("geo diam", ">8"),
            ("best jumps", "<16"),
            ("best ASPL", ">9.3f"),
            ("best diam", ">9"),
            ("+ASPL%", ">7.1f"),
        ],
    )
    print(f"\n{worst.title}")
    print(worst.rule())
    for d in (4, 6, 8):
        R = sorted((r for r in rows if r[0] == d), key=lambda r: -(r[5] / r[7]))[: a.worst]
        for r in R:
            print(worst.add(d, r[1], list(r[2]), r[5], r[8], list(r[4]), r[7], r[10], (r[5] / r[7] - 1) * 100))
    record.write()


if __name__ == "__main__":
    main()
