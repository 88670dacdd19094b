"""MoE traffic that moves: one topology for a set of expert-load scenarios (docs/guide/llm-jobs.md,
**Expert load**).

A shipped MoE job instance with an expert-load section (by default the 8 Zipf scenarios of skew
1.2 of ``instances/llm/mixtral-8x7b-128-d8-400g-zipf1.2.json``; ``--zipf`` replaces the section by
``--scenarios`` generated ones from ``--seed``); ``methods.expert_scenarios.design_over_scenarios`` designs with TopologyFinder for the
element-wise maximum demand, the mean scenario and each scenario, scores every design on every
scenario with the evaluator, and the table gives per scenario the robust design's, the mean
design's and the scenario's own best iteration time, and the price of robustness (robust / own best).

Then, at small n (``--exact``, by default ``instances/moe/tiny-moe-6-d2-zipf1.5.json``; ``none``
skips it), ``exact_design_over_scenarios`` solves the exact models: each scenario's own optimum, the
mean matrix's optimal design and the robust design (least worst case), every time the evaluator's
with each scenario routed at best, so the price of robustness there is proven.

Usage: python benchmarks/moe_scenarios.py [--instance instances/llm/mixtral-8x7b-128-d8-400g-zipf1.2.json]
       [--zipf 1.2 [--scenarios 8] [--seed 0]] [--exact instances/moe/tiny-moe-6-d2-zipf1.5.json|none]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

from _results import Record, add_out_argument

from topoopt_ilp.core.job_section import ZipfLoad
from topoopt_ilp.files.instance_file import load_instance
from topoopt_ilp.methods.expert_scenarios import design_over_scenarios, exact_design_over_scenarios


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--instance", default="instances/llm/mixtral-8x7b-128-d8-400g-zipf1.2.json")
    ap.add_argument("--zipf", type=float, default=None, help="replace the instance's expert load by a Zipf set")
    ap.add_argument("--scenarios", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--exact",
        default="instances/moe/tiny-moe-6-d2-zipf1.5.json",
        help="small instance for the exact models, or none",
    )
    add_out_argument(ap)
    args = ap.parse_args()
    record = Record(args)
    instance = load_instance(args.instance)
    if args.zipf is not None:
        load = (ZipfLoad(args.zipf, args.scenarios, args.seed),)
        instance = replace(instance, job=replace(instance.job, expert_load=load), demand=None)
    sets = ", ".join(
        f"Zipf s = {e.zipf:g} x {e.scenarios} (seed {e.seed})" if isinstance(e, ZipfLoad) else "given"
        for e in instance.job.expert_load
    )
    started = time.perf_counter()
    report = design_over_scenarios(instance, seed=args.seed)
    wall = time.perf_counter() - started
    t = record.table(
        f"{instance.name or args.instance}: {sets}; robust = the '{report.names[report.robust]}' design",
        [
            ("scenario", ">8"),
            ("robust_s", ">9.4f"),
            ("mean_design_s", ">13.4f"),
            ("own_best_s", ">10.4f"),
            ("price", ">7.4f"),
        ],
    )
    print(t.header())
    for row in report.rows():
        print(t.add(row["scenario"], row["robust_s"], row["mean_design_s"], row["own_best_s"], row["price"]))
    s = record.table(
        "every candidate design over the scenarios",
        [("design", "<12"), ("worst_s", ">8.4f"), ("mean_s", ">8.4f")],
    )
    print(s.header())
    for c, name in enumerate(report.names):
        print(s.add(name, report.worst(c), report.average(c)))
    worst_price = max(report.price_of_robustness)
    print(f"price of robustness: max {worst_price:.4f}; wall {wall:.1f} s")
    record.ratios["price_of_robustness_max"] = worst_price
    record.ratios["robust_worst_over_mean_worst"] = report.worst(report.robust) / report.worst(report.mean)
    if args.exact != "none":
        exact(record, args.exact)
    record.write()


def exact(record: Record, path: str) -> None:
    """The exact models on a small instance: per scenario, proven own optimum against the robust and
    the mean designs (milliseconds)."""
    instance = load_instance(path)
    started = time.perf_counter()
    report = exact_design_over_scenarios(instance)
    wall = time.perf_counter() - started
    robust = report.designs[report.robust]
    proofs = ", ".join(sorted({d.status for d in report.designs}))
    t = record.table(
        f"exact, {instance.name}: robust design {robust.status} (gap {robust.gap:.1e}); every design {proofs}; "
        "each scenario routed at best",
        [
            ("scenario", ">8"),
            ("robust_ms", ">9.4f"),
            ("mean_design_ms", ">14.4f"),
            ("own_optimum_ms", ">14.4f"),
            ("price", ">7.4f"),
        ],
    )
    print(t.header())
    for row in report.rows():
        ms = [1e3 * row[key] for key in ("robust_s", "mean_design_s", "own_best_s")]
        print(t.add(row["scenario"], *ms, row["price"]))
    print(
        f"exact: worst case robust {1e3 * report.worst(report.robust):.4f} ms, mean design "
        f"{1e3 * report.worst(report.mean):.4f} ms; wall {wall:.1f} s"
    )
    record.ratios["exact_price_of_robustness_max"] = max(report.price_of_robustness)
    record.ratios["exact_robust_worst_over_mean_worst"] = report.worst(report.robust) / report.worst(report.mean)


if __name__ == "__main__":
    main()
