"""The exact placement MILP on the 128-server paper instances (DLRM 64 tables, BERT), to a 1% gap.

For each instance, on TopoOpt's heuristic topology for the data-parallel start: the evaluator's
iteration time of that start, then a ladder of solves with a 1% relative gap and a time limit each,
every stage warm-started (and its exact bound pruning tightened) by the best strategy so far:

* ``starts=S`` - the model restricted to S evenly spaced coset starts per degree (a heuristic
  restriction: its gap is relative to the restricted optimum only);
* ``all``      - the unrestricted exact model (its bound is a valid bound for the instance), or the
  refusal message when it is above the size limit even after pruning.

Printed per stage: status, wall time (= time to the 1% gap when the status is optimal), iteration
time of the returned strategy (checked against the independent evaluator), bound, gap, model size,
and the ratio to the data-parallel start.

    .venv/bin/python benchmarks/placement_scale.py [--time-limit 120] [--starts 1,2,4]
                                                 [--instances dlrm-128-d8,bert-128-d8]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from topoopt_ilp import io
from topoopt_ilp.errors import UnsupportedError
from topoopt_ilp.evaluate import evaluate
from topoopt_ilp.models.common import ExactOptions
from topoopt_ilp.models.placement import solve_placement
from topoopt_ilp.solution import Solution, Topology
from topoopt_ilp.solve import solve, start_placement

ROOT = Path(__file__).resolve().parent.parent


def _fmt(v, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=120.0, help="seconds per stage")
    ap.add_argument("--starts", default="1,2,4", help="restricted stages (starts per degree), then the full model")
    ap.add_argument("--instances", default="dlrm-128-d8,bert-128-d8")
    ap.add_argument("--gap", type=float, default=0.01)
    args = ap.parse_args()
    stages: list[int | None] = [int(s) for s in args.starts.split(",") if s] + [None]
    print(f"placement MILP, HiGHS, gap {args.gap:.0%}, time limit {args.time_limit:g} s per stage; "
          f"topology = TopoOpt heuristic for the data-parallel start; shortest-path routing")
    hdr = (f"{'instance':<12} {'stage':>8} {'status':>11} {'time_s':>7} {'iter_ms':>8} {'bound_ms':>8} {'gap':>7} "
           f"{'vs_dp':>6} {'eval_ok':>7} {'vars':>6} {'nnz':>9} {'opts':>5} {'pairs':>6}")
    for name in args.instances.split(","):
        inst = io.load_instance(ROOT / "instances" / "paper" / f"{name}.json")
        X = solve(inst, method="heuristic").topology.matrix
        dp = evaluate(inst, Solution(status="feasible", method="given", topology=Topology(X),
                                     placement=start_placement(inst)), routing="shortest_path").iteration_time_s
        print(f"\n{name}: data-parallel start iteration time {dp * 1e3:.3f} ms")
        print(hdr)
        print("-" * len(hdr))
        best = None
        for s in stages:
            label = "all" if s is None else f"starts={s}"
            started = time.perf_counter()
            try:
                sol = solve_placement(inst, ExactOptions(time_limit_s=args.time_limit, gap=args.gap), X,
                                      max_starts=s, start=best)
            except UnsupportedError as exc:
                print(f"{name:<12} {label:>8} {'refused':>11} {time.perf_counter() - started:7.1f}  {exc}")
                continue
            wall = time.perf_counter() - started
            det = sol.details
            if not sol.has_solution:
                print(f"{name:<12} {label:>8} {sol.status:>11} {wall:7.1f}")
                continue
            ev = evaluate(inst, sol, routing="shortest_path").iteration_time_s
            ok = abs(ev - sol.objective) <= 1e-6 * ev
            if s is None:
                status, bound, gap = sol.status, sol.bound, sol.gap
            else:
                status, bound, gap = f"r-{det['restricted_status']}", det["restricted_bound_s"], det["restricted_gap"]
            print(f"{name:<12} {label:>8} {status:>11} {wall:7.1f} {sol.objective * 1e3:8.3f} "
                  f"{_fmt(None if bound is None else bound * 1e3, '8.3f')} {_fmt(gap, '7.2%')} {sol.objective / dp:6.3f} "
                  f"{str(ok):>7} {det['variables']:>6} {det['nonzeros']:>9,} {det['options']:>5} {det['pairs']:>6}")
            best = sol.placement
        print("(r-optimal / r-feasible: status of the restricted model; its bound holds for the restriction only)")


if __name__ == "__main__":
    main()
