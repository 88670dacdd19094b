"""The joint placement + topology + routing MILP on small workloads (n = 6..10), against TopoOpt.

For every instance of ``small_workloads.py``: the TopoOpt-style heuristic (data-parallel start,
TopologyFinder on its traffic), the alternating decomposition (with TopologyFinder, and with the
exact topology MILP as its topology step), and the joint MILP (``--method exact``:
warm-started by the alternating method, whose time is included in its wall time). Printed: each
method's iteration time (checked against the independent evaluator), the joint MILP's status, time,
bound and gap, and the ratio of the heuristic's iteration time to the optimum (how much TopoOpt's
rule leaves on the table).

    .venv/bin/python benchmarks/joint_small.py [--time-limit 600] [--instances NAME,...] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass

from small_workloads import small_instances

from topoopt_ilp.evaluate import evaluate, objective_value
from topoopt_ilp.models.common import ExactOptions
from topoopt_ilp.models.joint import solve_joint
from topoopt_ilp.solve import finalize, solve
from topoopt_ilp.verify import verify


@dataclass
class Row:
    instance: str
    n: int
    heuristic_ms: float
    heuristic_s: float
    alternating_ms: float
    alternating_s: float
    alternating_exact_ms: float
    alternating_exact_s: float
    joint_status: str
    joint_ms: float
    joint_bound_ms: float | None
    joint_gap: float | None
    joint_s: float
    checked: bool


def _timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def run(names: list[str] | None, time_limit: float) -> list[Row]:
    rows = []
    for name, inst in small_instances().items():
        if names and name not in names:
            continue
        heur, th = _timed(lambda: solve(inst, method="heuristic"))
        alt, ta = _timed(lambda: solve(inst, method="alternating"))
        alx, tx = _timed(lambda: solve(inst, method="alternating", topology_method="exact", round_time_limit_s=10.0))
        joint, tj = _timed(lambda: finalize(inst, solve_joint(inst, ExactOptions(time_limit_s=time_limit))))
        ok = all(verify(inst, s).valid and abs(objective_value(inst, evaluate(inst, s)) - s.objective) <= 1e-9 * s.objective
                 for s in (heur, alt, alx, joint))
        rows.append(Row(name, inst.n, heur.objective * 1e3, th, alt.objective * 1e3, ta, alx.objective * 1e3, tx,
                        joint.status, joint.objective * 1e3,
                        None if joint.bound is None else joint.bound * 1e3, joint.gap, tj, ok))
        print(f"  done {name}: joint {joint.status} in {tj:.1f} s", flush=True)
    return rows


def print_joint(rows: list[Row]) -> None:
    hdr = (f"{'instance':<20} {'n':>3} {'heur_ms':>8} {'joint_ms':>9} {'bound_ms':>9} {'gap':>7} {'status':>8} "
           f"{'joint_s':>8} {'heur/opt':>8} {'checked':>7}")
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        bound = "-" if r.joint_bound_ms is None else f"{r.joint_bound_ms:.3f}"
        gap = "-" if r.joint_gap is None else f"{r.joint_gap:.2%}"
        print(f"{r.instance:<20} {r.n:>3} {r.heuristic_ms:>8.3f} {r.joint_ms:>9.3f} {bound:>9} {gap:>7} {r.joint_status:>8} "
              f"{r.joint_s:>8.1f} {r.heuristic_ms / r.joint_ms:>8.2f} {str(r.checked):>7}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=600.0, help="seconds for each joint solve")
    ap.add_argument("--instances", default="", help="comma-separated names (default: all)")
    ap.add_argument("--json", default=None, help="also write the rows here")
    args = ap.parse_args()
    rows = run([s for s in args.instances.split(",") if s] or None, args.time_limit)
    print(f"\njoint MILP (HiGHS, gap 1e-4, {args.time_limit:g} s limit incl. its alternating warm start) vs TopoOpt's heuristic")
    print_joint(rows)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump([r.__dict__ for r in rows], fh, indent=1)


if __name__ == "__main__":
    main()
