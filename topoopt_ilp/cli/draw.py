"""``topoopt draw``: a solution's topology, or the alternating method's convergence, as a picture."""

from __future__ import annotations

import argparse
import os
from typing import Any

from topoopt_ilp.errors import EXIT_OK, InputError

__all__ = ["add_subcommand", "run"]


def add_subcommand(sub: Any) -> argparse.ArgumentParser:
    """Register ``draw`` on ``sub`` (what ``ArgumentParser.add_subparsers`` returned)."""
    p = sub.add_parser(
        "draw",
        help="draw a solution's topology (PNG/SVG/PDF)",
        description="Circular layout; links coloured by circulant jump, model-parallel links dashed.",
    )
    p.add_argument("solution", metavar="SOLUTION")
    p.add_argument("-o", "--output", "--out", dest="output", required=True, metavar="FILE.png")
    p.add_argument("--title", default=None)
    p.add_argument(
        "--what",
        choices=("topology", "convergence"),
        default="topology",
        help="topology (default) or the per-round convergence of --method alternating",
    )
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from topoopt_ilp.core.solution import Topology
    from topoopt_ilp.draw import draw_topology
    from topoopt_ilp.files import check_writable, load_solution, write_atomic

    if os.path.splitext(args.output)[1].lower() not in (".png", ".svg", ".pdf"):
        raise InputError(f"-o needs a .png, .svg or .pdf file name, got {args.output!r}")
    check_writable(args.output, "-o", {"solution": args.solution}, "the drawing")
    sol = load_solution(args.solution)
    if args.what == "convergence":
        from topoopt_ilp.draw import draw_convergence

        if not sol.details.get("rounds"):
            raise InputError(
                "the solution has no rounds to plot (only --method alternating records them)", source=args.solution
            )
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
        if isinstance(sol.details.get("all_to_all_jumps"), list):  # beside the rings' jumps (heuristic)
            jumps = sorted({*jumps, *(int(j) for j in sol.details["all_to_all_jumps"])})
    # directed: as the file states it, else when the matrix is not symmetric (an undirected one is)
    directed = bool(sol.topology.stated_directed) or bool(np.any(sol.topology.matrix != sol.topology.matrix.T))
    mp = None
    if sol.details.get("mp_links"):
        mp = Topology.from_links(sol.topology.n, sol.details["mp_links"], directed).matrix
    title = args.title or (
        f"{os.path.basename(args.solution)}: {sol.topology.n} servers"
        + (" (directed links)" if directed else "")
        + f", method {sol.method}"
    )
    write_atomic(
        args.output,
        lambda tmp: draw_topology(sol.topology.matrix, tmp, jumps=jumps, n_mp_links=mp, title=title, directed=directed),
    )
    print(f"wrote {args.output}")
    return EXIT_OK
