"""LLM jobs: the split, its mapping and the topology chosen together, against rail networks tuned alike.

Every shipped LLM job instance of ``instances/llm/`` (without an expert-load section) at 128 and 512
servers, its split searched (``parallelism: "search"``, the file's training settings kept):

* **heuristic**: the ``--candidates`` best-ranked splits, each designed with TopoOpt's heuristic and
  scored by the evaluator, the fastest kept (``methods.job_split.pick_split_by_heuristic``, as
  ``topoopt generate --pick heuristic``);
* **alternating**: ``topoopt solve --method alternating`` (``methods.job_alternating``): from that
  pick, the mapping and the topology in turn, for the best splits;
* **rail-optimised** and **rail-only**: every split that fits, each scored by the evaluator on the
  equal-cost rail network (``evaluate --architecture ... --equal-cost``), the fastest kept
  (``methods.job_split.best_split_on_architecture``): each network with the split that suits it.

Per job and method: the split, the iteration time and its parts (compute, pipeline bubble,
scale-up, and the network communication; TP, PP, DP and EP: each kind's traffic alone on the design,
shortest paths, DP on the design's rings, so they need not add up to the communication), wall and
CPU time (the two design methods each from a cold ranking cache, the rail networks reusing it); then the speed-ups over the tuned rail networks.
``--chart PATH`` draws the iteration times as a PNG.

Usage: python benchmarks/llm_jobs.py [--instances FILE,...] [--candidates 8] [--time-limit 120]
       [--chart docs/benchmarks/llm-jobs.png] [--quick] [--out [PATH]]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from pathlib import Path

from _args import ROOT, instance_files, seconds
from _results import Record, add_out_argument

from topoopt_ilp.core.instance import Demand, Instance, with_job_choice
from topoopt_ilp.core.job_section import forget_rankings
from topoopt_ilp.core.routes import Routing
from topoopt_ilp.core.solution import Solution
from topoopt_ilp.evaluation.evaluate import evaluate
from topoopt_ilp.files.instance_file import load_instance
from topoopt_ilp.methods import solve
from topoopt_ilp.methods.job_split import (
    best_split_on_architecture,
    heuristic_job_design,
    pick_split_by_heuristic,
    split_instance,
)

RAILS = ("rail_optimised", "rail_only")
QUICK = "instances/llm/llama3-70b-128-d8-400g.json"


def shipped_jobs() -> list[str]:
    """The shipped job instances at 128 and 512 servers without an expert-load section."""
    out = []
    for path in sorted((ROOT / "instances" / "llm").glob("*.json")):
        inst = load_instance(path)
        if inst.job is not None and not inst.job.expert_load and inst.n in (128, 512):
            out.append(str(path))
    return sorted(out, key=lambda p: (load_instance(p).n, Path(p).name))


def kind_times(instance: Instance, sol: Solution) -> dict[str, float]:
    """Each kind's inter-server traffic alone on ``sol``'s topology (DP on its rings; shortest paths)."""
    job = instance.compiled_job
    out = {}
    parts = {"dp": Demand(allreduce=instance.demand.allreduce), **{k: Demand(mp=p) for k, p in job.mp_by_kind}}
    for kind in ("tp", "pp", "dp", "ep"):
        demand = parts[kind]
        if demand.is_empty:
            out[kind] = 0.0
            continue
        alone = Instance(cluster=instance.cluster, demand=demand, objective="comm_time")
        rings = sol.routing.rings if kind == "dp" else Routing().rings
        scored = Solution(status="feasible", method="given", topology=sol.topology, routing=Routing(rings=rings))
        out[kind] = float(evaluate(alone, scored, routing="shortest_path").comm_time_s)
    return out


def timed(run, cold: bool = True):
    if cold:  # the ranking of the splits is cached per job: each method pays for its own
        forget_rankings()
    wall, cpu = time.perf_counter(), time.process_time()
    result = run()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--instances", type=instance_files, default=None, help="job instance files (default: shipped)")
    ap.add_argument("--candidates", type=int, default=8, help="best-ranked splits the heuristic designs (8)")
    ap.add_argument("--time-limit", type=seconds, default=120.0, help="the alternating method's budget (120 s)")
    ap.add_argument("--rail-candidates", type=int, default=None, help="splits scored on the rails (default all)")
    ap.add_argument("--chart", default=None, help="draw the iteration times as a PNG here")
    ap.add_argument("--quick", action="store_true", help=f"one job ({QUICK}), 2 candidates, 1 round: for the tests")
    add_out_argument(ap)
    args = ap.parse_args()
    if args.quick:
        args.instances = args.instances or [str(ROOT / QUICK)]
        args.candidates, args.rail_candidates = 2, args.rail_candidates or 4
    paths = args.instances or shipped_jobs()
    record = Record(args)
    parts = record.table(
        "iteration time and its parts (seconds per iteration; TP, PP, DP, EP: each kind alone on the design)",
        [
            ("job", "<30"),
            ("method", "<12"),
            ("split", "<22"),
            ("iteration_s", ">11.4f"),
            ("compute_s", ">9.3f"),
            ("bubble_s", ">8.3f"),
            ("scale_up_s", ">10.3f"),
            ("comm_s", ">7.3f"),
            ("tp_s", ">6.3f"),
            ("pp_s", ">6.3f"),
            ("dp_s", ">6.3f"),
            ("ep_s", ">6.3f"),
            ("wall_s", ">7.1f"),
            ("cpu_s", ">6.1f"),
        ],
    )
    print(parts.header())
    rows = []
    for path in paths:
        name = Path(path).stem
        given = load_instance(path)
        searched = replace(given, job=replace(given.job, parallelism="search", server_map=None), demand=None)
        scores, wall, cpu = timed(lambda: pick_split_by_heuristic(searched, args.candidates))
        pick = split_instance(searched, scores[0].parallelism)
        designs = {"heuristic": (pick, heuristic_job_design(pick), wall, cpu)}
        rounds = 1 if args.quick else 5
        alt, wall, cpu = timed(lambda: solve(searched, "alternating", time_limit_s=args.time_limit, rounds=rounds))
        designs["alternating"] = (with_job_choice(searched, alt.job), alt, wall, cpu)
        times = {}
        for method, (inst, sol, wall, cpu) in designs.items():
            j, m, k = inst.compiled_job, sol.metrics, kind_times(inst, sol)
            times[method] = m["iteration_time_s"]
            print(
                parts.add(
                    name, method, str(j.job.parallelism), m["iteration_time_s"], j.compute_s, j.bubble_s,
                    j.scale_up_s, m["comm_time_s"], k["tp"], k["pp"], k["dp"], k["ep"], wall, cpu,
                )
            )  # fmt: skip
        for rail in RAILS:
            tuned, wall, cpu = timed(
                lambda: best_split_on_architecture(searched, rail, candidates=args.rail_candidates)
            )
            inst = split_instance(searched, tuned[0].parallelism)
            j = inst.compiled_job
            times[rail] = tuned[0].iteration_time_s
            comm = times[rail] - j.fixed_time_s
            print(
                parts.add(
                    name, rail, str(j.job.parallelism), times[rail], j.compute_s, j.bubble_s, j.scale_up_s, comm,
                    None, None, None, None, wall, cpu,
                )
            )  # fmt: skip
        rows.append((name, given.n, times))
    speed = record.table(
        "speed-up of the direct-connect design over the equal-cost rail networks, each with its own best split",
        [
            ("job", "<30"),
            ("heuristic_s", ">11.4f"),
            ("alternating_s", ">13.4f"),
            ("rail_optimised_s", ">16.4f"),
            ("rail_only_s", ">11.4f"),
            ("vs_rail_optimised", ">17.3f"),
            ("vs_rail_only", ">12.3f"),
        ],
    )
    print(speed.header())
    for name, _, t in rows:
        print(
            speed.add(
                name, t["heuristic"], t["alternating"], t["rail_optimised"], t["rail_only"],
                t["rail_optimised"] / t["alternating"], t["rail_only"] / t["alternating"],
            )
        )  # fmt: skip
    record.ratios["least_speedup_over_rail_optimised"] = min(t["rail_optimised"] / t["alternating"] for *_, t in rows)
    record.ratios["least_speedup_over_rail_only"] = min(t["rail_only"] / t["alternating"] for *_, t in rows)
    record.ratios["alternating_over_heuristic_max"] = max(t["alternating"] / t["heuristic"] for *_, t in rows)
    if args.chart:
        chart(rows, args.chart)
    record.write()


def chart(rows, path: str) -> None:
    """Grouped bars: each job's iteration time per method, relative to the alternating design."""
    import matplotlib  # start-up time: only with --chart

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # start-up time: only with --chart

    methods = ("heuristic", "alternating", "rail_optimised", "rail_only")
    labels = {"heuristic": "TopoOpt heuristic", "alternating": "alternating", "rail_optimised": "rail-optimised",
              "rail_only": "rail-only"}  # fmt: skip
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(rows) + 2), 4))
    width = 0.8 / len(methods)
    for k, method in enumerate(methods):
        values = [t[method] / t["alternating"] for *_, t in rows]
        ax.bar([i + (k - 1.5) * width for i in range(len(rows))], values, width, label=labels[method])
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([name for name, *_ in rows], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("iteration time / alternating design's")
    ax.axhline(1.0, color="black", linewidth=0.6)
    ax.legend(fontsize=8)
    ax.set_title("LLM jobs: each network with its own best split (equal cost)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
