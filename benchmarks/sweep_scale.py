"""A sweep one solve at a time vs in worker processes vs on a local Dask cluster, side by side.

The instances are the skewed AllReduce + MP mixes of ``exact_vs_naive.py`` (n = 8..10, d = 2..4),
written to a temporary directory; every variant runs ``topoopt_ilp.experiments.sweep.sweep`` on the same files
with the heuristic and the exact method (HiGHS, ``--time-limit`` per solve, one solver thread so that
the workers do not share cores). Printed: wall time per variant, its speed-up over the serial run,
and whether every variant found the same objectives (the statuses and values must not depend on the
executor; a solve that hits its limit may differ, and is reported).

    .venv/bin/python benchmarks/sweep_scale.py [--jobs 2] [--time-limit 30] [--sizes 8x2,8x3,8x4,10x2,10x3,10x4,12x2]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

from _args import seconds
from _results import Record, add_out_argument
from exact_vs_naive import skewed_mix

from topoopt_ilp import files
from topoopt_ilp.experiments.sweep import sweep


def run(paths: list[str], args: argparse.Namespace, executor) -> tuple[float, list]:
    started = time.perf_counter()
    rows = sweep(
        paths,
        ["heuristic", "exact"],
        time_limit_s=args.time_limit,
        executor=executor,
        native_options={"highs": {"threads": 1}},
    )
    return time.perf_counter() - started, rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--time-limit", type=seconds, default=30.0)
    ap.add_argument("--sizes", default="8x2,8x3,8x4,10x2,10x3,10x4,12x2")
    add_out_argument(ap)
    args = ap.parse_args()
    record = Record(args)
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for size in args.sizes.split(","):
            n, d = map(int, size.split("x"))
            path = Path(tmp) / f"mix-{n}x{d}.json"
            files.save_instance(skewed_mix(n, d), path)
            paths.append(str(path))
        variants = [("serial (one by one)", lambda: None)]
        variants.append(
            (
                f"process pool, {args.jobs} workers",
                lambda: ProcessPoolExecutor(args.jobs, mp_context=get_context("spawn")),
            )
        )
        try:
            from distributed import Client, LocalCluster

            def dask_executor():
                cluster = LocalCluster(n_workers=args.jobs, threads_per_worker=1, dashboard_address=None)
                return Client(cluster).get_executor()

            variants.append((f"Dask LocalCluster, {args.jobs} workers", dask_executor))
        except ImportError:
            dask_missing = "(Dask's distributed is not installed: no Dask row)"
            print(dask_missing)
        else:
            dask_missing = None
        table = record.table(
            f"{len(paths)} instances x (heuristic + exact, HiGHS 1 thread, {args.time_limit:g} s limit)",
            [("variant", "<34"), ("wall s", ">8.1f"), ("speed-up", ">8.2f", "x"), ("same results", ">13")],
            notes=[dask_missing] if dask_missing else [],
        )
        print(table.title)
        print(table.header())
        base_time = base_rows = None
        for label, make in variants:
            executor = make()
            try:
                secs, rows = run(paths, args, executor)
            finally:
                if executor is not None:
                    executor.shutdown()
            key = [
                (r.instance, r.row.method, r.row.status, None if r.row.objective is None else round(r.row.objective, 9))
                for r in rows
            ]
            if base_time is None:
                base_time, base_rows = secs, key
            same = (
                "yes"
                if key == base_rows
                else "NO: "
                + "; ".join(f"{a[0].rsplit('/', 1)[-1]} {a[1]} {a[2]}/{b[2]}" for a, b in zip(key, base_rows) if a != b)
            )
            print(table.add(label, secs, base_time / secs, same), flush=True)
    record.write()


if __name__ == "__main__":
    main()
