"""End-to-end scale of the default method: ``topoopt solve INSTANCE --out FILE`` at cluster sizes.

What a user waits for: the CLI's wall time (start-up, reading, TopoOpt's heuristic, the evaluator's
scores, the independent verification and the written solution file), its peak memory and the
file's size, for three kinds of jobs at each size (degree ``--degree``, 100 Gbps links):

* ``resnet50``: the data-parallel ResNet-50 job of ``topoopt generate resnet50`` (a workload);
* ``ar+mp``: one AllReduce over all servers (1 GB) and one model-parallel pair per server (1 GB
  each way, a random perfect matching of the servers);
* ``all-to-all``: 1 MB between every ordered pair (the heuristic's circulant with one offset route
  per offset; sizes above ``--all-to-all-max`` are skipped and say so).

Each solve runs in its own process; peak memory is that child's maximum resident set, and its CPU
time (user + system) is reported beside the wall time, which other jobs on the machine stretch.
The package's bytecode is compiled first, as ``pip install`` compiles it: otherwise each run would
compile the package's modules again where ``PYTHONDONTWRITEBYTECODE`` is set (0.13 s at start-up).

    python benchmarks/cli_scale.py [--sizes 1024 4096 16384] [--kinds all-to-all] [--degree 8]
        [--all-to-all-max 16384] [--out]
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _results import ROOT, Record, add_out_argument

KINDS = ("resnet50", "ar+mp", "all-to-all")


def topoopt() -> list[str]:
    return [sys.executable, "-m", "topoopt_ilp"]


def instance(kind: str, n: int, degree: int, folder: Path) -> Path:
    path = folder / f"{kind}-{n}.json"
    if kind == "resnet50":
        cmd = [*topoopt(), "generate", "resnet50", "--servers", str(n), "--degree", str(degree)]
        subprocess.run([*cmd, "--bandwidth", "100", "-o", str(path)], check=True, capture_output=True)
        return path
    demand: dict = {"all_to_all": 1e6}
    if kind == "ar+mp":
        order = list(range(n))
        random.Random(n).shuffle(order)
        pairs = [[order[k], order[k + 1], 1e9] for k in range(0, n - 1, 2)]
        demand = {
            "allreduce": [{"members": "all", "bytes": 1e9}],
            "mp": {"pairs": pairs + [[b, a, w] for a, b, w in pairs]},
        }
    doc = {
        "format": "topoopt-instance",
        "version": 1,
        "name": f"{kind}-{n}",
        "cluster": {"servers": n, "degree": degree, "link_bandwidth_gbps": 100},
        "demand": demand,
    }
    path.write_text(json.dumps(doc))
    return path


def one(kind: str, n: int, degree: int) -> dict:
    """Run in a fresh process: this process's only child is the solve, so its peak RSS is the solve's."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        inst = instance(kind, n, degree, folder)
        out = folder / "solution.json"
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        before, cpu_before = usage.ru_maxrss, usage.ru_utime + usage.ru_stime
        start = time.perf_counter()
        run = subprocess.run(
            [*topoopt(), "solve", str(inst), "--out", str(out), "--json"], capture_output=True, text=True
        )
        wall = time.perf_counter() - start
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        peak, cpu = usage.ru_maxrss, usage.ru_utime + usage.ru_stime - cpu_before
        if run.returncode != 0:
            raise SystemExit(f"{kind} n={n}: exit {run.returncode}: {run.stderr.strip()[:300]}")
        sol = json.loads(run.stdout)
        routing = sol.get("routing", {})
        return {
            "kind": kind,
            "n": n,
            "wall_s": wall,
            "cpu_s": cpu,
            "method_s": sol["wall_time_s"],
            "peak_rss_mib": max(peak, before) / 1024,
            "file_mib": out.stat().st_size / 2**20,
            "offset_routes": len(routing.get("offset_routes", [])),
            "paths": len(routing.get("paths", [])),
            "throughput": sol["metrics"]["throughput"],
        }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1024, 4096, 16384])
    ap.add_argument("--degree", type=int, default=8)
    ap.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS))
    ap.add_argument("--all-to-all-max", type=int, default=16384, help="largest all-to-all size to run")
    ap.add_argument("--one", nargs=2, metavar=("KIND", "N"), help=argparse.SUPPRESS)
    add_out_argument(ap)
    a = ap.parse_args()
    if a.one:
        print(json.dumps(one(a.one[0], int(a.one[1]), a.degree)))
        return
    for folder in ("topoopt_ilp", "models", "solvers"):  # the package's three source folders (pyproject.toml)
        compileall.compile_dir(ROOT / folder, quiet=1)
    record = Record(a)
    table = record.table(
        f"topoopt solve --out (heuristic, evaluation, verification, file), degree {a.degree}, 100 Gbps",
        [
            ("kind", "<10"),
            ("n", ">6"),
            ("wall s", ">8.1f"),
            ("cpu s", ">7.1f"),
            ("method s", ">9.2f"),
            ("peak RSS MiB", ">13.0f"),
            ("file MiB", ">9.1f"),
            ("offset routes", ">14"),
            ("paths", ">9"),
        ],
        notes=[
            "wall = the whole command as a user runs it; cpu = its user + system CPU time; "
            "method = the heuristic alone (the file's wall_time_s)"
        ],
    )
    print(table.title)
    print(table.header())
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    for n in a.sizes:
        for kind in a.kinds:
            if kind == "all-to-all" and n > a.all_to_all_max:
                print(table.note(f"all-to-all at n = {n} skipped (--all-to-all-max {a.all_to_all_max})"))
                continue
            cmd = [sys.executable, __file__, "--one", kind, str(n), "--degree", str(a.degree)]
            r = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout)
            keys = ("kind", "n", "wall_s", "cpu_s", "method_s", "peak_rss_mib", "file_mib", "offset_routes", "paths")
            print(table.add(*(r[k] for k in keys)), flush=True)
    record.write()


if __name__ == "__main__":
    main()
