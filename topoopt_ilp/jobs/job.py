"""A parallel-training job: a transformer, how it is trained, and its ``tp x pp x dp (x ep)`` split.

Rank order (Megatron-LM's, Narayanan et al. 2021, arXiv 2104.04473; expert groups as in
Megatron-Core): tensor-parallel rank ``t`` fastest, then data-parallel rank ``d``, then pipeline
stage ``p``::

    rank = t + tp * (d + dp * p),      d = e + ep * q

The expert-parallel rank ``e`` lives inside the data-parallel rank: an EP group is ``ep``
consecutive DP ranks (same ``t``, ``p`` and ``q``), and the routed experts' gradients are reduced
over the ``dp / ep`` ranks holding the same experts (same ``t``, ``p``, ``e``: the expert-DP
group). Server ``rank // g`` holds accelerators ``g * server .. g * server + g - 1``, so a TP group
with ``tp | g`` sits inside one server.

Pipeline stages take ``L // pp`` layers each, the first ``L % pp`` stages one more; the input
embedding is on the first stage, the final norm and output head on the last.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from topoopt_ilp.errors import InputError
from topoopt_ilp.jobs.model import TransformerModel

__all__ = ["H100_BF16_DENSE_FLOPS", "EFFICIENCY", "Training", "Parallelism", "ParallelJob"]

#: Peak dense bf16 tensor-core throughput of one NVIDIA H100 SXM (datasheet: 989 TFLOPS without sparsity).
H100_BF16_DENSE_FLOPS = 989e12
#: Fraction of peak the executed FLOPs run at. 40 % is an assumption within the 38-43 % MFU that
#: Llama 3 405B pre-training reports on H100 (arXiv 2407.21783, Table 4).
EFFICIENCY = 0.4


def _integer(value: object, field: str, low: int = 1, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise InputError(f"must be an integer >= {low}, got {value!r}", field=field)
    if high is not None and value > high:
        raise InputError(f"must be <= {high}, got {value!r}", field=field)
    return int(value)


@dataclass(frozen=True, kw_only=True)
class Training:
    """How a job trains, whatever its parallelisation.

    ``global_batch`` sequences per iteration; ``precision_bytes`` per parameter and activation (2:
    bf16); ``grad_bytes`` per gradient; ``optimizer_bytes`` per parameter (12: Adam's fp32 master
    copy and two moments, Rajbhandari et al. 2020, arXiv 1910.02054); ``zero_stage`` 0-3 (what is
    sharded over the data-parallel group, docs/guide/llm-jobs.md); ``recompute``: full activation
    recomputation; ``flash_attention``: the attention scores are never stored (FlashAttention, Dao
    et al. 2022, arXiv 2205.14135), which drops the ``5 a s / h`` term of the activation memory;
    ``gpus_per_server`` = g; ``device_flops`` peak FLOP/s of one accelerator and
    ``efficiency`` the fraction of it that the executed FLOPs run at.
    """

    global_batch: int
    precision_bytes: int = 2
    grad_bytes: int = 2
    optimizer_bytes: int = 12
    zero_stage: int = 1
    recompute: bool = False
    flash_attention: bool = True
    gpus_per_server: int = 8
    device_flops: float = H100_BF16_DENSE_FLOPS
    efficiency: float = EFFICIENCY

    def __post_init__(self) -> None:
        _integer(self.global_batch, "job.global_batch")
        _integer(self.precision_bytes, "job.precision_bytes", high=8)
        _integer(self.grad_bytes, "job.grad_bytes", high=8)
        _integer(self.optimizer_bytes, "job.optimizer_bytes", low=0, high=64)
        _integer(self.zero_stage, "job.zero_stage", low=0, high=3)
        _integer(self.gpus_per_server, "job.gpus_per_server")
        for name in ("recompute", "flash_attention"):
            if not isinstance(getattr(self, name), bool):
                raise InputError(f"expected true or false, got {getattr(self, name)!r}", field=f"job.{name}")
        if isinstance(self.device_flops, bool) or not (
            isinstance(self.device_flops, (int, float)) and 0 < self.device_flops < 1e20
        ):
            raise InputError(f"must be a positive FLOP/s rate, got {self.device_flops!r}", field="job.device_flops")
        if isinstance(self.efficiency, bool) or not (
            isinstance(self.efficiency, (int, float)) and 0 < self.efficiency <= 1
        ):
            raise InputError(f"must be in (0, 1], got {self.efficiency!r}", field="job.efficiency")


@dataclass(frozen=True, kw_only=True)
class Parallelism:
    """The degrees ``tp x pp x dp`` (``ep`` inside ``dp``) and the micro-batch size in sequences."""

    tp: int
    pp: int
    dp: int
    ep: int = 1
    micro_batch: int = 1

    def __post_init__(self) -> None:
        for name in ("tp", "pp", "dp", "ep", "micro_batch"):
            _integer(getattr(self, name), f"job.{name}")

    def __str__(self) -> str:
        ep = f" ep{self.ep}" if self.ep > 1 else ""
        return f"tp{self.tp} pp{self.pp} dp{self.dp}{ep} mb{self.micro_batch}"


@dataclass(frozen=True, kw_only=True)
class ParallelJob:
    """A model trained on ``servers x g`` accelerators under one parallelisation. Construction
    checks that the split is one the model and the cluster admit (one :class:`InputError` each)."""

    model: TransformerModel
    training: Training
    parallelism: Parallelism
    servers: int

    def __post_init__(self) -> None:
        for name, kind in (("model", TransformerModel), ("training", Training), ("parallelism", Parallelism)):
            if not isinstance(getattr(self, name), kind):
                raise InputError(
                    f"expected a {kind.__name__}, got {type(getattr(self, name)).__name__}", field=f"job.{name}"
                )
        _integer(self.servers, "job.servers")
        m, par, g = self.model, self.parallelism, self.training.gpus_per_server
        n_acc = self.servers * g
        if par.tp * par.pp * par.dp != n_acc:
            raise InputError(
                f"tp {par.tp} x pp {par.pp} x dp {par.dp} = {par.tp * par.pp * par.dp}, "
                f"the cluster has {self.servers} servers x {g} = {n_acc} accelerators",
                field="job.parallelism",
            )
        if par.tp > m.heads:
            raise InputError(f"tp {par.tp} exceeds the model's {m.heads} attention heads", field="job.tp")
        if m.heads % par.tp or m.kv_heads % par.tp:
            raise InputError(
                f"tp {par.tp} does not divide the {m.heads} heads and {m.kv_heads} KV heads", field="job.tp"
            )
        if par.pp > m.layers:
            raise InputError(f"pp {par.pp} exceeds the model's {m.layers} layers", field="job.pp")
        if m.moe is None and par.ep != 1:
            raise InputError(f"ep {par.ep} on a dense model (no experts): use ep 1", field="job.ep")
        if m.moe is not None and m.moe.experts % par.ep:
            raise InputError(f"ep {par.ep} does not divide the {m.moe.experts} experts", field="job.ep")
        if par.dp % par.ep:
            raise InputError(f"ep {par.ep} does not divide dp {par.dp} (EP groups live inside DP)", field="job.ep")
        if self.training.global_batch % (par.dp * par.micro_batch):
            raise InputError(
                f"global batch {self.training.global_batch} is not a multiple of dp {par.dp} x "
                f"micro-batch {par.micro_batch}",
                field="job.global_batch",
            )

    # -- shape -----------------------------------------------------------------------------------
    @property
    def accelerators(self) -> int:
        return self.servers * self.training.gpus_per_server

    @property
    def micro_batches(self) -> int:
        """``m = global_batch / (dp * micro_batch)``: micro-batches each pipeline runs per iteration."""
        return self.training.global_batch // (self.parallelism.dp * self.parallelism.micro_batch)

    def stage_layers(self) -> tuple[range, ...]:
        """The layer indices of each pipeline stage (the first ``L % pp`` stages take one more)."""
        return _stage_layers(self.model.layers, self.parallelism.pp)

    def rank(self, t: int, d: int, p: int) -> int:
        par = self.parallelism
        return t + par.tp * (d + par.dp * p)

    def _grid(self) -> np.ndarray:
        """Ranks as an array indexed ``[p, q, e, t]`` (rank order in the module docstring)."""
        par = self.parallelism
        return np.arange(self.accelerators).reshape(par.pp, par.dp // par.ep, par.ep, par.tp)

    # -- groups (each a tuple of rank tuples, members in ring order) -----------------------------
    def tp_groups(self) -> tuple[tuple[int, ...], ...]:
        return _groups(self._grid(), axis=3)

    def dp_groups(self) -> tuple[tuple[int, ...], ...]:
        par = self.parallelism
        return _groups(self._grid().reshape(par.pp, par.dp, par.tp), axis=1)

    def pp_groups(self) -> tuple[tuple[int, ...], ...]:
        return _groups(self._grid(), axis=0)

    def ep_groups(self) -> tuple[tuple[int, ...], ...]:
        return _groups(self._grid(), axis=2)

    def expert_dp_groups(self) -> tuple[tuple[int, ...], ...]:
        return _groups(self._grid(), axis=1)

    def stage_of(self, rank: int) -> int:
        return rank // (self.parallelism.tp * self.parallelism.dp)


@functools.lru_cache(maxsize=256)
def _stage_layers(L: int, pp: int) -> tuple[range, ...]:
    """Cached: the per-stage sums of a profile ask for it thousands of times."""
    sizes = [L // pp + (1 if p < L % pp else 0) for p in range(pp)]
    starts = np.concatenate([[0], np.cumsum(sizes)])
    return tuple(range(int(starts[p]), int(starts[p + 1])) for p in range(pp))


def _groups(grid: np.ndarray, axis: int) -> tuple[tuple[int, ...], ...]:
    rows = np.moveaxis(grid, axis, -1).reshape(-1, grid.shape[axis])
    return tuple(tuple(int(r) for r in row) for row in rows)
