"""Every parallelisation of a job that fits the accelerators' memory (docs/guide/llm-jobs.md).

Search space, for ``N = servers x g`` accelerators: ``tp x pp x dp = N``, ``ep | dp``, and the
micro-batch size ``b`` with ``dp b | global_batch`` (so ``m = global_batch / (dp b)``). Pruning,
each rule exact unless marked:

1. ``tp`` divides the heads and the KV heads and is at most ``max_tp`` (default ``g``: tensor
   parallelism stays inside a server, Narayanan et al. 2021's rule; pass ``max_tp=N`` to lift it);
2. ``pp <= layers``; ``dp | global_batch``; ``ep`` divides the experts and ``dp`` (1 for dense);
3. the micro-batch sizes of one ``(tp, pp, dp, ep)`` are tried in increasing order and the first
   that does not fit ends the scan: the memory of a stage, ``static + b min(pp - p, G/(dp b)) c``
   = ``static + min(b (pp - p), G/dp) c``, never decreases as ``b`` grows (``static`` does not
   depend on ``b``; ``c`` is the activation memory per sequence and layer set). So every size
   above the first failure fails too.

When no candidate fits, :class:`~topoopt_ilp.errors.NoFeasibleParallelisationError` (exit 3) says
so, with the least memory any candidate needs.
"""

from __future__ import annotations

import math

from topoopt_ilp.errors import InputError, NoFeasibleParallelisationError
from topoopt_ilp.jobs.iteration import stage_memory
from topoopt_ilp.jobs.job import Parallelism, ParallelJob, Training
from topoopt_ilp.jobs.model import TransformerModel

__all__ = ["divisors", "feasible_parallelisations", "peak_memory"]


def divisors(n: int) -> list[int]:
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def peak_memory(job: ParallelJob) -> float:
    """The most bytes any accelerator of ``job`` holds."""
    return max(stage_memory(job, p).total for p in range(job.parallelism.pp))


def feasible_parallelisations(
    model: TransformerModel,
    training: Training,
    servers: int,
    hbm_bytes: float,
    *,
    max_tp: int | None = None,
) -> list[ParallelJob]:
    """Every ``(tp, pp, dp, ep, b)`` whose memory fits ``hbm_bytes`` per accelerator, in the order
    (tp, pp, ep, b) ascending. Raises NoFeasibleParallelisationError when there is none."""
    if isinstance(hbm_bytes, bool) or not (isinstance(hbm_bytes, (int, float)) and 0 < hbm_bytes < float("inf")):
        raise InputError(f"must be a positive byte count, got {hbm_bytes!r}", field="hbm_bytes")
    if isinstance(servers, bool) or not isinstance(servers, int) or servers < 1:
        raise InputError(f"must be an integer >= 1, got {servers!r}", field="servers")
    if max_tp is not None and (isinstance(max_tp, bool) or not isinstance(max_tp, int) or max_tp < 1):
        raise InputError(f"must be an integer >= 1, got {max_tp!r}", field="max_tp")
    g = training.gpus_per_server
    n_acc = servers * g
    max_tp = g if max_tp is None else max_tp
    experts = model.moe.experts if model.moe is not None else 1
    found: list[ParallelJob] = []
    least = math.inf
    for tp in divisors(n_acc):
        if tp > max_tp or model.heads % tp or model.kv_heads % tp:
            continue
        for pp in divisors(n_acc // tp):
            dp = n_acc // (tp * pp)
            if pp > model.layers or training.global_batch % dp:
                continue
            for ep in divisors(math.gcd(dp, experts)):
                for b in divisors(training.global_batch // dp):
                    par = Parallelism(tp=tp, pp=pp, dp=dp, ep=ep, micro_batch=b)
                    job = ParallelJob(model=model, training=training, parallelism=par, servers=servers)
                    need = peak_memory(job)
                    least = min(least, need)
                    if need > hbm_bytes:
                        break  # rule 3: larger micro-batches need at least as much
                    found.append(job)
    if not found:
        raise NoFeasibleParallelisationError(
            f"{model.name}: no parallelisation on {servers} servers x {g} accelerators fits "
            f"{hbm_bytes / 1e9:g} GB per accelerator (the least any needs: {least / 1e9:.3g} GB)"
        )
    return found
