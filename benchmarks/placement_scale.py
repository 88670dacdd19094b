"""The exact placement MILP on the 128-server paper instances (DLRM 64 tables, BERT), to a 1% gap.

For each instance, on TopoOpt's heuristic topology for the data-parallel start: the evaluator's
iteration time of that start, then one :func:`solve_placement` call per variant with a 1% relative
gap and one overall time limit (local search, bound and MILP all inside it):

* ``ls=0``    - no local search: the incumbent is the best cheap candidate (data-parallel start,
  uniform degrees), as before the local search existed;
* ``ls=auto`` - iterated local search first (a quarter of the time limit, at most 30 s), its result
  the MILP's incumbent, warm start and pruning bound;
* ``ls=S``    - local search for S seconds;

each under every ring policy of ``--rings`` (column ``rings``: ``shortest``, the default, splits each
AllReduce group over its TotientPerms rings of least hop total; ``coset`` is one ring in coset order,
the model before; ``placement_data.ring_strides``). ``vs_dp`` is the ratio to the data-parallel start
scored with the same rings.

The MILP is the unrestricted model when it can be built, else the largest restriction to evenly
spaced coset starts (plus the incumbent's) that can (column ``model``: ``all`` or ``starts=S``);
when that model has more than :data:`~topoopt_ilp.models.placement.milp.MILP_SEARCH_NONZEROS` non-zeros
it is not solved and the time left goes to local search (``ls:all`` / ``ls:starts=S``, ``nnz`` the
model's size, ``ls_s`` all local-search seconds).
``bound`` is always valid for the unrestricted problem: the larger of the solver's bound of the
unrestricted model and the relaxation bounds (``relax_ms``: the volume relaxation
:func:`~topoopt_ilp.models.placement.local_search.relaxation_bound` and the chain bound
:func:`~topoopt_ilp.models.placement.bounds.chain_bound`, which took ``bnd_s`` seconds).
Printed per variant: status, wall time (= time to the 1% gap when the status is optimal), iteration
time of the returned strategy (``eval_ok``: equal to the independent evaluator's), bound, gap, ratio
to the data-parallel start, the local-search result and its time, the relaxation bounds and their
time, and model size.
Timings are wall-clock on a shared machine: compare variants within one run.

    .venv/bin/python benchmarks/placement_scale.py [--time-limit 60] [--variants ls=0,ls=auto]
                                                 [--instances dlrm-128-d8,bert-128-d8] [--gap 0.01]
                                                 [--rings shortest,coset]
"""

from __future__ import annotations

import argparse
import time

from _args import load_paper, paper_names, seconds
from _results import Record, add_out_argument

from topoopt_ilp.core.strategy import parse_strategy
from topoopt_ilp.evaluation.evaluate import evaluate
from topoopt_ilp.methods import solve, start_placement
from topoopt_ilp.models.common import ExactOptions
from topoopt_ilp.models.placement.milp import RING_POLICIES, shortest_path_fractions, solve_placement, strategy_times


def _is_variant(v: str) -> bool:
    """ls=auto or ls=SECONDS (a finite number >= 0)."""
    if not v.startswith("ls="):
        return False
    value = v.removeprefix("ls=")
    try:
        return value == "auto" or 0 <= float(value) < float("inf")
    except ValueError:
        return False


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=seconds, default=60.0, help="seconds per solve (everything included)")
    ap.add_argument("--variants", default="ls=0,ls=auto", help="comma list of ls=0 | ls=auto | ls=SECONDS")
    ap.add_argument("--instances", type=paper_names, default="dlrm-128-d8,bert-128-d8")
    ap.add_argument("--gap", type=float, default=0.01)
    ap.add_argument("--rings", default=",".join(RING_POLICIES), help="comma list of ring policies")
    add_out_argument(ap)
    args = ap.parse_args()
    record = Record(args)
    policies = args.rings.split(",")
    if unknown := set(policies) - set(RING_POLICIES):
        ap.error(f"unknown ring policy {sorted(unknown)}; choose from {', '.join(RING_POLICIES)}")
    given = [v for v in args.variants.split(",") if v]
    if bad := [v for v in given if not _is_variant(v)]:
        ap.error(f"unknown variant(s) {', '.join(bad)}: give ls=0, ls=auto or ls=SECONDS")
    variants = [v.removeprefix("ls=") for v in given]
    table = record.table(
        f"placement MILP, HiGHS, gap {args.gap:.0%}, time limit {args.time_limit:g} s per solve; "
        f"topology = TopoOpt heuristic for the data-parallel start; shortest-path routing",
        [
            ("instance", "<12"),
            ("rings", ">8"),
            ("variant", ">8"),
            ("status", ">9"),
            ("time_s", "7.1f"),
            ("iter_ms", "8.3f"),
            ("bound_ms", "8.3f"),
            ("gap", "7.2%"),
            ("vs_dp", "6.3f"),
            ("eval_ok", ">7"),
            ("ls_ms", "7.3f"),
            ("ls_s", "5.1f"),
            ("relax_ms", "8.3f"),
            ("bnd_s", "5.1f"),
            ("model", ">9"),
            ("nnz", ">9,"),
        ],
    )
    starts = record.table(
        "the data-parallel start's iteration time on each instance's heuristic topology",
        [("instance", "<12"), ("rings", ">8"), ("dp_ms", ">8.3f")],
    )
    print(table.title)
    for name in args.instances:
        inst = load_paper(name)
        X = solve(inst, method="heuristic").topology.matrix
        start = parse_strategy(start_placement(inst), inst.workload, inst.n)
        dp = {
            r: strategy_times(inst, shortest_path_fractions(X, inst.cluster.link_bytes_per_s, r), start)[
                "iteration_time_s"
            ]
            for r in policies
        }
        for r in policies:
            starts.add(name, r, dp[r] * 1e3)
        print(
            f"\n{name}: data-parallel start iteration time "
            + ", ".join(f"{dp[r] * 1e3:.3f} ms ({r} rings)" for r in policies)
        )
        print(table.rule())
        for rings, v in ((r, v) for r in policies for v in variants):
            ls = None if v == "auto" else float(v)
            started = time.perf_counter()
            sol = solve_placement(
                inst, ExactOptions(time_limit_s=args.time_limit, gap=args.gap, rings=rings), X, local_search_s=ls
            )
            wall = time.perf_counter() - started
            det = sol.details
            if not sol.has_solution:
                print(table.add(name, rings, "ls=" + v, sol.status, wall, *(None,) * 11))
                continue
            ev = evaluate(inst, sol, routing="shortest_path").iteration_time_s
            ok = abs(ev - sol.objective) <= 1e-6 * ev
            model = (
                f"starts={det['max_starts']}" if det.get("restricted") else ("all" if "variables" in det else "none")
            )
            if "skipped_model_nonzeros" in det:  # built, too large to solve in time: local search instead
                model = "ls:" + (f"starts={det['max_starts']}" if "max_starts" in det else "all")
                det = {**det, "nonzeros": det["skipped_model_nonzeros"]}
            ls_ms = det.get("local_search_iteration_time_s") if ls != 0 else None
            print(
                table.add(
                    name,
                    rings,
                    "ls=" + v,
                    sol.status,
                    wall,
                    sol.objective * 1e3,
                    None if sol.bound is None else sol.bound * 1e3,
                    sol.gap,
                    sol.objective / dp[rings],
                    ok,
                    None if ls_ms is None else ls_ms * 1e3,
                    det.get("local_search_s"),
                    det["relaxation_bound_s"] * 1e3,
                    det["relaxation_bound_time_s"],
                    model,
                    det.get("nonzeros", 0),
                ),
                flush=True,
            )
            for msg in det.get("refused", []):
                table.note(f"{name} {rings} ls={v} refused {msg[:150]}")
                print(f"{'':<12} {'':>8} refused {msg[:150]}")
    print(
        "\n"
        + table.note(
            "bound/gap: valid for the unrestricted problem (solver bound of the unrestricted model, or the "
            "relaxation bounds: volume and chain); a restricted model's own bound is in the solution's "
            "details only"
        )
    )
    record.write()


if __name__ == "__main__":
    main()
