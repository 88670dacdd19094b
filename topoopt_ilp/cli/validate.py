"""``topoopt validate``: check an instance file and print a summary."""

from __future__ import annotations

import argparse
from typing import Any

from topoopt_ilp.errors import EXIT_OK

__all__ = ["add_subcommand", "run"]


def add_subcommand(sub: Any) -> argparse.ArgumentParser:
    """Register ``validate`` on ``sub`` (what ``ArgumentParser.add_subparsers`` returned)."""
    p = sub.add_parser(
        "validate", help="check an instance file", description="Check an instance file; print a summary."
    )
    p.add_argument("instance", metavar="INSTANCE")
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    from topoopt_ilp.files import load_instance

    inst = load_instance(args.instance)
    c = inst.cluster
    dm = inst.demand
    if dm is not None:
        what = f"{len(dm.allreduce)} AllReduce group(s), {len(dm.mp)} MP pair(s)" + (
            f", all-to-all {dm.all_to_all:g} B" if dm.all_to_all else ""
        )
        if inst.compiled_job is not None:
            job = inst.compiled_job
            what = (
                f"job {job.job.model.name} {job.job.parallelism} on {c.accelerators_per_server} accelerator(s) a server "
                f"(compute {job.compute_s:.4g} s, bubble {job.bubble_s:.4g} s, scale-up {job.scale_up_s:.4g} s): "
                + what
            )
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
