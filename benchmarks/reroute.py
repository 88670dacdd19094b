"""What re-routing buys: designs before and after ``topoopt route``, and its LP against the arc-flow LP.

For each instance and method, side by side in one run: the design's bandwidth term and iteration time
with its own routing (shortest paths split equally, or the heuristic's), after
:func:`topoopt_ilp.methods.reroute.route` (the column-generation LP of :mod:`topoopt_ilp.models.reroute`), the
ratio, the LP's bound and time, and the time of the evaluator's arc-flow LP (``evaluate(...,
routing="optimal")``, one commodity per source) on the same design, with its bandwidth term as an
independent check (``-`` where that LP is beyond the evaluator's size limit or ``--arc-limit``).

    .venv/bin/python benchmarks/reroute.py [--time-limit 60] [--arc-limit 120]
        [--cases dlrm-mini-8-fixed:heuristic,mix-16:heuristic,...]

A case is ``INSTANCE:METHOD`` with INSTANCE a file name under instances/ or instances/paper/ (without
``.json``) and METHOD heuristic, alternating (``--time-limit`` seconds) or exact.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _args import seconds  # noqa: E402
from _results import Record, add_out_argument  # noqa: E402

from topoopt_ilp.errors import UnsupportedError  # noqa: E402
from topoopt_ilp.evaluation.evaluate import evaluate  # noqa: E402
from topoopt_ilp.files import load_instance  # noqa: E402
from topoopt_ilp.methods import solve  # noqa: E402
from topoopt_ilp.methods.reroute import route  # noqa: E402

CASES = (
    "dlrm-mini-8-fixed:heuristic,dlrm-mini-8-fixed:exact,mix-16:heuristic,testbed-12:heuristic,"
    "dlrm-mini-6:alternating,dlrm-128-d8:alternating,bert-128-d8:alternating"
)


def _path(name: str) -> Path:
    for folder in (ROOT / "instances", ROOT / "instances" / "paper"):
        if (folder / f"{name}.json").exists():
            return folder / f"{name}.json"
    raise SystemExit(f"no instance {name} under instances/ or instances/paper/")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default=CASES)
    ap.add_argument("--time-limit", type=seconds, default=60.0, help="alternating/exact budget, and the routing LP's")
    ap.add_argument(
        "--arc-limit",
        type=seconds,
        default=120.0,
        help="skip the arc-flow LP where the column generation took longer than this",
    )
    add_out_argument(ap)
    args = ap.parse_args()
    record = Record(args)
    table = record.table(
        f"each design's own routing against topoopt route's LP ({args.time_limit:g} s), and the arc-flow LP "
        f"(skipped where the route took over {args.arc_limit:g} s)",
        [
            ("case", "<28"),
            ("bw ms", ">8.3f"),
            ("-> bw ms", ">8.3f"),
            ("iter ms", ">8.3f"),
            ("-> iter ms", ">8.3f"),
            ("ratio", ">6.3f"),
            ("bound ms", ">8.3f"),
            ("proven", ">6"),
            ("paths", ">6"),
            ("route s", ">8.2f"),
            ("arc LP s", ">8.2f"),
            ("arc bw ms", ">9.3f"),
        ],
    )
    print(table.header())
    for case in args.cases.split(","):
        name, method = case.split(":")
        inst = load_instance(_path(name))
        options = {"time_limit_s": args.time_limit} if method in ("alternating", "exact") else {}
        sol = solve(inst, method=method, **options)
        t = time.perf_counter()
        routed = route(inst, sol, time_limit_s=args.time_limit)
        secs = time.perf_counter() - t
        r = routed.details["reroute"]
        arc_s, arc_bw = None, None
        if secs <= args.arc_limit:
            t = time.perf_counter()
            try:
                arc = evaluate(inst, sol, routing="optimal")
                arc_s, arc_bw = time.perf_counter() - t, arc.bandwidth_time_s * 1e3
            except UnsupportedError:
                arc_s = "too big"
        print(
            table.add(
                case,
                r["bandwidth_s_before"] * 1e3,
                r["bandwidth_s"] * 1e3,
                r["objective_before"] * 1e3,
                r["objective_rerouted"] * 1e3,
                r["objective_rerouted"] / r["objective_before"],
                r["bandwidth_bound_s"] * 1e3,
                r["proven"],
                r["paths"],
                secs,
                arc_s,
                arc_bw,
            ),
            flush=True,
        )
    record.write()


if __name__ == "__main__":
    main()
