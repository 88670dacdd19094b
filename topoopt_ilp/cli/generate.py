"""``topoopt generate``: a paper-sized workload instance (DLRM, BERT, ...)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from topoopt_ilp.cli.arguments import int_at_least, pos_float, pos_int
from topoopt_ilp.errors import EXIT_OK, InputError
from topoopt_ilp.files.zoo import MODELS

__all__ = ["add_subcommand", "run"]


def add_subcommand(sub: Any) -> argparse.ArgumentParser:
    """Register ``generate`` on ``sub`` (what ``ArgumentParser.add_subparsers`` returned)."""
    p = sub.add_parser(
        "generate",
        help="write a paper-sized workload instance (DLRM, BERT, ...)",
        description="Generate a workload instance at the sizes TopoOpt evaluated; each file says where its "
        "numbers come from.",
    )
    p.add_argument("model", choices=sorted(MODELS), metavar="MODEL", help=", ".join(sorted(MODELS)))
    p.add_argument("--servers", type=lambda text: int_at_least(text, 2), required=True)
    p.add_argument("--degree", type=pos_int, required=True)
    p.add_argument("--bandwidth", type=pos_float, required=True, metavar="GBPS")
    p.add_argument("--batch", type=pos_int, default=None, help="global batch (default: the model's paper setting)")
    p.add_argument(
        "--compute-model",
        choices=("busiest_server", "critical_path"),
        default=None,
        help="the workload's compute_model (default busiest_server: pipelines pay no bubble; "
        "critical_path: they pay it)",
    )
    p.add_argument(
        "-o", "--output", "--out", dest="output", default=None, metavar="FILE.json", help="write here (default: print)"
    )
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
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
        data["workload"] = {
            **head,
            "compute_model": args.compute_model,
            **{k: w[k] for k in ("layers", "blocks") if k in w},
        }
    if args.output is not None:
        write_json_atomic(args.output, data)
        print(f"wrote {args.output}: {data.get('name', args.model)}")
    else:
        print(json.dumps(data, indent=1))
    return EXIT_OK
