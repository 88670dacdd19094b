"""The ``topoopt`` command line: a thin layer over the public API (design §6).

Exit codes: 0 solved (optimal or feasible) or valid, 1 anything else (including a solution that
fails verification), 2 bad input or usage, 3 proven infeasible, 4 limit reached without a solution.
Errors are one line on stderr, never a traceback (set TOPOOPT_DEBUG=1 to see one).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import re
import signal
import sys
import threading
from typing import Any, Sequence

from topoopt_ilp.errors import EXIT_BAD_INPUT, EXIT_ERROR, EXIT_INFEASIBLE, EXIT_INTERRUPTED, EXIT_NO_SOLUTION, EXIT_OK, InputError, TopoOptError

from topoopt_ilp.cli.arguments import int_at_least, nonneg_float, nonneg_int, pos_float, pos_int, solution_output_arguments, threads
from topoopt_ilp.cli.output import STATUS_EXIT, fmt_time, metrics_lines, print_json, print_round, print_solution

__all__ = ["main", "build_parser"]

class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error in one line (plus the usage) with exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        # "argument --seed: must be an integer >= 0, got -1" reads better as "--seed must be ...".
        match = re.fullmatch(r"argument (-[\w-]+(?:/-[\w-]+)?): (must .*)", message, flags=re.S)
        if match:
            message = f"{match.group(1)} {match.group(2)}"
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


# ----------------------------------------------------------------------------------------------
# Commands
# ----------------------------------------------------------------------------------------------
def _cmd_validate(args: argparse.Namespace) -> int:
    from topoopt_ilp.files import load_instance

    inst = load_instance(args.instance)
    c = inst.cluster
    dm = inst.demand
    if dm is not None:
        what = (f"{len(dm.allreduce)} AllReduce group(s), {len(dm.mp)} MP pair(s)"
                + (f", all-to-all {dm.all_to_all:g} B" if dm.all_to_all else ""))
    else:
        w = inst.workload
        what = f"workload: {len(w.layers)} layer(s), {len(w.blocks)} block(s), batch {w.batch_size}"
    print(
        f"{args.instance}: valid - {c.servers} servers, degree {c.degree}, {c.link_bandwidth_gbps:g} Gbps {c.links} links, "
        + what
        + f"; objective {inst.objective}, family {inst.topology_family}"
        + ("; fixed topology" if inst.fixed_topology else "")
    )
    from topoopt_ilp.core.instance import degree_one_refusal

    refusal = degree_one_refusal(inst)
    if refusal:  # a valid file (a switched network still evaluates it), but no method designs for it
        print(f"note: the design methods refuse it: {refusal}; evaluate --architecture still scores it")
    return EXIT_OK


def _cmd_verify(args: argparse.Namespace) -> int:
    from topoopt_ilp.files import load_instance, load_solution
    from topoopt_ilp.evaluation.verify import verify

    inst = load_instance(args.instance)
    sol = load_solution(args.solution, directed=inst.cluster.directed)
    report = verify(inst, sol)
    if report.valid and not sol.has_solution:  # consistent, but there is no design to use
        print(f"{args.solution}: holds no design (status {sol.status}, method {sol.method}): nothing to verify")
        return EXIT_ERROR
    if report.valid:
        print(f"{args.solution}: valid for {args.instance} ({sol.status}, method {sol.method})")
        return EXIT_OK
    print(f"{args.solution}: {len(report.violations)} violation(s) against {args.instance}:")
    for v in report.violations:
        print(f"  - {v}")
    return EXIT_ERROR


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from topoopt_ilp.evaluation.evaluate import evaluate
    from topoopt_ilp.files import load_instance, load_solution
    from topoopt_ilp.core.solution import Topology

    inst = load_instance(args.instance)
    if args.architecture:
        from topoopt_ilp.evaluation.architectures import evaluate_architecture

        placement = load_solution(args.solution, directed=inst.cluster.directed).placement if args.solution else None
        sm = evaluate_architecture(inst, args.architecture, oversubscription=args.oversubscription,
                                   rack_size=args.rack_size, placement=placement, server_bandwidth_gbps=args.bandwidth,
                                   equal_cost=args.equal_cost).as_dict()
        if args.json:
            print_json(sm)
        else:
            label = sm["architecture"] + (f" 1:{sm['oversubscription']:g}, racks of {sm['rack_size']}"
                                          if sm["architecture"] == "fat_tree" else "")
            if sm["equal_cost"]:
                per_server = (f"{sm['server_bandwidth_gbps']:.4g} Gbps per server (equal cost to {inst.d} x "
                              f"{inst.cluster.link_bandwidth_gbps:g} Gbps direct connect: {sm['cost_usd']:,.0f} USD)")
            elif args.bandwidth is not None:
                per_server = f"{sm['server_bandwidth_gbps']:.4g} Gbps per server"
            else:
                per_server = f"{inst.d} x {inst.cluster.link_bandwidth_gbps:g} Gbps per server"
            print(f"{label} with {per_server}, on {args.instance}:")
            print(f"  iteration time     {fmt_time(sm['iteration_time_s'])}"
                  + (f"  (compute {fmt_time(sm['compute_time_s'])})" if sm["compute_time_s"] else ""))
            print(f"  comm time          {fmt_time(sm['comm_time_s'])}  (bandwidth {fmt_time(sm['bandwidth_time_s'])}"
                  f" + latency {fmt_time(sm['latency_time_s'])})")
            print(f"  busiest port       {fmt_time(sm['server_port_time_s'])}; busiest rack uplink "
                  f"{fmt_time(sm['rack_uplink_time_s'])}")
        return EXIT_OK
    if args.oversubscription != 1.0 or args.rack_size is not None or args.equal_cost or args.bandwidth is not None:
        raise InputError("--oversubscription, --rack-size, --equal-cost and --bandwidth go with --architecture")
    if args.solution:
        from topoopt_ilp.evaluation.verify import direction_mismatch

        target = load_solution(args.solution, directed=inst.cluster.directed)
        if not target.has_solution and inst.fixed_topology is None:
            raise InputError(f"holds no design (status {target.status}): nothing to evaluate", source=args.solution)
        mismatch = direction_mismatch(inst, target)
        if mismatch:
            raise InputError(f"the solution does not match the instance: {mismatch}", source=args.solution)
        what = args.solution
    else:
        if inst.fixed_topology is None:
            raise InputError("the instance has no fixed_topology; give a SOLUTION file to evaluate", source=args.instance)
        target = Topology(inst.fixed_topology_matrix(), inst.fixed_topology.jumps)
        what = "the instance's fixed topology"
    from topoopt_ilp.evaluation.evaluate import RoutingError
    from topoopt_ilp.evaluation.verify import reachability_violations as verify_reachability
    from topoopt_ilp.evaluation.verify import verify

    try:
        metrics = evaluate(inst, target, routing=args.routing).as_dict()
    except RoutingError as exc:
        # A solution made for another instance may fail inside the scoring ("no complete route");
        # the verifier names the cause ("has a placement, but this instance has no workload").
        report = verify(inst, target, check_metrics=False) if args.solution else None
        if report is not None and not report.valid:
            raise InputError(f"the solution does not match the instance: {report.violations[0]}", source=args.solution) from None
        raise InputError(f"cannot be scored: {exc.reason} (see topoopt verify)", source=args.solution or args.instance) from None
    except InputError as exc:  # after RoutingError, one of them
        if exc.source is not None:
            raise
        # about the solution's contents (its placement, a ring): name its file
        raise type(exc)(exc.reason, source=args.solution or args.instance, field=exc.field) from None
    if not args.solution and not math.isfinite(metrics["iteration_time_s"]):
        unreachable = verify_reachability(inst, target.matrix)
        if unreachable:  # scored (infinite), and why
            print(f"note: the fixed topology cannot carry the demand: {unreachable[0]}", file=sys.stderr)
    if args.solution:
        report = verify(inst, target)  # its rules and its recorded metrics (those printed below are recomputed)
        if not report.valid:  # scored anyway (that is evaluate's job), but not silently
            print(f"warning: {args.solution} fails verification ({len(report.violations)} violation(s), first: "
                  f"{report.violations[0]}); the scores are of the solution as given (see topoopt verify)", file=sys.stderr)
    if args.json:
        print_json(metrics)
    else:
        print(f"{what} on {args.instance}:")
        print("\n".join(metrics_lines(metrics)))
    return EXIT_OK


def _cmd_evaluate_paper(args: argparse.Namespace) -> int:
    from topoopt_ilp.experiments.paper import default_instance_paths, evaluate_paper, format_table, write_outputs

    paths = _split(args.instances) if args.instances else [str(p) for p in default_instance_paths()]
    if not paths:
        raise InputError("--instances lists no instance file")
    if args.out is not None:  # made and probed now: a bad directory must not cost the whole comparison
        from topoopt_ilp.files import check_writable

        if not args.out.strip():
            raise InputError(f"--out needs a directory name, got {args.out!r}")
        if os.path.exists(args.out) and not os.path.isdir(args.out):
            raise InputError("--out must be a directory", source=args.out)
        try:
            os.makedirs(args.out, exist_ok=True)
        except OSError as exc:
            raise InputError(f"cannot make directory {args.out}: {exc.strerror or exc}") from None
        check_writable(os.path.join(args.out, "architectures.csv"), "--out")
    progress = None if args.quiet else (lambda msg: print(msg, file=sys.stderr, flush=True))
    results = evaluate_paper(paths, progress=progress, time_limit_s=args.time_limit, rounds=args.rounds,
                             round_time_limit_s=args.round_time_limit, rack_size=args.rack_size, seed=args.seed)
    if not args.quiet:
        print(format_table(results, args.format))
    if args.out is not None:
        for path in write_outputs(results, args.out, title=args.title):
            if not args.quiet:
                print(f"wrote {path}", file=sys.stderr)
    return EXIT_OK


def _solver_options(args: argparse.Namespace, inst) -> dict[str, Any]:
    """Options for --method exact; CLI flags override the instance's ``solver`` defaults."""
    s = inst.solver
    backend = args.backend or s.backend or "highs"
    return {
        "backend": backend,
        "time_limit_s": args.time_limit if args.time_limit is not None else s.time_limit_s,
        "gap": args.gap if args.gap is not None else s.gap,
        "threads": args.threads if args.threads is not None else s.threads,
        "warm_start": args.warm_start,
        "export_model": args.export_model,
        "seed": args.seed,
        "formulation": args.formulation,
        "rings": args.rings,
        "search_moves": args.search_moves,
        "native_options": _native_options(args.solver_option, [backend]),
    }


def _native_options(given: list[str] | None, backends: list[str]) -> dict[str, dict[str, Any]] | None:
    """``--solver-option BACKEND.NAME=VALUE`` flags as ``{backend: {name: value}}``; a value reads as
    a bool (true/false), an int or a float when it is one, else as text. Each must name a backend
    that runs (the Python API ignores other backends' entries; on a command line one is a mistake)."""
    if not given:
        return None
    out: dict[str, dict[str, Any]] = {}
    for item in given:
        key, eq, text = item.partition("=")
        target, dot, name = key.partition(".")
        if not (eq and dot and target and name and text):
            raise InputError(f"--solver-option {item!r}: expected BACKEND.NAME=VALUE, e.g. highs.presolve=off")
        if target not in backends:
            raise InputError(f"--solver-option {item!r} is for {target}, but the solve runs on {', '.join(backends)}")
        from topoopt_ilp.solvers import BACKENDS, Capability, get_backend

        if not get_backend(target).supports(Capability.NATIVE_OPTIONS):  # refused here, not as an error row per solve
            takers = ", ".join(b.name for b in BACKENDS.values() if b.supports(Capability.NATIVE_OPTIONS))
            raise InputError(f"--solver-option {item!r}: {target} takes no native parameters ({takers} do)")
        value: Any = {"true": True, "false": False}.get(text.lower(), text)
        for kind in (int, float):
            if isinstance(value, str):
                try:
                    value = kind(text)
                except ValueError:
                    pass
        out.setdefault(target, {})[name] = value
    return out


_EXACT_ONLY = ("backend", "time_limit", "gap", "threads", "warm_start", "export_model", "formulation", "solver_option",
               "rings", "search_moves")


def _cmd_solve(args: argparse.Namespace) -> int:
    from topoopt_ilp.files import check_writable, load_instance, save_solution
    from topoopt_ilp.methods import solve
    from topoopt_ilp.evaluation.verify import verify

    inst = load_instance(args.instance)
    for key in _EXACT_ONLY:
        methods = ("exact", "alternating") if key in ("backend", "time_limit", "rings", "search_moves") else ("exact",)
        if getattr(args, key) is not None and args.method not in methods:
            raise InputError(f"--{key.replace('_', '-')} applies to --method {' or '.join(methods)}, not {args.method}")
    if args.method != "alternating" and (args.rounds is not None or args.round_time_limit is not None
                                         or args.topology_method is not None):
        raise InputError("--rounds, --round-time-limit and --topology-method apply to --method alternating only")
    if args.method not in ("heuristic", "alternating") and (args.select is not None or args.mode is not None):
        raise InputError(f"--select and --mode apply to --method heuristic or alternating, not {args.method}")
    if args.method != "baseline" and args.baseline is not None:
        raise InputError(f"--baseline applies to --method baseline, not {args.method}")
    ws = args.warm_start
    if ws is not None and ws not in ("heuristic", "none") and ("/" in ws or os.sep in ws or os.path.splitext(ws)[1]):
        # It names a file (a path or a file name with an extension): say what is wrong with it.
        if not os.path.exists(ws):
            raise InputError(f"warm start file {ws} does not exist")
        if os.path.isdir(ws):
            raise InputError(f"warm start file {ws} is a directory")
    # Output paths are checked before solving: a typo must not cost the whole solve.
    if args.out is not None:
        check_writable(args.out, "--out", {"instance": args.instance}, "the solution")
    if args.export_model is not None:
        check_writable(args.export_model, "--export-model")
    if args.method == "exact":
        options = _solver_options(args, inst)
    else:
        options = {"seed": args.seed if args.seed is not None else 0}
        if args.method in ("heuristic", "alternating"):
            options.update(select=args.select or "geometric", mode=args.mode or "paper")
        if args.method == "baseline":
            options.update(baseline=args.baseline or "expander")
        if args.method == "alternating":
            options.update(rounds=args.rounds if args.rounds is not None else 5,
                           round_time_limit_s=args.round_time_limit if args.round_time_limit is not None else 30.0,
                           time_limit_s=args.time_limit, backend=args.backend,  # None: the instance's, else default
                           topology_method=args.topology_method or "auto", rings=args.rings or "shortest",
                           search_moves=args.search_moves)
            if not (args.quiet or args.json):
                options["progress"] = print_round
    try:
        sol = solve(inst, method=args.method, **options)
    except InputError as exc:
        if exc.source is None and exc.field is not None:  # about the instance's contents: name its file
            raise type(exc)(exc.reason, source=args.instance, field=exc.field) from None
        raise
    if args.reroute and sol.has_solution:
        from topoopt_ilp.cli.route import DEFAULT_TIME_LIMIT_S
        from topoopt_ilp.methods.reroute import route

        sol = route(inst, sol, time_limit_s=DEFAULT_TIME_LIMIT_S)
    report = verify(inst, sol) if sol.has_solution else None
    # a run that found nothing does not replace a file that holds something (a design, an earlier record)
    kept = args.out is not None and sol.status == "no_solution" and os.path.exists(args.out)
    written = args.out is not None and not kept and (sol.has_solution or sol.status in ("infeasible", "no_solution"))
    if written:
        save_solution(sol, args.out, directed=inst.cluster.directed, instance_name=os.path.basename(args.instance))
    if kept:
        print(f"{args.out}: not replaced, no solution was found; it keeps what it held", file=sys.stderr)
    if args.json:
        from topoopt_ilp.files import solution_to_dict

        print_json(solution_to_dict(sol, directed=inst.cluster.directed, instance_name=os.path.basename(args.instance)))
    elif not args.quiet:
        print_solution(args, inst, sol, report, written)
    if report is not None and not report.valid:
        print(f"error: the solution failed verification: {report.violations[0]}", file=sys.stderr)
        return EXIT_ERROR
    return STATUS_EXIT[sol.status]


def _with_newline(text: str) -> str:
    """A table, CSV or JSON text with exactly one final newline (CSV already ends with one)."""
    return text if text.endswith("\n") else text + "\n"


def _print_text(text: str) -> None:
    print(_with_newline(text), end="")


def _split(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def _cmd_compare(args: argparse.Namespace) -> int:
    from topoopt_ilp.experiments.compare import compare, format_rows
    from topoopt_ilp.core.instance import degree_one_refusal
    from topoopt_ilp.files import load_instance

    inst = load_instance(args.instance)
    methods, backends = _methods_and_backends(args)
    refusal = degree_one_refusal(inst)
    if refusal:  # every method would refuse it: bad input, not a table of error rows (exit 1)
        raise InputError(refusal, source=args.instance, field="cluster.degree")
    rows = compare(inst, methods, backends, args.time_limit, seed=args.seed,
                   native_options=_native_options(args.solver_option, backends), search_moves=args.search_moves)
    _print_text(format_rows(inst, rows, args.format))
    code = _rows_exit(rows)
    if code != EXIT_OK:
        print(f"error: {_no_solution_reason(code, rows)}", file=sys.stderr)
    return code


def _no_solution_reason(code: int, rows: list[Any]) -> str:
    """What compare or one instance of a sweep says when it exits non-zero (``code`` from
    :func:`_rows_exit` of ``rows``): a run where every method stopped with an error says so, rather
    than that its solutions failed verification."""
    if code == EXIT_NO_SOLUTION:
        return "no method found a solution within its limits"
    if code == EXIT_ERROR and rows and all(r.status == "error" for r in rows):
        return "every method stopped with an error (the rows' notes say why)"
    return "no method found a solution that passes verification" + (" (proven infeasible)" if code == EXIT_INFEASIBLE else "")


def _methods_and_backends(args: argparse.Namespace) -> tuple[list[str] | None, list[str]]:
    """compare's and sweep's --methods (None: the defaults) and --backends, refused when empty."""
    methods = None
    if args.methods is not None:
        methods = _split(args.methods)
        if not methods:
            raise InputError(f"--methods {args.methods!r}: no methods given (e.g. heuristic,exact)")
    backends = _split("highs" if args.backends is None else args.backends)
    wanted = methods if methods is not None else ["exact"]  # every default set of methods runs exact
    for option, given in (("--backends", args.backends is not None), ("--solver-option", bool(args.solver_option))):
        if "exact" not in wanted and given:  # as solve refuses options its method ignores
            raise InputError(f"{option} applies to the exact method, which --methods {args.methods} does not run")
    if "exact" in wanted and not backends:
        raise InputError(f"--backends {args.backends!r}: no backends given for the exact method (e.g. highs)")
    return methods, backends


def _rows_exit(rows: list[Any]) -> int:
    """Exit code of compare (and of each instance of a sweep), from its CompareRows: 0 when some
    method found a solution that passes verification, 3 when none did and a method proved the
    instance infeasible, 4 when every method reached its limit without a solution (every row
    ``no_solution``), else 1."""
    if any(r.status in ("optimal", "feasible") and r.verified is not False for r in rows):
        return EXIT_OK
    if any(r.status == "infeasible" for r in rows):
        return EXIT_INFEASIBLE
    return EXIT_NO_SOLUTION if rows and all(r.status == "no_solution" for r in rows) else EXIT_ERROR


def _cmd_sweep(args: argparse.Namespace) -> int:
    from concurrent.futures import ProcessPoolExecutor
    from contextlib import ExitStack
    from multiprocessing import get_context
    from pathlib import Path

    from topoopt_ilp.files import check_writable, write_atomic
    from topoopt_ilp.experiments.sweep import expand_paths, format_sweep, read_journal, sweep

    paths = expand_paths(args.paths)
    methods, backends = _methods_and_backends(args)
    if args.out is not None:
        check_writable(args.out, "--out", {"instance": paths}, "the results")
    if args.journal is not None:
        check_writable(args.journal, "--journal", {"instance": paths}, "the journal")
        if args.out is not None and os.path.realpath(args.out) == os.path.realpath(args.journal):
            raise InputError("--out and --journal name the same file; the results would overwrite the journal")
        if not args.quiet and os.path.exists(args.journal):
            print(f"{args.journal}: {len(read_journal(args.journal))} solve(s) recorded; those of this sweep are reused",
                  file=sys.stderr)
    progress = None
    if not args.quiet:
        def progress(done, total, path, row):
            what = row.method + (f" [{row.backend}]" if row.backend != "-" else "")
            value = "-" if row.objective is None else f"{row.objective:.6g}"
            print(f"[{done}/{total}] {path}: {what} {row.status} {value} ({row.time_s:.2f} s)", file=sys.stderr, flush=True)
    with ExitStack() as stack:
        executor = None
        if args.dask is not None:
            try:
                from distributed import Client, LocalCluster
            except ImportError:
                raise InputError("--dask needs Dask's distributed package: pip install 'topoopt-ilp[dask]'") from None
            if args.dask == "local":
                # silence_logs: Ctrl-C cancels the running solves, which Dask logs per task and per worker as
                # warnings and errors; a worker that really fails reaches the user as its solve's error row
                try:
                    cluster = LocalCluster(n_workers=args.jobs, threads_per_worker=1, processes=True,
                                           dashboard_address=None, silence_logs=logging.CRITICAL)
                except KeyboardInterrupt:  # while its workers start
                    _quiet_dask_shutdown()
                    raise
                stack.callback(_close_local_cluster, cluster)
                client = stack.enter_context(Client(cluster))
            else:
                try:
                    client = stack.enter_context(Client(args.dask))  # waits distributed.comm.timeouts.connect (Dask config)
                except (OSError, TimeoutError, ValueError) as exc:
                    raise InputError(f"--dask {args.dask}: cannot connect to the scheduler ({exc})") from None
            executor = client.get_executor()
        elif args.jobs > 1:
            # spawn: a forked worker would share this process's imported solver state
            executor = stack.enter_context(ProcessPoolExecutor(args.jobs, mp_context=get_context("spawn")))
        try:
            rows = sweep(paths, methods, backends, args.time_limit, seed=args.seed,
                         native_options=_native_options(args.solver_option, backends), executor=executor,
                         progress=progress, journal=args.journal, search_moves=args.search_moves)
        except KeyboardInterrupt:  # Ctrl-C or SIGTERM: stop the workers now, not after their solves
            if args.dask is not None:
                _quiet_dask_shutdown()
            if isinstance(executor, ProcessPoolExecutor):
                for proc in list((getattr(executor, "_processes", None) or {}).values()):
                    proc.terminate()
                executor.shutdown(wait=False, cancel_futures=True)
            raise
    text = format_sweep(rows, args.format)
    if args.out is not None:
        write_atomic(args.out, lambda tmp: Path(tmp).write_text(_with_newline(text)))
        if not args.quiet:
            print(f"wrote {args.out}", file=sys.stderr)
    else:
        _print_text(text)
    rows_of = {p: [r.row for r in rows if r.instance == p] for p in paths}
    codes = {p: _rows_exit(rows_of[p]) for p in paths}
    for p, code in codes.items():
        if code != EXIT_OK:
            print(f"error: {p}: {_no_solution_reason(code, rows_of[p])}", file=sys.stderr)
    return max(codes.values(), key=lambda c: (c != EXIT_OK, c == EXIT_ERROR, c == EXIT_INFEASIBLE))  # 1, 3, 4, 0


def _close_local_cluster(cluster: Any) -> None:
    """Close ``sweep --dask local``'s cluster. Interrupted while a worker (re)starts, Dask's own close
    fails an assertion: that must not turn the user's Ctrl-C into an internal error (the worker
    processes end with this one)."""
    try:
        cluster.close(timeout=10)
    except Exception:  # noqa: BLE001 - see the docstring
        pass


def _quiet_dask_shutdown() -> None:
    """An interrupted Dask sweep: the cancelled tasks and the closing nannies log warnings and
    tracebacks, and Dask's exit hook retries a close that failed and reports it as an unraisable
    exception. The user pressed Ctrl-C and gets one line, "interrupted"."""
    for name in [n for n in logging.root.manager.loggerDict if n.startswith("distributed")] + ["distributed"]:
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)
    sys.unraisablehook = lambda unraisable: None


def _cmd_generate(args: argparse.Namespace) -> int:
    from topoopt_ilp.files import check_writable, write_json_atomic
    from topoopt_ilp.files.zoo import generate

    if args.output is not None:
        check_writable(args.output, "-o")

    try:
        data = generate(args.model, args.servers, args.degree, args.bandwidth, args.batch)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    if args.compute_model not in (None, "busiest_server"):  # the default is left implicit, as in the zoo's files
        w = data["workload"]
        head = {k: v for k, v in w.items() if k not in ("layers", "blocks")}  # next to overlap, before the layers
        data["workload"] = {**head, "compute_model": args.compute_model, **{k: w[k] for k in ("layers", "blocks") if k in w}}
    if args.output is not None:
        write_json_atomic(args.output, data)
        print(f"wrote {args.output}: {data.get('name', args.model)}")
    else:
        print(json.dumps(data, indent=1))
    return EXIT_OK


def _cmd_draw(args: argparse.Namespace) -> int:
    import numpy as np

    from topoopt_ilp.draw import draw_topology
    from topoopt_ilp.files import check_writable, load_solution, write_atomic
    from topoopt_ilp.core.solution import Topology

    if os.path.splitext(args.output)[1].lower() not in (".png", ".svg", ".pdf"):
        raise InputError(f"-o needs a .png, .svg or .pdf file name, got {args.output!r}")
    check_writable(args.output, "-o", {"solution": args.solution}, "the drawing")
    sol = load_solution(args.solution)
    if args.what == "convergence":
        from topoopt_ilp.draw import draw_convergence

        if not sol.details.get("rounds"):
            raise InputError("the solution has no rounds to plot (only --method alternating records them)", source=args.solution)
        write_atomic(args.output, lambda tmp: draw_convergence(sol.details["rounds"], tmp, title=args.title))
        print(f"wrote {args.output}")
        return EXIT_OK
    if sol.topology is None:
        raise InputError("the solution has no topology to draw", source=args.solution)
    if not sol.has_solution:  # a topology, but a status that says there is no design (verify refuses it)
        raise InputError(f"the solution holds no design (status {sol.status}): nothing to draw", source=args.solution)
    jumps = sol.topology.jumps
    if jumps is None and isinstance(sol.details.get("jumps_by_group_size"), dict):
        jumps = sorted({int(j) for js in sol.details["jumps_by_group_size"].values() for j in js})
    # directed: as the file states it, else when the matrix is not symmetric (an undirected one is)
    directed = bool(sol.topology.stated_directed) or bool(np.any(sol.topology.matrix != sol.topology.matrix.T))
    mp = None
    if sol.details.get("mp_links"):
        mp = Topology.from_links(sol.topology.n, sol.details["mp_links"], directed).matrix
    title = args.title or (f"{os.path.basename(args.solution)}: {sol.topology.n} servers"
                           + (" (directed links)" if directed else "") + f", method {sol.method}")
    write_atomic(args.output, lambda tmp: draw_topology(sol.topology.matrix, tmp, jumps=jumps, n_mp_links=mp, title=title,
                                                        directed=directed))
    print(f"wrote {args.output}")
    return EXIT_OK


# ----------------------------------------------------------------------------------------------
def _comparison_arguments(p: argparse.ArgumentParser) -> None:
    """The options compare and sweep share."""
    p.add_argument("--methods", default=None,
                   help="comma-separated: heuristic, exact, alternating (workloads), baseline (default heuristic,exact; "
                        "heuristic,alternating,exact for a workload)")
    p.add_argument("--backends", default=None, help="comma-separated back-ends for exact (default highs)")
    p.add_argument("--time-limit", type=nonneg_float, default=60.0, metavar="S",
                   help="per exact solve, and the alternating method's budget (default 60)")
    p.add_argument("--seed", type=nonneg_int, default=0, help="heuristic/baseline seed (default 0)")
    p.add_argument("--solver-option", action="append", default=None, metavar="BACKEND.NAME=VALUE",
                   help="a native parameter for the exact solves on BACKEND (repeatable; highs and cbc)")
    p.add_argument("--search-moves", type=pos_int, default=None, metavar="N",
                   help="budget the placement's local search (alternating; exact on a workload with a fixed "
                        "topology) in moves, not seconds: results that do not depend on the machine or the worker")
    p.add_argument("--format", choices=("table", "json", "csv"), default="table")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="topoopt", description="Design the network of a distributed DNN training cluster: "
                "topology, routing and placement, exact (MILP) or heuristic (TopoOpt).")
    from topoopt_ilp import __version__

    p.add_argument("--version", action="version", version=f"topoopt-ilp {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    v = sub.add_parser("validate", help="check an instance file", description="Check an instance file; print a summary.")
    v.add_argument("instance", metavar="INSTANCE")
    v.set_defaults(func=_cmd_validate)

    vf = sub.add_parser("verify", help="check a solution against its instance",
                        description="Check ports, degrees, family, rings, routes and stated metrics. Exit 0 when valid, 1 with a list of violations.")
    vf.add_argument("instance", metavar="INSTANCE")
    vf.add_argument("solution", metavar="SOLUTION")
    vf.set_defaults(func=_cmd_verify)

    e = sub.add_parser("evaluate", help="score a solution (or the instance's fixed topology)",
                       description="Compute iteration time, comm time, throughput, diameter, ASPL and link utilization.")
    e.add_argument("instance", metavar="INSTANCE")
    e.add_argument("solution", metavar="SOLUTION", nargs="?", help="solution file; default: the instance's fixed_topology")
    e.add_argument("--routing", choices=("given", "shortest_path", "optimal"), default="given",
                   help="given: the solution's routes (shortest paths when it has none); shortest_path: equal split over "
                        "shortest paths; optimal: max-concurrent-flow LP (default: given)")
    e.add_argument("--json", action="store_true", help="print the metrics as JSON")
    e.add_argument("--architecture", choices=("big_switch", "fat_tree"), default=None,
                   help="score the traffic on a switched network instead (with SOLUTION: under its placement); "
                        "same bandwidth per server unless --bandwidth or --equal-cost")
    e.add_argument("--oversubscription", type=float, default=1.0, metavar="R", help="fat_tree: ToR uplink oversubscription 1:R")
    e.add_argument("--rack-size", type=pos_int, default=None, metavar="K", help="fat_tree: servers per rack (default 16)")
    e.add_argument("--equal-cost", action="store_true",
                   help="fat_tree: give each server the bandwidth at which the Fat-tree costs as much as the "
                        "direct-connect cluster (cost model: the instance's 'cost' section, else the defaults)")
    e.add_argument("--bandwidth", type=pos_float, default=None, metavar="GBPS",
                   help="with --architecture: bandwidth per server (default: degree x link bandwidth)")
    e.set_defaults(func=_cmd_evaluate)

    ep = sub.add_parser("evaluate-paper", help="TopoOpt's 128-server comparison against equal-cost Fat-trees",
                        description="For each workload instance: TopoOpt's rule (authors' mode), the alternating method, "
                                    "a random expander, the ideal switch (d x B per server) and equal-cost Fat-trees 1:1, "
                                    "1:2, 1:4, each switched baseline under its best candidate strategy. Prints iteration "
                                    "times and speedups; --out writes the table (CSV, JSON) and a bar chart (PNG).")
    ep.add_argument("--instances", default=None, metavar="FILE,FILE,...",
                    help="instance files (default: instances/paper/{dlrm,bert,candle,vgg16}-128-d{4,8}.json)")
    ep.add_argument("--time-limit", type=nonneg_float, default=100.0, metavar="S",
                    help="budget of each alternating run (default 100)")
    ep.add_argument("--rounds", type=pos_int, default=5, help="alternating: at most this many rounds (default 5)")
    ep.add_argument("--round-time-limit", type=nonneg_float, default=30.0, metavar="S",
                    help="alternating: time limit of each placement MILP (default 30)")
    ep.add_argument("--rack-size", type=pos_int, default=None, metavar="K", help="Fat-tree servers per rack (default 16)")
    ep.add_argument("--seed", type=nonneg_int, default=0, help="heuristic/expander seed (default 0)")
    ep.add_argument("-o", "--out", default=None, metavar="DIR", help="write architectures.csv, .json and .png here")
    ep.add_argument("--title", default=None, help="chart title")
    ep.add_argument("--format", choices=("table", "json", "csv"), default="table", help="what to print (default table)")
    ep.add_argument("--quiet", action="store_true", help="print nothing; with --out, only write the files")
    ep.set_defaults(func=_cmd_evaluate_paper)

    s = sub.add_parser("solve", help="design a topology (and routing) for an instance",
                       description="Solve an instance. The result is verified and scored by the independent evaluator.")
    s.add_argument("instance", metavar="INSTANCE")
    s.add_argument("--method", choices=("heuristic", "exact", "alternating", "baseline"), default="heuristic",
                   help="heuristic: TopoOpt's TopologyFinder (default); exact: MILP; alternating: placement MILP <-> "
                        "TopologyFinder rounds (workloads); baseline: a reference topology")
    s.add_argument("--rounds", type=pos_int, default=None, help="alternating: at most this many rounds (default 5)")
    s.add_argument("--round-time-limit", type=nonneg_float, default=None, metavar="S",
                   help="alternating: time limit of each placement MILP (default 30)")
    s.add_argument("--topology-method", default=None, choices=("auto", "finder", "exact"),
                   help="alternating: topology step by TopoOpt's TopologyFinder or the exact topology + routing "
                        "MILP (at most 32 servers); auto (default): exact up to 12 servers, else TopologyFinder")
    s.add_argument("--select", default=None, choices=("geometric", "best"),
                   help="heuristic: SelectPermutations rule (default geometric, TopoOpt's)")
    s.add_argument("--mode", default=None, choices=("paper", "authors"),
                   help="heuristic: follow the paper (default) or the authors' published code")
    s.add_argument("--baseline", default=None, choices=("expander", "demand_greedy", "torus"),
                   help="baseline: which reference topology (default expander)")
    s.add_argument("--backend", default=None, help="exact, alternating: solver back-end (highs, scip, cpsat, cbc; default highs)")
    s.add_argument("--time-limit", type=nonneg_float, default=None, metavar="S",
                   help="exact: time limit in seconds; alternating: overall budget")
    s.add_argument("--gap", type=nonneg_float, default=None, metavar="G", help="exact: relative gap at which the solver may stop (optimal still means within 1e-4; above it the result is feasible)")
    s.add_argument("--threads", type=threads, default=None, metavar="T", help="exact: solver threads")
    s.add_argument("--warm-start", default=None, metavar="heuristic|none|FILE", help="exact: warm start (default heuristic)")
    s.add_argument("--export-model", default=None, metavar="FILE.mps|FILE.lp", help="exact: also write the model")
    s.add_argument("--solver-option", action="append", default=None, metavar="BACKEND.NAME=VALUE",
                   help="exact: a native parameter of a solver, passed through (repeatable; highs and cbc), e.g. "
                        "highs.presolve=off; it overrides the model's own setting of it")
    s.add_argument("--formulation", default=None, metavar="NAME",
                   help="exact: the model's formulation - general topology: strong (default) or naive; circulant: "
                        "strong (default) or basic; a workload (joint problem, or placement on a fixed topology): auto (default), "
                        "milp or enumeration")
    s.add_argument("--rings", default=None, choices=("shortest", "coset"),
                   help="exact (a workload on a fixed topology), alternating: how the placement problem rings each "
                        "AllReduce group - shortest (default): split equally over its TotientPerms rings of least hop "
                        "total; coset: one ring in coset order")
    s.add_argument("--search-moves", type=pos_int, default=None, metavar="N",
                   help="exact (a workload on a fixed topology), alternating: budget the placement's local search in moves, not "
                        "seconds, so that the same seed finds the same strategy on any machine (the time limit stays "
                        "the safety net; the solution's details say when it cut the search)")
    s.add_argument("--seed", type=nonneg_int, default=None, help="random seed of the heuristic/baseline (default 0) and, "
                   "when given with --method exact, of the solver")
    s.add_argument("--reroute", action="store_true",
                   help="then route the design's traffic over the paths that minimise its busiest link (as topoopt "
                        "route does) and keep that routing when it scores better")
    solution_output_arguments(s)
    s.set_defaults(func=_cmd_solve)

    c = sub.add_parser("compare", help="compare methods and back-ends on one instance",
                       description="Solve with each method (exact: with each back-end); print status, objective, bound, gap, "
                                   "time, and each result's distance from the proven optimum (or from the best bound).")
    c.add_argument("instance", metavar="INSTANCE")
    _comparison_arguments(c)
    c.set_defaults(func=_cmd_compare)

    w = sub.add_parser("sweep", help="compare methods and back-ends on many instance files, in parallel",
                       description="The comparison of 'compare' on every instance file named (files, directories, or "
                                   "quoted glob patterns such as 'instances/**/*.json'); the solves run one after another, "
                                   "in --jobs processes, or on a Dask cluster. Every file is checked before any solve.")
    w.add_argument("paths", nargs="+", metavar="PATH", help="instance file, directory of .json files, or glob pattern")
    _comparison_arguments(w)
    w.add_argument("--jobs", type=pos_int, default=1, metavar="N",
                   help="solves at a time, in worker processes (default 1: one after another here); with --dask local, "
                        "the number of Dask workers")
    w.add_argument("--dask", default=None, metavar="ADDRESS|local",
                   help="run the solves on the Dask scheduler at ADDRESS (e.g. tcp://10.0.0.1:8786; its workers need "
                        "this package), or on a local Dask cluster of --jobs workers; needs pip install 'topoopt-ilp[dask]'")
    w.add_argument("-o", "--out", default=None, metavar="FILE", help="write the results here (atomically) instead of printing them")
    w.add_argument("--journal", default=None, metavar="FILE",
                   help="append each solve's row to FILE (JSON lines) as it ends; run again with the same FILE to "
                        "reuse the rows already there (resume an interrupted sweep)")
    w.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    w.set_defaults(func=_cmd_sweep)

    from topoopt_ilp.files.zoo import MODELS

    g = sub.add_parser("generate", help="write a paper-sized workload instance (DLRM, BERT, ...)",
                       description="Generate a workload instance at the sizes TopoOpt evaluated; each file says where its "
                                   "numbers come from.")
    g.add_argument("model", choices=sorted(MODELS), metavar="MODEL", help=", ".join(sorted(MODELS)))
    g.add_argument("--servers", type=lambda text: int_at_least(text, 2), required=True)
    g.add_argument("--degree", type=pos_int, required=True)
    g.add_argument("--bandwidth", type=pos_float, required=True, metavar="GBPS")
    g.add_argument("--batch", type=pos_int, default=None, help="global batch (default: the model's paper setting)")
    g.add_argument("--compute-model", choices=("busiest_server", "critical_path"), default=None,
                   help="the workload's compute_model (default busiest_server: pipelines pay no bubble; "
                        "critical_path: they pay it)")
    g.add_argument("-o", "--output", "--out", dest="output", default=None, metavar="FILE.json", help="write here (default: print)")
    g.set_defaults(func=_cmd_generate)

    dr = sub.add_parser("draw", help="draw a solution's topology (PNG/SVG/PDF)",
                        description="Circular layout; links coloured by circulant jump, model-parallel links dashed.")
    dr.add_argument("solution", metavar="SOLUTION")
    dr.add_argument("-o", "--output", "--out", dest="output", required=True, metavar="FILE.png")
    dr.add_argument("--title", default=None)
    dr.add_argument("--what", choices=("topology", "convergence"), default="topology",
                    help="topology (default) or the per-round convergence of --method alternating")
    dr.set_defaults(func=_cmd_draw)

    from topoopt_ilp.cli.bandwidth import add_subcommand as add_bandwidth
    from topoopt_ilp.cli.route import add_subcommand as add_route
    from topoopt_ilp.cli.schedule import add_subcommand as add_schedule

    add_bandwidth(sub)
    add_schedule(sub)
    add_route(sub)
    return p


def _terminate(signum, frame) -> None:
    raise KeyboardInterrupt  # SIGTERM ends a run the way Ctrl-C does: workers stopped, exit 130, no partial file


def main(argv: Sequence[str] | None = None) -> int:
    for stream in (sys.stdout, sys.stderr):  # a name the terminal's encoding lacks is escaped, not a crash
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    parser = build_parser()
    args = parser.parse_args(argv)
    in_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _terminate) if in_main else None
    try:
        return _run(args)
    finally:
        if in_main:
            signal.signal(signal.SIGTERM, previous)


def _run(args: argparse.Namespace) -> int:
    try:
        code = int(args.func(args))
        sys.stdout.flush()  # here, so that a closed pipe is caught below and not at exit
        return code
    except BrokenPipeError:
        # The reader left (``topoopt ... | head``): stop quietly, as Python's documentation advises;
        # stdout goes to /dev/null so that the interpreter's final flush does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_ERROR
    except TopoOptError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - the CLI promises one line, not a traceback
        if os.environ.get("TOPOOPT_DEBUG"):
            raise
        print(f"internal error: {type(exc).__name__}: {exc} (set TOPOOPT_DEBUG=1 for a traceback)", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
