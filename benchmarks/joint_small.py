"""The joint placement + topology + routing problem on small workloads (n = 6..10), against TopoOpt.

For every instance of ``small_workloads.py``: the TopoOpt-style heuristic (data-parallel start,
TopologyFinder on its traffic), the alternating decomposition (with TopologyFinder, and with the
exact topology MILP as its topology step - the default up to 12 servers - at 10 s per step), the
joint MILP (``--formulation milp``) and the default exact method (``--formulation auto``: the
strategy enumeration when its bounds leave few strategies, else the joint MILP); both exact runs are
warm-started by the alternating method, whose time is included in their wall time. Printed: each
method's iteration time (checked against the independent evaluator), each exact run's status, time,
bound and gap, and the ratio of the heuristic's iteration time to the best proven design (how much
TopoOpt's rule leaves on the table).

    .venv/bin/python benchmarks/joint_small.py [--time-limit 600] [--instances NAME,...] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass

from _args import seconds
from _results import Record, Table, add_out_argument
from small_workloads import small_instances, small_names

from topoopt_ilp.evaluation.evaluate import evaluate, objective_value
from topoopt_ilp.evaluation.verify import verify
from topoopt_ilp.methods import METHODS, finalize, solve
from topoopt_ilp.methods.alternating import alternating_incumbent
from topoopt_ilp.models import solve_exact
from topoopt_ilp.models.common import ExactOptions


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
    exact_algorithm: str
    exact_status: str
    exact_ms: float
    exact_bound_ms: float | None
    exact_s: float
    checked: bool

    @property
    def best_ms(self) -> float:
        """The best design either exact run found."""
        return min(self.joint_ms, self.exact_ms)

    @property
    def bound_ms(self) -> float:
        """The best bound either exact run proved (= best_ms when one of them is optimal)."""
        return max(b for b in (self.joint_bound_ms, self.exact_bound_ms, 0.0) if b is not None)

    @property
    def proven(self) -> bool:
        return self.best_ms <= self.bound_ms * (1 + 1e-4) + 1e-12


def _timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def _warm_up_solver_worker() -> None:
    """Solve a one-variable MIP with a time limit, so the worker process that time-limited solves run
    in is up before anything is timed (its cold start, 1-2 s, would fall on whichever method ran first)."""
    from topoopt_ilp.solvers import ModelBuilder
    from topoopt_ilp.solvers import solve as solver_solve

    b = ModelBuilder()
    x = b.add_variables(1, ub=1.0, kind="integer")
    b.set_objective([x[0]], [1.0])
    solver_solve(b.build(), backend="highs", time_limit_s=10.0)


def run(names: list[str] | None, time_limit: float) -> list[Row]:
    rows = []
    for name, inst in small_instances().items():
        if names and name not in names:
            continue
        # again per instance: the guard kills the worker of a solve that overruns its limit, and the
        # next method timed would pay for a new one
        _warm_up_solver_worker()
        heur, th = _timed(lambda: solve(inst, method="heuristic"))
        alt, ta = _timed(lambda: solve(inst, method="alternating", topology_method="finder"))
        alx, tx = _timed(lambda: solve(inst, method="alternating", topology_method="exact", round_time_limit_s=10.0))
        starts = {"heuristic": METHODS["heuristic"], "incumbent": alternating_incumbent}  # as topoopt solve passes them
        joint, tj = _timed(
            lambda: finalize(
                inst, solve_exact(inst, ExactOptions(time_limit_s=time_limit, formulation="milp"), **starts)
            )
        )
        exact, te = _timed(lambda: finalize(inst, solve_exact(inst, ExactOptions(time_limit_s=time_limit), **starts)))
        ok = all(
            verify(inst, s).valid and abs(objective_value(inst, evaluate(inst, s)) - s.objective) <= 1e-9 * s.objective
            for s in (heur, alt, alx, joint, exact)
        )
        ms = lambda v: None if v is None else v * 1e3  # noqa: E731
        rows.append(
            Row(
                name,
                inst.n,
                heur.objective * 1e3,
                th,
                alt.objective * 1e3,
                ta,
                alx.objective * 1e3,
                tx,
                joint.status,
                joint.objective * 1e3,
                ms(joint.bound),
                joint.gap,
                tj,
                exact.details.get("algorithm", "milp"),
                exact.status,
                exact.objective * 1e3,
                ms(exact.bound),
                te,
                ok,
            )
        )
        print(
            f"  done {name}: joint MILP {joint.status} in {tj:.1f} s, exact ({rows[-1].exact_algorithm}) "
            f"{exact.status} in {te:.1f} s",
            flush=True,
        )
    return rows


JOINT_COLUMNS = [
    ("instance", "<20"),
    ("n", ">3"),
    ("heur_ms", ">8.3f"),
    "|",
    ("milp_ms", ">8.3f"),
    ("milp_bound_ms", ">8.3f"),
    ("milp_status", ">8"),
    ("milp_s", ">7.1f"),
    "|",
    ("exact_ms", ">8.3f"),
    ("exact_bound_ms", ">8.3f"),
    ("exact_status", ">8"),
    ("exact_s", ">7.1f"),
    ("algorithm", ">11"),
    "|",
    ("heur/best", ">9.2f"),
    ("checked", ">7"),
]


def print_joint(rows: list[Row], record: Record | None = None, title: str = "") -> Table:
    """Print the exact runs' table (and keep it in ``record``)."""
    table = record.table(title, JOINT_COLUMNS) if record is not None else Table(title, JOINT_COLUMNS)
    print(table.rule())
    for r in rows:
        print(
            table.add(
                r.instance,
                r.n,
                r.heuristic_ms,
                r.joint_ms,
                r.joint_bound_ms,
                r.joint_status,
                r.joint_s,
                r.exact_ms,
                r.exact_bound_ms,
                r.exact_status,
                r.exact_s,
                r.exact_algorithm,
                r.heuristic_ms / r.best_ms,
                r.checked,
            )
        )
    return table


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=seconds, default=600.0, help="seconds for each joint solve")
    ap.add_argument("--instances", type=small_names, default="", help="comma-separated names (default: all)")
    ap.add_argument("--json", default=None, help="also write the rows here")
    add_out_argument(ap)
    args = ap.parse_args()
    record = Record(args)
    rows = run(args.instances or None, args.time_limit)
    title = (
        f"joint MILP and default exact method (HiGHS, gap 1e-4, {args.time_limit:g} s limit each, incl. the alternating "
        "warm start) vs TopoOpt's heuristic"
    )
    print(f"\n{title}")
    print_joint(rows, record, title)
    record.write()
    if args.json:
        with open(args.json, "w") as fh:
            json.dump([r.__dict__ for r in rows], fh, indent=1)


if __name__ == "__main__":
    main()
