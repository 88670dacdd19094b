"""Job instances of the large-language-model zoo (:mod:`topoopt_ilp.jobs.zoo`): ``topoopt generate
llama3-70b --servers 128 --degree 8 --bandwidth 400`` writes one (docs/guide/llm-jobs.md).

The cluster is HGX-class: servers of ``g = 8`` H100 SXM accelerators joined by NVLink 4, 900 GB/s
per accelerator in both directions together, so 450 GB/s = 3600 Gbps each way (NVIDIA H100
Tensor Core GPU datasheet), and ``d`` scale-out interfaces of the given bandwidth. The job trains
with the zoo's global batch (:data:`~topoopt_ilp.jobs.zoo.GLOBAL_BATCH`), bf16 with Adam (12 bytes
of optimizer state per parameter), ZeRO stage 1 and FlashAttention (full activation recomputation
with ``recompute=True``), 80 GB per accelerator. Its
parallelisation is the one the search of a job section picks (:mod:`topoopt_ilp.core.job_section`),
written out so that the file loads without searching; ``search=True`` writes ``"search"`` instead.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from topoopt_ilp.core.instance import Cluster, Instance, JobSpec
from topoopt_ilp.files.instance_file import instance_to_dict
from topoopt_ilp.jobs.job import Parallelism
from topoopt_ilp.jobs.zoo import GLOBAL_BATCH, LLM_ZOO, SOURCES

__all__ = ["LLM_MODELS", "NVLINK4_GBPS", "HGX_ACCELERATORS", "generate_job", "llm_filename"]

LLM_MODELS = tuple(LLM_ZOO)
#: NVLink 4 of one H100 SXM, one direction: 450 GB/s (900 GB/s both ways, NVIDIA H100 datasheet).
NVLINK4_GBPS = 3600.0
HGX_ACCELERATORS = 8


def llm_filename(model: str, servers: int, degree: int, bandwidth_gbps: float) -> str:
    return f"{model}-{servers}-d{degree}-{bandwidth_gbps:g}g.json"


def generate_job(
    model: str,
    servers: int,
    degree: int,
    bandwidth_gbps: float,
    *,
    accelerators_per_server: int = HGX_ACCELERATORS,
    scale_up_gbps: float = NVLINK4_GBPS,
    batch: int | None = None,
    parallelism: Parallelism | None = None,
    search: bool = False,
    recompute: bool = False,
) -> dict[str, Any]:
    """A job instance dict for the zoo model ``model`` (module docstring). ``parallelism``: a fixed
    split (default: the search's choice); ``search``: leave ``"search"`` in the file. Raises
    :class:`~topoopt_ilp.errors.InputError` for a bad cluster or split, and
    :class:`~topoopt_ilp.errors.NoFeasibleParallelisationError` when no split fits memory."""
    cluster = Cluster(
        servers=servers,
        degree=degree,
        link_bandwidth_gbps=bandwidth_gbps,
        accelerators_per_server=accelerators_per_server,
        scale_up_gbps_per_accelerator=scale_up_gbps,
    )
    spec = JobSpec(
        model=model,
        global_batch=GLOBAL_BATCH.get(model, 0) if batch is None else batch,
        parallelism="search" if parallelism is None else parallelism,
        recompute=recompute,
    )
    instance = Instance(cluster=cluster, job=spec)
    if parallelism is None and not search:
        chosen = instance.compiled_job.job.parallelism
        instance = Instance(cluster=cluster, job=replace(spec, parallelism=chosen))
    g = accelerators_per_server
    data = instance_to_dict(
        Instance(
            cluster=cluster,
            job=instance.job,
            name=llm_filename(model, servers, degree, bandwidth_gbps).removesuffix(".json"),
            description=f"{model} on {servers} servers x {g} accelerators, d = {degree} x {bandwidth_gbps:g} Gbps; "
            f"model: {SOURCES[model]}; parallelisation: "
            + ("searched when loaded" if search else f"{instance.compiled_job.job.parallelism}"),
        )
    )
    return data
