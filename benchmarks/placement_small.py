"""The placement enumeration against the placement MILP on small workloads, side by side.

For each small workload (``small_workloads.py``, n = 6..10) and each 12-server testbed job of the
zoo, on the topology TopoOpt's heuristic builds for the data-parallel start, solve the placement
problem with ``--formulation enumeration`` and ``--formulation milp`` (HiGHS, gap 1e-4) and print
both times, their ratio, what settled the ``milp`` run (``milp``, or ``bounds`` when a cheap start
candidate met the relaxation bounds and no MILP ran; those rows are left out of the summary ratio),
and whether both proved the same optimum (re-scored by the evaluator). The enumeration's time
includes the local search that precedes it on problems of over 400 options.

    .venv/bin/python benchmarks/placement_small.py [--time-limit 60]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from _args import seconds
from _results import Record, add_out_argument
from joint_small import _warm_up_solver_worker
from small_workloads import small_instances

from topoopt_ilp import files
from topoopt_ilp.evaluation.evaluate import evaluate
from topoopt_ilp.methods import METHODS
from topoopt_ilp.models.common import ExactOptions
from topoopt_ilp.models.placement.milp import solve_placement

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=seconds, default=60.0, help="seconds for each solve")
    add_out_argument(ap)
    args = ap.parse_args()
    record = Record(args)
    _warm_up_solver_worker()
    instances = dict(small_instances())
    for path in sorted((ROOT / "instances" / "paper").glob("*testbed-12-d4.json")):
        inst = files.load_instance(path)
        instances[inst.name or path.stem] = inst
    table = record.table(
        f"placement enumeration vs placement MILP (HiGHS, gap 1e-4, {args.time_limit:g} s each) on "
        "TopoOpt's heuristic topology for the data-parallel start",
        [
            ("instance", "<24"),
            ("n", ">3"),
            ("enum_ms", ">9.3f"),
            ("enum_s", ">7.2f"),
            ("milp_ms", ">9.3f"),
            ("milp_s", ">7.2f"),
            ("milp/enum", ">8.1f", "x"),
            ("settled by", ">10"),
            "",
            ("same optimum", ""),
        ],
    )
    print(table.rule())
    faster = []
    for name, inst in instances.items():
        X = METHODS["heuristic"](inst).topology.matrix
        row = {}
        for formulation in ("enumeration", "milp"):
            t = time.perf_counter()
            sol = solve_placement(inst, ExactOptions(time_limit_s=args.time_limit, formulation=formulation), X)
            row[formulation] = (sol, time.perf_counter() - t)
        (e, te), (m, tm) = row["enumeration"], row["milp"]
        scored = [evaluate(inst, s, routing="shortest_path").iteration_time_s for s in (e, m)]
        agree = abs(e.objective - m.objective) <= 1e-4 * m.objective and all(
            abs(a - s.objective) <= 1e-9 * s.objective for a, s in zip(scored, (e, m))
        )
        if agree and e.status == m.status == "optimal":
            verdict = "yes"
        elif agree:
            verdict = f"same value; proven by {' and '.join(f for f, s in (('enumeration', e), ('MILP', m)) if s.status == 'optimal') or 'neither'}"
        else:
            verdict = f"NO: {e.status} {e.objective * 1e3:.3f} / {m.status} {m.objective * 1e3:.3f}"
        settled = m.details.get("algorithm", "?")  # "bounds": a start candidate proven by the bounds, no MILP ran
        if settled == "milp":
            faster.append(tm / te)
        print(
            table.add(name, inst.n, e.objective * 1e3, te, m.objective * 1e3, tm, tm / te, settled, verdict), flush=True
        )
    if faster:
        record.ratios.update({"milp/enum min (MILP ran)": min(faster), "milp/enum max (MILP ran)": max(faster)})
        print(
            "\n"
            + table.note(f"where the MILP ran, the enumeration was {min(faster):.1f}x to {max(faster):.1f}x faster")
        )
    record.write()


if __name__ == "__main__":
    main()
