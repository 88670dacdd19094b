"""``topoopt compare``: every method and back-end on one instance, side by side."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from topoopt_ilp.cli.arguments import comparison_arguments, native_options, split_list
from topoopt_ilp.cli.output import ProgressBar, print_text
from topoopt_ilp.errors import EXIT_ERROR, EXIT_INFEASIBLE, EXIT_NO_SOLUTION, EXIT_OK, InputError

__all__ = ["add_subcommand", "run"]


def add_subcommand(sub: Any) -> argparse.ArgumentParser:
    """Register ``compare`` on ``sub`` (what ``ArgumentParser.add_subparsers`` returned)."""
    p = sub.add_parser(
        "compare",
        help="compare methods and back-ends on one instance",
        description="Solve with each method (exact: with each back-end); print status, objective, bound, gap, "
        "time, and each result's distance from the proven optimum (or from the best bound).",
    )
    p.add_argument("instance", metavar="INSTANCE")
    comparison_arguments(p)
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    from topoopt_ilp.core.instance import degree_one_refusal
    from topoopt_ilp.experiments.compare import compare, format_rows
    from topoopt_ilp.files import load_instance

    inst = load_instance(args.instance)
    methods, backends = methods_and_backends(args)
    refusal = degree_one_refusal(inst)
    if refusal:  # every method would refuse it: bad input, not a table of error rows (exit 1)
        raise InputError(refusal, source=args.instance, field="cluster.degree")
    bar = None
    if args.format == "table" and sys.stderr.isatty():  # a bar for a person waiting, never for a script
        bar = ProgressBar("compare", total=0)
    try:
        rows = compare(
            inst,
            methods,
            backends,
            args.time_limit,
            seed=args.seed,
            native_options=native_options(args.solver_option, backends),
            search_moves=args.search_moves,
            progress=None if bar is None else (lambda done, total, what: bar.step(done, what, total=total)),
            solver_progress=bar,
        )
    finally:
        if bar is not None:
            bar.close()
    print_text(format_rows(inst, rows, args.format))
    code = rows_exit(rows)
    if code != EXIT_OK:
        print(f"error: {no_solution_reason(code, rows)}", file=sys.stderr)
    return code


def no_solution_reason(code: int, rows: list[Any]) -> str:
    """What compare or one instance of a sweep says when it exits non-zero (``code`` from
    :func:`rows_exit` of ``rows``): a run where every method stopped with an error says so, rather
    than that its solutions failed verification."""
    if code == EXIT_NO_SOLUTION:
        return "no method found a solution within its limits"
    if code == EXIT_ERROR and rows and all(r.status == "error" for r in rows):
        return "every method stopped with an error (the rows' notes say why)"
    return "no method found a solution that passes verification" + (
        " (proven infeasible)" if code == EXIT_INFEASIBLE else ""
    )


def methods_and_backends(args: argparse.Namespace) -> tuple[list[str] | None, list[str]]:
    """compare's and sweep's --methods (None: the defaults) and --backends, refused when empty."""
    methods = None
    if args.methods is not None:
        methods = split_list(args.methods)
        if not methods:
            raise InputError(f"--methods {args.methods!r}: no methods given (e.g. heuristic,exact)")
    backends = split_list("highs" if args.backends is None else args.backends)
    wanted = methods if methods is not None else ["exact"]  # every default set of methods runs exact
    for option, given in (("--backends", args.backends is not None), ("--solver-option", bool(args.solver_option))):
        if "exact" not in wanted and given:  # as solve refuses options its method ignores
            raise InputError(f"{option} applies to the exact method, which --methods {args.methods} does not run")
    if "exact" in wanted and not backends:
        raise InputError(f"--backends {args.backends!r}: no backends given for the exact method (e.g. highs)")
    return methods, backends


def rows_exit(rows: list[Any]) -> int:
    """Exit code of compare (and of each instance of a sweep), from its CompareRows: 0 when some
    method found a solution that passes verification, 3 when none did and a method proved the
    instance infeasible, 4 when every method reached its limit without a solution (every row
    ``no_solution``), else 1."""
    if any(r.status in ("optimal", "feasible") and r.verified is not False for r in rows):
        return EXIT_OK
    if any(r.status == "infeasible" for r in rows):
        return EXIT_INFEASIBLE
    return EXIT_NO_SOLUTION if rows and all(r.status == "no_solution" for r in rows) else EXIT_ERROR
