"""The scheduled iteration (RCPSP makespan) next to the evaluator's overlap none / full.

For each small shipped workload instance: the design ``solve(inst, method="heuristic")`` returns
(TopoOpt's data-parallel start and TopologyFinder), and, to show what precedence costs a pipeline,
the first ``--stages`` pipeline-of-data-parallel-groups strategies of
:func:`topoopt_ilp.core.strategy.stage_strategies`, each on TopologyFinder's topology for its traffic.
With ``--random K``, also K hybrid strategies per instance drawn at random (seeded: a degree among each
layer's configs and a coset start per layer, blocks by ``place_blocks``), where resharding traffic and
mixed groups make the schedule harder. Per design, side by side in one run: the evaluator's iteration time with ``overlap: none``
(T_compute + T_comm) and ``full`` (max of the two), the list schedule's makespan, CP-SAT's makespan,
its bound and status, and the solve times. Every schedule is re-checked by
:func:`topoopt_ilp.schedule.iteration_graph.check_schedule`. With ``--micro-batches M ...``, each design is
scheduled once per M (GPipe micro-batches, ``topoopt schedule --micro-batches``), labelled ``M=..``;
the evaluator's figures do not depend on M. The default (1 only) prints the table without labels.

    .venv/bin/python benchmarks/schedule_overlap.py [--time-limit S] [--stages K] [--random K] [--seed N]
                                                    [--micro-batches M ...] [--instances FILE ...]

Demand instances (no workload, e.g. instances/dlrm-like-6.json) have nothing to schedule and are
reported as skipped.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _args import instance_file, seconds  # noqa: E402
from _results import Record, add_out_argument  # noqa: E402

from topoopt_ilp.core.strategy import Strategy, place_blocks, stage_strategies, strategy_to_dict, validate_strategy  # noqa: E402
from topoopt_ilp.errors import InputError  # noqa: E402
from topoopt_ilp.evaluation.evaluate import evaluate  # noqa: E402
from topoopt_ilp.files import load_instance  # noqa: E402
from topoopt_ilp.methods import heuristic_for_placement, solve  # noqa: E402
from topoopt_ilp.models.schedule import list_schedule, solve_schedule  # noqa: E402
from topoopt_ilp.schedule.iteration_graph import check_schedule, graph_from_solution  # noqa: E402

DEFAULT = [
    "instances/dlrm-mini-6.json",
    "instances/dlrm-like-6.json",
    *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "instances" / "paper").glob("*testbed-12*.json")),
]


def _ms(v: float | None) -> float | None:
    return None if v is None else v * 1e3


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--instances", nargs="+", type=instance_file, default=DEFAULT)
    ap.add_argument("--time-limit", type=seconds, default=30.0, help="CP-SAT limit per design (default 30 s)")
    ap.add_argument("--stages", type=int, default=3, help="pipeline strategies per instance (default 3)")
    ap.add_argument("--random", type=int, default=0, help="random hybrid strategies per instance (default 0)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the random strategies (default 0)")
    ap.add_argument(
        "--micro-batches",
        type=int,
        nargs="+",
        default=[1],
        metavar="M",
        help="schedule each design with each number of micro-batches (default: 1)",
    )
    add_out_argument(ap)
    args = ap.parse_args(argv)
    if any(m < 1 for m in args.micro_batches):
        ap.error("--micro-batches: each M must be an integer >= 1")
    record = Record(args, argv=None if argv is None else [sys.argv[0], *argv])
    labelled = args.micro_batches != [1]
    wd = 21 if labelled else 16  # "heuristic (DP) M=16"
    table = record.table(
        f"evaluator overlap none / full against the list schedule and CP-SAT ({args.time_limit:g} s per design)",
        [
            ("instance", "<28"),
            ("design", f"<{wd}"),
            ("tasks", ">5"),
            ("none ms", ">9.3f"),
            ("full ms", ">9.3f"),
            ("list ms", ">9.3f"),
            ("CP-SAT ms", ">9.3f"),
            ("bound ms", ">9.3f"),
            ("status", "<8"),
            ("CP/none", ">7.3f"),
            ("CP/full", ">7.3f"),
            ("list s", ">6.2f"),
            ("CP s", ">6.2f"),
        ],
    )
    print(table.rule())
    for path in args.instances:
        inst = load_instance(ROOT / path)
        name = Path(path).stem
        if inst.workload is None:
            table.note(f"{name} skipped: a demand instance (no workload to schedule)")
            print(f"{name:<28} skipped: a demand instance (no workload to schedule)")
            continue
        designs = [("heuristic (DP)", solve(inst, method="heuristic"))]
        for st in stage_strategies(inst.workload, inst.n)[: args.stages]:
            if validate_strategy(inst.workload, inst.n, st):
                continue
            designs.append((f"stages k={st.layer_degree[0]}", heuristic_for_placement(inst, strategy_to_dict(st))))
        rng = random.Random(args.seed)
        w, n = inst.workload, inst.n
        for r in range(args.random):
            for _ in range(100):  # draws that break server memory are skipped
                deg = tuple(rng.choice(layer.configs) for layer in w.layers)
                start = tuple(rng.randrange(n // k) for k in deg)
                st = Strategy(deg, start, place_blocks(w, n, deg, start))
                if not validate_strategy(w, n, st):
                    designs.append((f"random {r}", heuristic_for_placement(inst, strategy_to_dict(st))))
                    break
        for (design, sol), mb in ((d, mb) for d in designs for mb in args.micro_batches):
            label = f"{design} M={mb}" if labelled else design
            try:
                g = graph_from_solution(inst, sol, micro_batches=mb)
            except InputError as exc:  # e.g. fewer samples per replica than micro-batches
                table.note(f"{name} {label} refused: {exc}")
                print(f"{name:<28} {label:<{wd}} refused: {exc}")
                continue
            m = evaluate(inst, sol)
            none, full = m.compute_time_s + m.comm_time_s, max(m.compute_time_s, m.comm_time_s)
            t0 = time.perf_counter()
            heur = list_schedule(g)
            t_list = time.perf_counter() - t0
            ex = solve_schedule(g, time_limit_s=args.time_limit)
            for s in (heur, ex):
                bad = check_schedule(g, s) if s.has_schedule else []
                if bad:
                    raise SystemExit(f"{name} {label}: {s.method} schedule fails its check: {bad[0]}")
            mk = ex.makespan_s
            print(
                table.add(
                    name,
                    label,
                    len(g),
                    _ms(none),
                    _ms(full),
                    _ms(heur.makespan_s),
                    _ms(mk),
                    _ms(ex.bound_s),
                    ex.status,
                    mk / none if mk else None,
                    mk / full if mk else None,
                    t_list,
                    ex.wall_time_s,
                ),
                flush=True,
            )
    record.write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
