"""Build + load time of a ~300k-variable multi-commodity-flow MILP: neutral model vs raw highspy.

Model (complete digraph on n nodes, arcs a = (i, j), i != j; commodities k = (s, t), s != t):

    variables  f[k, a] >= 0       flow of commodity k on arc a          (continuous, K * A)
               x[a] in {0..d}     parallel links on arc a                (integer, A)
               lam >= 0           concurrent throughput                  (continuous, 1)
    maximise   lam
    subject to out_k(v) - in_k(v) = lam * D * ([v = s] - [v = t])        for every k, v
               sum_k f[k, a] <= cap * x[a]                               for every a
               sum_{a out of v} x[a] = d,  sum_{a into v} x[a] = d       for every v

Both variants start from the same numpy index arrays; "raw" converts them to CSR with scipy and
calls highspy's addVars / changeColsIntegrality / changeColsCost / addRows itself, "neutral" goes
through ModelBuilder -> LinearModel -> topoopt_ilp.solvers.highs.load. No solve. Each variant is
repeated and the minimum is reported. A second part measures the overhead of an isolated solve
(worker process) against an in-process one on a small model, which is why isolation is only the
default when a time limit is given.

Run: python benchmarks/model_build.py [n]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import scipy.sparse as sp
from _results import Record, add_out_argument

from topoopt_ilp.solvers import ModelBuilder, solve
from topoopt_ilp.solvers.highs import load

REPEATS = 5
DEGREE, CAP, DEMAND = 4, 10.0, 1.0


def index_arrays(n: int) -> dict[str, np.ndarray]:
    """The arc and commodity index arrays both variants start from."""
    ii, jj = np.nonzero(~np.eye(n, dtype=bool))
    return {"tail": ii, "head": jj, "src": ii, "dst": jj}  # commodities are the ordered pairs too


def build_neutral(n: int):
    ix = index_arrays(n)
    tail, head, src, dst = ix["tail"], ix["head"], ix["src"], ix["dst"]
    A, K = tail.size, src.size
    b = ModelBuilder("mcf")
    f = b.add_variables((K, A), name="f")
    x = b.add_variables(A, ub=DEGREE, kind="integer", name="x")
    lam = b.add_variables(1, name="lam")
    kk = np.repeat(np.arange(K), A)
    aa = np.tile(np.arange(A), K)
    fi = f.index.ravel()
    b.add_constraints(
        np.concatenate([kk * n + tail[aa], kk * n + head[aa], np.arange(K) * n + src, np.arange(K) * n + dst]),
        np.concatenate([fi, fi, np.full(2 * K, lam.start)]),
        np.concatenate([np.ones(K * A), -np.ones(K * A), np.full(K, -DEMAND), np.full(K, DEMAND)]),
        lb=0.0,
        ub=0.0,
        count=K * n,
        name="conserve",
    )
    b.add_constraints(
        np.concatenate([aa, np.arange(A)]),
        np.concatenate([fi, x.index]),
        np.concatenate([np.ones(K * A), np.full(A, -CAP)]),
        ub=0.0,
        count=A,
        name="cap",
    )
    b.add_constraints(
        np.concatenate([tail, n + head]),
        np.concatenate([x.index, x.index]),
        1.0,
        lb=DEGREE,
        ub=DEGREE,
        count=2 * n,
        name="degree",
    )
    b.set_objective([lam.start], [1.0], sense="maximize")
    model = b.build()
    return load(model), model


def build_raw(n: int):
    import highspy

    ix = index_arrays(n)
    tail, head, src, dst = ix["tail"], ix["head"], ix["src"], ix["dst"]
    A, K = tail.size, src.size
    nf = K * A
    ncol = nf + A + 1
    lam = nf + A
    kk = np.repeat(np.arange(K), A)
    aa = np.tile(np.arange(A), K)
    fi = np.arange(nf)
    rows = np.concatenate(
        [
            kk * n + tail[aa],
            kk * n + head[aa],
            np.arange(K) * n + src,
            np.arange(K) * n + dst,
            K * n + aa,
            K * n + np.arange(A),
            K * n + A + tail,
            K * n + A + n + head,
        ]
    )
    cols = np.concatenate([fi, fi, np.full(2 * K, lam), fi, nf + np.arange(A), nf + np.arange(A), nf + np.arange(A)])
    vals = np.concatenate(
        [
            np.ones(nf),
            -np.ones(nf),
            np.full(K, -DEMAND),
            np.full(K, DEMAND),
            np.ones(nf),
            np.full(A, -CAP),
            np.ones(2 * A),
        ]
    )
    nrow = K * n + A + 2 * n
    a = sp.csr_array((vals, (rows.astype(np.int32), cols.astype(np.int32))), shape=(nrow, ncol))
    lo = np.concatenate([np.zeros(K * n), np.full(A, -np.inf), np.full(2 * n, DEGREE)])
    hi = np.concatenate([np.zeros(K * n), np.zeros(A), np.full(2 * n, DEGREE)])
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.addVars(ncol, np.zeros(ncol), np.concatenate([np.full(nf, np.inf), np.full(A, DEGREE), [np.inf]]))
    ints = np.arange(nf, nf + A, dtype=np.int32)
    h.changeColsIntegrality(A, ints, np.ones(A, dtype=np.uint8))
    h.changeObjectiveSense(highspy.ObjSense.kMaximize)
    h.changeColsCost(1, np.array([lam], dtype=np.int32), np.array([1.0]))
    h.addRows(nrow, lo, hi, a.nnz, a.indptr[:-1].astype(np.int32), a.indices.astype(np.int32), a.data)
    return h, None


def best_of(fn, *args) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(REPEATS):
        t = time.perf_counter()
        out = fn(*args)
        best = min(best, time.perf_counter() - t)
    return best, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("n", nargs="?", type=int, default=24, help="nodes of the complete digraph, 2..40 (default 24)")
    add_out_argument(ap)
    args = ap.parse_args()
    n = args.n
    if not 2 <= n <= 40:  # n**4 flow variables: 40 is 2.5 M already
        ap.error(f"n must be 2..40, not {n}")
    record = Record(args)
    print(f"multi-commodity flow, complete digraph n={n}; {os.cpu_count()} cores; min of {REPEATS} runs")
    t_raw, (h_raw, _) = best_of(build_raw, n)
    t_neu, (h_neu, model) = best_of(build_neutral, n)
    assert (h_raw.getNumCol(), h_raw.getNumRow(), h_raw.getNumNz()) == (
        h_neu.getNumCol(),
        h_neu.getNumRow(),
        h_neu.getNumNz(),
    ), "the two builds differ"
    build = record.table(
        f"build + load of the multi-commodity-flow MILP, n={n}: {model.num_vars:,} columns, "
        f"{model.num_rows:,} rows, {model.num_nonzeros:,} non-zeros; min of {REPEATS} runs",
        ["  ", ("variant", "<41"), ": ", ("seconds", ".3f", " s")],
        sep="",
    )
    print(f"  model: {model.num_vars:,} columns, {model.num_rows:,} rows, {model.num_nonzeros:,} non-zeros")
    print(build.add("raw highspy (CSR + addVars/addRows)", t_raw))
    print(build.add("ModelBuilder -> LinearModel -> passModel", t_neu))
    record.ratios["neutral/raw"] = t_neu / t_raw
    print(build.note(f"ratio neutral / raw: {t_neu / t_raw:.2f}  (target <= 1.5, absolute < 1 s)").join(["  ", ""]))

    # Isolation overhead on a small model: why the worker process is the default only with a time limit.
    b = ModelBuilder()
    x = b.add_variables(8, kind="binary")
    b.add_constraints(np.zeros(8), x.index, np.arange(1, 9), ub=12)
    b.set_objective(x.index, np.arange(8, 0, -1), sense="maximize")
    small = b.build()
    t = time.perf_counter()
    solve(small, "highs", isolate=True)
    cold = time.perf_counter() - t
    t_in, _ = best_of(lambda: solve(small, "highs", isolate=False))
    t_iso, _ = best_of(lambda: solve(small, "highs", isolate=True))
    iso = record.table(
        "small MILP (8 binaries), highs: solve time in process and isolated (worker process)",
        ["  ", ("solve", "<24"), ": ", ("ms", ".1f", " ms")],
        sep="",
    )
    print("small MILP (8 binaries), highs:")
    print(iso.add("in-process solve", t_in * 1e3))
    print(iso.add("isolated, warm worker", t_iso * 1e3))
    print(iso.add("isolated, cold worker", cold * 1e3) + " (first isolated solve of a process)")
    record.write()


if __name__ == "__main__":
    main()
