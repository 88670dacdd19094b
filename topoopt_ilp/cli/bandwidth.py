"""``topoopt bandwidth``: LIBRA's per-dimension bandwidth allocation from the command line.

::

    topoopt bandwidth INSTANCE [--objective iteration_time|perf_per_cost] [--backend highs|scip|cbc]
                      [--time-limit S] [--gap G] [--out SOLUTION.json] [--json]

``INSTANCE`` is a ``topoopt-libra`` file (:mod:`topoopt_ilp.libra.problem`). The command prints a table
(dimension, kind, size, B_d, share of the budget, equal-split B_d) and the iteration time against
the equal split; ``--json`` prints the solution JSON instead; ``--out`` writes it atomically.
Exit codes (:mod:`topoopt_ilp.errors`): 0 solved (optimal or feasible), 2 bad input, 3 infeasible,
4 limit without a solution, 1 anything else. Errors are one line (``cli.main`` prints them).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from topoopt_ilp.cli.arguments import nonneg_float, pos_float
from topoopt_ilp.cli.output import STATUS_EXIT, fmt_time, keeps_earlier_out
from topoopt_ilp.errors import EXIT_ERROR, EXIT_OK

__all__ = ["add_subcommand", "run_bandwidth", "format_table"]


def add_subcommand(sub: Any) -> argparse.ArgumentParser:
    """Register ``bandwidth`` on the ``add_subparsers`` object ``sub`` of the ``topoopt`` parser."""
    b = sub.add_parser(
        "bandwidth",
        help="LIBRA: optimal bandwidth per dimension of a hierarchical network",
        description="Choose the bandwidth (GB/s per NPU) of every dimension of a multi-dimensional network "
        "(LIBRA, ISPASS 2024) to minimise the iteration time, or time x network cost, of a workload, under "
        "a budget and user constraints. Solved exactly by cutting planes over LPs; compared with the equal "
        "split of the budget.",
    )
    b.add_argument("instance", metavar="INSTANCE", help="a topoopt-libra file (see instances/libra/)")
    b.add_argument(
        "--objective",
        choices=("iteration_time", "perf_per_cost"),
        default=None,
        help="default: the file's objective (iteration_time when it names none)",
    )
    b.add_argument("--backend", default="highs", help="LP back-end: highs (default), scip or cbc")
    b.add_argument("--time-limit", type=nonneg_float, default=None, metavar="S", help="wall-clock limit in seconds")
    b.add_argument(
        "--gap",
        type=nonneg_float,
        default=None,
        metavar="G",
        help="relative gap at which the cuts stop (default 1e-6; optimal means within 1e-4, above it the result is feasible)",
    )
    b.add_argument("-o", "--out", default=None, metavar="SOLUTION.json", help="write the solution here (atomically)")
    b.add_argument("--json", action="store_true", help="print the solution as JSON")
    b.set_defaults(func=run_bandwidth)

    i = sub.add_parser(
        "import-libra",
        help="convert LIBRA's own input files (network, workload, communicator, cost model)",
        description="Write a topoopt-libra file from LIBRA's inputs (astra-sim/libra inputs/): network YAML, "
        "ASTRA-sim 1.0 workload text, communicator YAML and, optionally, cost-model YAML; with the "
        "budget (LIBRA keeps it in Python code). Then: topoopt bandwidth OUT.json",
    )
    i.add_argument("--network", required=True, metavar="NETWORK.yml")
    i.add_argument("--workload", required=True, metavar="WORKLOAD.txt")
    i.add_argument("--communicator", required=True, metavar="COMMUNICATOR.yml")
    i.add_argument("--cost-model", default=None, metavar="COST.yml", help="needed for a cost budget or perf_per_cost")
    budget = i.add_mutually_exclusive_group(required=True)
    budget.add_argument("--total-bandwidth", type=pos_float, metavar="GBPS", help="budget: sum of B_d, GB/s per NPU")
    budget.add_argument("--cost", type=pos_float, metavar="USD", help="budget: network cost in $ (needs --cost-model)")
    i.add_argument("--spend-all", action="store_true", help="the budget must be spent exactly")
    i.add_argument("--objective", choices=("iteration_time", "perf_per_cost"), default="iteration_time")
    i.add_argument(
        "--clock-ghz",
        type=pos_float,
        default=1.0,
        metavar="F",
        help="clock that turns the workload's compute cycles into time (default 1 GHz: 1 cycle = 1 ns)",
    )
    i.add_argument("--name", default="", help="the problem's name")
    i.add_argument("-o", "--out", required=True, metavar="OUT.json")
    i.set_defaults(func=run_import)
    return b


def run_import(args: argparse.Namespace) -> int:
    """The ``import-libra`` command."""
    from topoopt_ilp.files import check_writable
    from topoopt_ilp.libra.astra_import import import_libra
    from topoopt_ilp.libra.problem import save_hierarchy

    check_writable(
        args.out,
        "--out",
        {
            "network": args.network,
            "workload": args.workload,
            "communicator": args.communicator,
            "cost model": args.cost_model,
        },
        "the import",
    )
    problem = import_libra(
        args.network,
        args.workload,
        args.communicator,
        args.cost_model,
        total_bandwidth_gbps=args.total_bandwidth,
        cost_usd=args.cost,
        spend_all=args.spend_all,
        objective=args.objective,
        clock_ghz=args.clock_ghz,
        name=args.name,
    )
    save_hierarchy(problem, args.out)
    print(
        f"wrote {args.out}: {problem.num_dimensions} dimensions, {problem.num_npus} NPUs, {len(problem.layers)} layers"
    )
    return EXIT_OK


def _gbps(v: float) -> str:
    """Four decimals, or four significant digits for a bandwidth that four decimals would show as 0."""
    return f"{v:.4f}" if v == 0 or abs(v) >= 1e-3 else f"{v:.4g}"


def format_table(problem: Any, sol: Any, label: str | None = None) -> str:
    """The human-readable report of a :class:`~topoopt_ilp.models.libra.BandwidthSolution`."""
    lines = [
        f"LIBRA bandwidth allocation: {problem.name or label or 'instance'} ({problem.num_npus} NPUs, "
        f"{problem.num_dimensions} dimensions; objective {sol.objective_name})"
    ]
    status = f"status: {sol.status}"
    if sol.gap is not None:
        status += f" (gap {sol.gap:.2g}"
    else:
        status += " ("
    status += (
        f"{', ' if sol.gap is not None else ''}{sol.iterations} LP rounds, {sol.wall_time_s:.3f} s, {sol.backend})"
    )
    lines.append(status)
    if sol.message:
        lines.append(f"note: {sol.message}")
    budget = problem.budget
    if budget.kind == "total_bandwidth":
        spend = lambda bw: [v / budget.value for v in bw]  # noqa: E731
        budget_text = f"{budget.value:g} GB/s per NPU"
    else:
        w = [problem.num_npus * d.npu_unit_cost for d in problem.dimensions]
        spend = lambda bw: [wi * v / budget.value for wi, v in zip(w, bw)]  # noqa: E731
        budget_text = f"${budget.value:,.0f}"
    header = ("dimension", "kind", "size", "B_d (GB/s)", "share", "equal split")
    rows = []
    shares = spend(sol.bandwidths_gbps) if sol.bandwidths_gbps is not None else None
    for k, d in enumerate(problem.dimensions):
        b = "-" if sol.bandwidths_gbps is None else _gbps(sol.bandwidths_gbps[k])
        s = "-" if shares is None else f"{100 * shares[k]:.2f}%"
        e = "-" if sol.equal_split_gbps is None else _gbps(sol.equal_split_gbps[k])
        rows.append((d.name, d.kind, str(d.size), b, s, e))
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    right = {2, 3, 4, 5}
    fmt = lambda r: "  ".join(c.rjust(widths[i]) if i in right else c.ljust(widths[i]) for i, c in enumerate(r))  # noqa: E731
    lines.append(fmt(header))
    lines += [fmt(r) for r in rows]
    lines.append(f"budget: {budget_text}{' (spent exactly)' if budget.spend_all else ''}")
    if sol.iteration_time_s is not None:
        line = f"iteration time: {fmt_time(sol.iteration_time_s, digits=6)} (equal split {fmt_time(sol.equal_split_time_s, digits=6)}"
        if sol.speedup_vs_equal is not None:  # perf_per_cost may trade time for cost
            ratio = sol.speedup_vs_equal
            if abs(ratio - 1) < 5e-5:  # the same to the 4 digits shown ("1.0000x slower" read as a contradiction)
                line += ", the same"
            else:
                line += f", {ratio:.4f}x faster" if ratio > 1 else f", {1 / ratio:.4f}x slower"
        if sol.equal_split_feasible is False:
            line += "; the equal split breaks a constraint"
        lines.append(line + ")")
    if sol.cost_usd is not None:
        lines.append(f"network cost: ${sol.cost_usd:,.0f}")
    if sol.objective_name == "perf_per_cost" and sol.objective is not None:
        eq = sol.equal_split_objective
        lines.append(
            f"time x cost: {sol.objective:.6g} s*$ (equal split {eq:.6g})"
            if eq is not None
            else f"time x cost: {sol.objective:.6g} s*$"
        )
    if sol.bound is not None:
        unit = "s" if sol.objective_name == "iteration_time" else "s*$"
        lines.append(f"lower bound: {sol.bound:.9g} {unit}")
    return "\n".join(lines)


def run_bandwidth(args: argparse.Namespace) -> int:
    """The ``bandwidth`` command (raises :class:`InputError` for bad input; ``cli.main`` prints it)."""
    from topoopt_ilp.files import check_writable, json_safe, write_json_atomic
    from topoopt_ilp.libra.problem import load_hierarchy
    from topoopt_ilp.models.libra import DEFAULT_GAP, solve_bandwidth

    problem = load_hierarchy(args.instance)
    if args.out is not None:
        check_writable(args.out, "--out", {"instance": args.instance}, "the solution")
    sol = solve_bandwidth(
        problem,
        objective=args.objective,
        backend=args.backend,
        time_limit_s=args.time_limit,
        gap=DEFAULT_GAP if args.gap is None else args.gap,
    )
    data = json_safe(sol.to_dict(os.path.basename(args.instance)))
    if args.out is not None and not keeps_earlier_out(args.out, sol.status):
        write_json_atomic(args.out, data)
    if args.json:
        print(json.dumps(data, indent=1))
    else:
        print(format_table(problem, sol, os.path.basename(args.instance)))
    if sol.status == "infeasible":
        print(f"error: infeasible: {sol.message}", file=sys.stderr)
    elif sol.status == "no_solution":
        print(f"error: no_solution: {sol.message}", file=sys.stderr)
    elif sol.status == "error":
        print(f"error: {sol.message}", file=sys.stderr)
    return STATUS_EXIT.get(sol.status, EXIT_ERROR)
