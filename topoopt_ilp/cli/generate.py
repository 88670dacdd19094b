"""``topoopt generate``: a paper-sized workload instance (DLRM, BERT, ...) or a job instance of a
large language model (GPT-3, Llama-3, Mixtral, DeepSeek-V3; docs/guide/llm-jobs.md)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from topoopt_ilp.cli.arguments import int_at_least, pos_float, pos_int
from topoopt_ilp.errors import EXIT_OK, InputError
from topoopt_ilp.files.llm_zoo import LLM_MODELS
from topoopt_ilp.files.zoo import MODELS

__all__ = ["add_subcommand", "run"]


def add_subcommand(sub: Any) -> argparse.ArgumentParser:
    """Register ``generate`` on ``sub`` (what ``ArgumentParser.add_subparsers`` returned)."""
    p = sub.add_parser(
        "generate",
        help="write a paper-sized workload instance (DLRM, BERT, ...) or an LLM job instance (Llama-3, ...)",
        description="Generate a workload instance at the sizes TopoOpt evaluated, or a job instance of a "
        "large language model (a job section: the model, its training and its tp x pp x dp x ep split); "
        "each file says where its numbers come from.",
    )
    models = sorted(MODELS) + list(LLM_MODELS)
    p.add_argument("model", choices=models, metavar="MODEL", help=", ".join(models))
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
    llm = p.add_argument_group("LLM job instances (" + ", ".join(LLM_MODELS) + ")")
    llm.add_argument("--gpus-per-server", type=pos_int, default=8, metavar="G", help="accelerators per server (8)")
    llm.add_argument(
        "--scale-up-gbps",
        type=pos_float,
        default=3600.0,
        metavar="GBPS",
        help="scale-up bandwidth per accelerator, one direction (3600: NVLink 4)",
    )
    for name in ("tp", "pp", "dp", "ep", "micro-batch"):
        llm.add_argument(f"--{name}", type=pos_int, default=None, help=f"fixed {name} (give tp, pp and dp together)")
    llm.add_argument("--recompute", action="store_true", help="full activation recomputation (less memory)")
    llm.add_argument(
        "--pick",
        choices=("bound", "heuristic"),
        default="bound",
        help="how the split is chosen: the search's topology-free bound (default), or the evaluator on "
        "TopoOpt's heuristic design of each of the --candidates best-ranked splits",
    )
    llm.add_argument(
        "--candidates", type=pos_int, default=8, metavar="K", help="splits designed and scored by --pick heuristic (8)"
    )
    llm.add_argument(
        "--search",
        action="store_true",
        help="write parallelism 'search' (chosen when the file is loaded) instead of the search's choice",
    )
    p.add_argument(
        "-o", "--output", "--out", dest="output", default=None, metavar="FILE.json", help="write here (default: print)"
    )
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    from topoopt_ilp.files import check_writable
    from topoopt_ilp.files.zoo import generate

    if args.output is not None:
        check_writable(args.output, "-o")
    if args.model in LLM_MODELS:
        return _write(args, _llm_job(args))
    if (
        args.search
        or args.recompute
        or any(getattr(args, k) is not None for k in ("tp", "pp", "dp", "ep", "micro_batch"))
    ):
        raise InputError(
            f"--tp, --pp, --dp, --ep, --micro-batch, --search and --recompute are for LLM jobs, not {args.model}"
        )

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
    return _write(args, data)


def _llm_job(args: argparse.Namespace) -> dict:
    from topoopt_ilp.files.llm_zoo import generate_job
    from topoopt_ilp.jobs.job import Parallelism

    if args.compute_model is not None:
        raise InputError("--compute-model is a workload's; an LLM job's compute follows from its model")
    degrees = {k: getattr(args, k) for k in ("tp", "pp", "dp", "ep", "micro_batch") if getattr(args, k) is not None}
    parallelism = None
    if degrees:
        if not {"tp", "pp", "dp"} <= set(degrees) or args.search:
            raise InputError("a fixed split needs --tp, --pp and --dp together (and no --search)")
        parallelism = Parallelism(**degrees)
    if args.pick == "heuristic" and (parallelism is not None or args.search):
        raise InputError("--pick heuristic chooses the split: give no --tp/--pp/--dp and no --search")

    def job(parallelism=None, search=False) -> dict:
        return generate_job(
            args.model,
            args.servers,
            args.degree,
            args.bandwidth,
            accelerators_per_server=args.gpus_per_server,
            scale_up_gbps=args.scale_up_gbps,
            batch=args.batch,
            parallelism=parallelism,
            search=search,
            recompute=args.recompute,
        )

    if args.pick == "bound":
        return job(parallelism, args.search)
    from topoopt_ilp.files.instance_file import parse_instance
    from topoopt_ilp.methods.job_split import pick_split_by_heuristic

    scores = pick_split_by_heuristic(parse_instance(job(search=True)), args.candidates)
    data = job(scores[0].parallelism)
    data["description"] += (
        f" (picked by the evaluator on the heuristic design among the {len(scores)} best-ranked splits)"
    )
    return data


def _write(args: argparse.Namespace, data: dict) -> int:
    from topoopt_ilp.files import write_json_atomic

    if args.output is not None:
        write_json_atomic(args.output, data)
        print(f"wrote {args.output}: {data.get('name', args.model)}")
    else:
        print(json.dumps(data, indent=1))
    return EXIT_OK
