"""Valid documents of every format the tool reads, for the fuzz suite to start from: the shipped
instances and LIBRA problems, instances with the optional sections no shipped one holds, LIBRA's
own input files, and solutions and a schedule the tool writes (made once per run)."""

from __future__ import annotations

import functools
import json
import tempfile
from pathlib import Path

from conftest import INSTANCES
from topoopt_ilp.cli import main


def _json(path: Path) -> dict:
    return json.loads(path.read_text())


#: The optional sections no shipped instance holds: the format guide's full example, with the MP
#: traffic once as pairs and once as a matrix.
FULL_INSTANCE = {
    "format": "topoopt-instance",
    "version": 1,
    "cluster": {"servers": 8, "degree": 4, "link_bandwidth_gbps": 100, "hop_latency_us": 1.0},
    "demand": {
        "allreduce": [{"members": "all", "bytes": 50e6}, {"members": [0, 2, 4, 6], "bytes": 10e6}],
        "mp": {"pairs": [[0, 1, 30e6], [2, 5, 20e6]]},
        "all_to_all": 0,
    },
    "fixed_topology": {"jumps": [1, 3]},
    "solver": {"backend": "highs", "time_limit_s": 60, "gap": 0.0001, "threads": 1},
    "cost": {
        "transceiver_usd": {"100": 250, "400": 900},
        "nic_port_usd": {"10": 400},
        "switch_port_usd": {"10": 500},
        "patch_panel_port_usd": 80,
        "ocs_port_usd": 500,
    },
}
MATRIX_INSTANCE = {
    **FULL_INSTANCE,
    "demand": {"mp": {"matrix": [[0.0 if i == j else 1e6 * (i + j) for j in range(8)] for i in range(8)]}},
    "fixed_topology": {"links": [[k, (k + 1) % 8, 2] for k in range(8)]},
}
#: A job section with every optional field, on servers with a scale-up domain: an inline MoE model
#: with multi-head latent attention (docs/guide/instance-format.md, **job**).
JOB_INSTANCE = {
    "format": "topoopt-instance",
    "version": 1,
    "cluster": {**FULL_INSTANCE["cluster"], "accelerators_per_server": 2, "scale_up_gbps_per_accelerator": 800},
    "job": {
        "model": {
            "name": "tiny-moe",
            "layers": 4,
            "hidden": 64,
            "ffn": 256,
            "heads": 4,
            "kv_heads": 2,
            "head_dim": 16,
            "vocab": 100,
            "seq_len": 16,
            "moe": {
                "experts": 4,
                "top_k": 2,
                "expert_ffn": 32,
                "shared_experts": 1,
                "first_dense_layers": 1,
                "layer_step": 1,
            },
            "mla": {
                "q_lora_rank": 8,
                "kv_lora_rank": 8,
                "qk_nope_head_dim": 8,
                "qk_rope_head_dim": 4,
                "v_head_dim": 8,
            },
        },
        "global_batch": 8,
        "parallelism": {"tp": 2, "pp": 2, "dp": 4, "ep": 2, "micro_batch": 1},
        "precision_bytes": 2,
        "grad_bytes": 2,
        "optimizer_bytes": 12,
        "zero_stage": 1,
        "device_tflops": 1,
        "efficiency": 0.5,
        "memory_gb": 80,
    },
}
#: The job above with an expert-load section of every form: one matrix for all MoE layers, one per
#: MoE layer (3 of them), and a Zipf-generated set (docs/guide/llm-jobs.md, **Expert load**).
EXPERT_LOAD_INSTANCE = {
    **JOB_INSTANCE,
    "job": {
        **JOB_INSTANCE["job"],
        "expert_load": [
            {"matrix": [[4, 2, 1, 1], [0.5, 3, 2, 2.5]]},
            {"layers": [[[1, 1, 1, 1], [2, 0, 0, 2]], [[3, 1, 0, 0], [1, 1, 1, 1]], [[0, 0, 4, 4], [1, 2, 3, 4]]]},
            {"zipf": 1.2, "scenarios": 2, "seed": 3},
        ],
        "expert_scenario": 1,
    },
}
INSTANCE_DOCS = {
    "full.json": FULL_INSTANCE,
    "matrix.json": MATRIX_INSTANCE,
    "job.json": JOB_INSTANCE,
    "expert-load.json": EXPERT_LOAD_INSTANCE,
    **{p.name: _json(p) for p in sorted(INSTANCES.glob("*.json")) + sorted(INSTANCES.glob("paper/*.json"))},
}
LIBRA_DOCS = {p.name: _json(p) for p in sorted((INSTANCES / "libra").glob("*.json"))}
LIBRA_FORMAT = INSTANCES / "libra" / "libra-format"


#: Instances whose solutions cover every solution field: rings, offset routes, paths, a placement,
#: MP links, and (exact, time-limited) a bound and a gap.
SOLVED = {
    "mix-8": ["--method", "exact", "--time-limit", "3"],
    "dlrm-mini-6": [],
    "coprime-circulant-32": [],
    "all-to-all-16": [],
    "fixed-ring-8": [],
}


_SCRATCH = tempfile.TemporaryDirectory(prefix="topoopt-fuzz-")  # removed when the run ends


@functools.cache
def solution_files() -> dict[str, Path]:
    """Instance name -> a solution file the tool wrote for it (made once per run)."""
    out = {}
    for name, options in SOLVED.items():
        path = Path(_SCRATCH.name) / f"{name}.solution.json"
        assert main(["solve", str(INSTANCES / f"{name}.json"), "--out", str(path), "--quiet", *options]) == 0
        out[name] = path
    return out


def solutions() -> dict[str, dict]:
    """Instance name -> a fresh copy of its solution's JSON."""
    return {name: _json(path) for name, path in solution_files().items()}


@functools.cache
def schedule_files() -> tuple[str, str]:
    """A heuristic schedule of dlrm-mini-6's heuristic design: (the solution file, the schedule file)."""
    solution = Path(_SCRATCH.name) / "dlrm-mini-6.solution.json"
    sched = Path(_SCRATCH.name) / "dlrm-mini-6.schedule.json"
    instance = str(INSTANCES / "dlrm-mini-6.json")
    assert main(["solve", instance, "--out", str(solution), "--quiet"]) == 0
    assert main(["schedule", instance, str(solution), "--method", "heuristic", "-o", str(sched)]) == 0
    return str(solution), str(sched)


@functools.cache
def collective_schedule_files() -> tuple[str, str, str]:
    """A greedy AllReduce schedule of mix-8's heuristic design, 2 chunks per server (it holds partial
    sums): (the instance, the solution file, the schedule file)."""
    solution = Path(_SCRATCH.name) / "mix-8.solution.json"
    sched = Path(_SCRATCH.name) / "mix-8.collective.json"
    instance = str(INSTANCES / "mix-8.json")
    assert main(["solve", instance, "--method", "heuristic", "--out", str(solution), "--quiet"]) == 0
    argv = ["collective", instance, str(solution), "--collective", "allreduce", "--bytes", "1e6", "--chunks", "2"]
    assert main([*argv, "--method", "heuristic", "-o", str(sched)]) == 0
    return instance, str(solution), str(sched)
