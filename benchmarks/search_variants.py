"""Settings of the placement's local search compared seed by seed under one move budget.

With ``ExactOptions.search_moves`` every run does the same work however loaded the machine is, so
two settings differ only by what they search, and two runs of the same setting and seed agree (runs
may go side by side). Per variant and seed: :func:`solve_placement`'s iteration time; per variant
the mean. A variant sets keyword defaults of
:func:`~topoopt_ilp.models.placement.local_search.improve_strategy` for both of solve_placement's calls
(``kick_top=N``, ``max_stall=N``, ``exact_blocks=off``; ``default`` changes nothing).

    .venv/bin/python benchmarks/search_variants.py [--instance dlrm-128-d8] [--moves 18000] [--seeds 0,1,2,3]
                                                   [--variants default,kick_top=4,kick_top=16,exact_blocks=off]
"""

from __future__ import annotations

import argparse
import time

from _args import int_list, load_paper, paper_name, seconds
from _results import Record, add_out_argument

from topoopt_ilp.methods import solve
from topoopt_ilp.models.common import ExactOptions
from topoopt_ilp.models.placement import milp as pl

SETTINGS = {"kick_top": int, "max_stall": int, "exact_blocks": lambda v: v not in ("off", "false", "0")}


def _variant(variant: str) -> tuple[str, dict]:
    """``default`` or ``KEY=VALUE`` of :data:`SETTINGS`: the name and the keyword arguments it sets."""
    if variant == "default":
        return variant, {}
    key, eq, value = variant.partition("=")
    if not eq or key not in SETTINGS:
        raise argparse.ArgumentTypeError(
            f"unknown variant {variant!r}; use default or {', '.join(k + '=...' for k in SETTINGS)}"
        )
    try:
        return variant, {key: SETTINGS[key](value)}
    except ValueError:
        raise argparse.ArgumentTypeError(f"variant {variant!r}: {value!r} is not a value of {key}") from None


def _variants(text: str) -> list[tuple[str, dict]]:
    return [_variant(v) for v in text.split(",") if v]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instance", type=paper_name, default="dlrm-128-d8")
    ap.add_argument("--moves", type=int, default=18000)
    ap.add_argument("--seeds", type=int_list, default="0,1,2,3")
    ap.add_argument("--variants", type=_variants, default="default,kick_top=4,kick_top=16,exact_blocks=off")
    ap.add_argument("--safety", type=seconds, default=900.0, help="time limit of each run (the safety net)")
    add_out_argument(ap)
    args = ap.parse_args()
    record = Record(args)
    seeds, variants = args.seeds, args.variants
    inst = load_paper(args.instance)
    X = solve(inst, method="heuristic").topology.matrix
    search = pl.improve_strategy
    table = record.table(
        f"{args.instance}: solve_placement, {args.moves} moves per run (time limit {args.safety:g} s as the "
        "safety net); iteration time (ms) per seed",
        [("variant", "<18")] + [(f"seed {s}", ">9.3f") for s in seeds] + [("mean", ">9.3f"), ("wall_s", ">7.1f")],
    )
    print(table.title)
    print(table.header())
    for name, settings in variants:
        pl.improve_strategy = lambda *a, _s=settings, **k: search(*a, **{**k, **_s})
        got, t0, cut = [], time.perf_counter(), False
        try:
            for seed in seeds:
                sol = pl.solve_placement(
                    inst, ExactOptions(time_limit_s=args.safety, gap=0.01, search_moves=args.moves, seed=seed), X
                )
                got.append(sol.objective * 1e3)
                cut |= bool(sol.details.get("local_search_timed_out"))
        finally:
            pl.improve_strategy = search
        line = table.add(name, *got, sum(got) / len(got), time.perf_counter() - t0)
        if cut:
            line += "  (" + table.note(f"{name}: the time limit cut a search") + ")"
        print(line, flush=True)
    record.write()


if __name__ == "__main__":
    main()
