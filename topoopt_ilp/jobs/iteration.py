"""One training iteration of a :class:`~topoopt_ilp.jobs.job.ParallelJob`: its collectives, compute,
memory and pipeline bubble, and the traffic they put between servers (docs/guide/llm-jobs.md).

Notation: ``b`` micro-batch (sequences), ``s`` sequence length, ``h`` hidden size, ``a`` heads,
``P`` bytes per parameter/activation (``precision_bytes``), ``G`` per gradient, ``O`` optimizer
bytes per parameter, ``m`` micro-batches per iteration, ``L_p`` the layers of stage ``p``, ``M_p``
its MoE layers, ``r = 1`` with recomputation (else 0). A ring collective over ``k`` members
moves, from each member to its ring successor: AllReduce ``2 (k-1)/k S``, ReduceScatter or
AllGather ``(k-1)/k S`` (the bandwidth-optimal ring, as the evaluator charges it).

Per iteration::

    TP    (Megatron, Shoeybi et al. 2019, arXiv 1909.08053) per layer and micro-batch: 2 AllReduce
          forward + 2 backward (+ 2 forward again with recomputation) of S_tp = b s h P over the
          tp ranks. Each member sends  m * L_p * (4 + 2r) * 2 (tp-1)/tp * S_tp.
    PP    per micro-batch, stage p -> p+1 the activations b s h P forward, and p+1 -> p their
          gradient backward; each of the tp ranks sends its 1/tp share (Megatron's scatter/gather,
          arXiv 2104.04473 section 4.1): m * b s h P / tp per rank and direction.
    DP    once per iteration over each DP group (k = dp) for the dense parameters Psi_d of a rank,
          and over each expert-DP group (k = dp / ep) for its routed-expert parameters Psi_e:
            ZeRO 0    AllReduce of gradients:                 2 (k-1)/k Psi G
            ZeRO 1, 2 ReduceScatter grads + AllGather params: (k-1)/k Psi (G + P)
            ZeRO 3    ReduceScatter grads once, AllGather params before every micro-batch's
                      forward and backward:                   (k-1)/k Psi (G + 2 m P)
    EP    per MoE layer and micro-batch: dispatch and combine all-to-all forward, their gradients
          backward (4, + 2 with recomputation) over the ep ranks. A rank holds b s / tp tokens
          (sequence parallelism) and routes top_k copies of each: A = (b s / tp) k h P bytes, of
          which a share 1/ep goes to each EP member (uniform routing): each member sends A / ep
          to each other member, m * M_p * (4 + 2r) times.

Compute: the training FLOPs of a token are ``(6 + 2r) N_l + (12 + 4r) s w`` per layer ``l``
(``N_l`` its active parameters, ``w`` :meth:`~topoopt_ilp.jobs.model.TransformerModel.attention_width`,
``= h`` for standard attention: PaLM's ``6 N + 12 L s h``, Chowdhery et al. 2022, arXiv 2204.02311,
Appendix B, non-causal) plus ``6 V h`` for the output head on the last stage. A rank of stage
``p`` runs its stage's FLOPs for ``global_batch / dp`` sequences divided by ``tp``, at
``device_flops x efficiency``. ``compute_s`` is the slowest stage's time; the 1F1B pipeline
(non-interleaved) adds ``bubble_s = compute_s (pp-1)/m``, so the bubble is ``(pp-1)/(m+pp-1)`` of
the pipelined compute (Narayanan et al. 2021).

Memory of a rank of stage ``p`` (bytes): parameters ``Psi = Psi_d + Psi_e`` (every layer weight
divided by tp, experts also by ep; embedding on the first stage, head and final norm on the last, a
tied embedding on both when pp > 1), with ZeRO (Rajbhandari et al. 2020) sharding over k:

    ZeRO 0: Psi (P + G + O)   1: Psi (P + G) + Psi O / k   2: Psi P + Psi (G + O) / k   3: Psi (P + G + O) / k

and activations (Korthikanti et al. 2022, arXiv 2205.05198, tensor + sequence parallelism, 16-bit)
per layer and micro-batch ``s b h (34 + 5 a s / h) / tp``, or ``34 s b h / tp`` with FlashAttention
(Dao et al. 2022, arXiv 2205.14135: the ``a s^2`` scores are never stored, as with Korthikanti's
selective recomputation; the default); 1F1B keeps ``min(pp - p, m)``
micro-batches in flight on stage ``p``. With full recomputation a layer keeps only its input,
``2 s b h / tp``, and one layer's full activations exist at a time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from topoopt_ilp.jobs.job import ParallelJob

__all__ = [
    "KINDS",
    "StageMemory",
    "IterationProfile",
    "ring_allreduce_share",
    "collectives_per_layer",
    "tp_allreduce_bytes",
    "tp_member_bytes",
    "pp_send_bytes",
    "dp_member_bytes",
    "ep_routed_bytes",
    "ep_pair_bytes",
    "layer_flops_per_token",
    "stage_flops_per_rank",
    "compute_seconds",
    "bubble_fraction",
    "activation_bytes_per_layer",
    "stage_memory",
    "transfers",
    "server_split",
    "profile",
]

#: The traffic kinds, in the order reports list them.
KINDS = ("tp", "pp", "dp", "ep")


def ring_allreduce_share(k: int) -> float:
    """``2 (k-1)/k``: the multiple of an AllReduce's size each ring member sends."""
    return 2.0 * (k - 1) / k


# ---------------------------------------------------------------------------------------------- TP
def tp_allreduce_bytes(job: ParallelJob) -> float:
    """``S_tp = b s h P``: the size of one TP AllReduce (one micro-batch's layer output)."""
    return float(job.parallelism.micro_batch * job.model.seq_len * job.model.hidden * job.training.precision_bytes)


def collectives_per_layer(job: ParallelJob) -> int:
    """``4 + 2r``: the TP AllReduces (or EP all-to-alls) of one layer and micro-batch, 2 forward and
    2 backward, + 2 forward again when recomputing."""
    return 4 + (2 if job.training.recompute else 0)


def tp_member_bytes(job: ParallelJob, stage: int) -> float:
    """Bytes each TP ring member of ``stage`` sends to its successor per iteration."""
    tp = job.parallelism.tp
    if tp == 1:
        return 0.0
    layers = len(job.stage_layers()[stage])
    count = job.micro_batches * layers * collectives_per_layer(job)
    return count * ring_allreduce_share(tp) * tp_allreduce_bytes(job)


# ---------------------------------------------------------------------------------------------- PP
def pp_send_bytes(job: ParallelJob) -> float:
    """Bytes one rank sends to its peer in the next (forward) or previous (backward) stage per
    iteration: ``m b s h P / tp``."""
    return job.micro_batches * tp_allreduce_bytes(job) / job.parallelism.tp


# ---------------------------------------------------------------------------------------------- DP
def stage_params(job: ParallelJob, stage: int) -> tuple[float, float]:
    """``(Psi_d, Psi_e)``: the dense and routed-expert parameters one rank of ``stage`` holds."""
    m, par = job.model, job.parallelism
    layers = job.stage_layers()[stage]
    expert = sum(m.layer_expert_params(i) for i in layers)
    dense = sum(m.layer_params(i) for i in layers) - expert
    if stage == 0:
        dense += m.input_embedding_params()
    if stage == par.pp - 1:
        dense += m.output_params()
        if m.tied_embeddings and par.pp > 1:  # the last stage keeps its own copy of the tied head
            dense += m.vocab * m.hidden
    return dense / par.tp, expert / (par.tp * par.ep)


def _zero_collective_share(job: ParallelJob, k: int) -> float:
    """Bytes per parameter each ring member sends per iteration under the job's ZeRO stage."""
    if k == 1:
        return 0.0
    t = job.training
    if t.zero_stage == 0:
        return ring_allreduce_share(k) * t.grad_bytes
    if t.zero_stage in (1, 2):
        return (k - 1) / k * (t.grad_bytes + t.precision_bytes)
    return (k - 1) / k * (t.grad_bytes + 2 * job.micro_batches * t.precision_bytes)


def dp_member_bytes(job: ParallelJob, stage: int) -> tuple[float, float]:
    """Bytes each member of a DP ring (dense parameters) and of an expert-DP ring (routed experts)
    of ``stage`` sends to its successor per iteration."""
    dense, expert = stage_params(job, stage)
    par = job.parallelism
    return dense * _zero_collective_share(job, par.dp), expert * _zero_collective_share(job, par.dp // par.ep)


# ---------------------------------------------------------------------------------------------- EP
def ep_routed_bytes(job: ParallelJob) -> float:
    """``A = (b s / tp) k h P``: the bytes one EP rank routes in one all-to-all (0 on a dense model)."""
    m, par = job.model, job.parallelism
    if m.moe is None:
        return 0.0
    tokens = par.micro_batch * m.seq_len / par.tp
    return tokens * m.moe.top_k * m.hidden * job.training.precision_bytes


def ep_pair_bytes(job: ParallelJob, stage: int) -> float:
    """Bytes one EP member of ``stage`` sends to each other member of its EP group per iteration:
    ``m M_p (4 + 2r) A / ep`` with ``A = (b s / tp) k h P``."""
    m, par = job.model, job.parallelism
    if m.moe is None or par.ep == 1:
        return 0.0
    moe_layers = sum(m.is_moe_layer(i) for i in job.stage_layers()[stage])
    count = job.micro_batches * moe_layers * collectives_per_layer(job)
    return count * ep_routed_bytes(job) / par.ep


# ---------------------------------------------------------------------------------------------- compute
def layer_flops_per_token(job: ParallelJob, layer: int) -> float:
    """Training FLOPs of one token in one layer: ``(6 + 2r) N_l + (12 + 4r) s w``."""
    m, r = job.model, int(job.training.recompute)
    return (6 + 2 * r) * m.layer_params(layer, active=True) + (12 + 4 * r) * m.seq_len * m.attention_width()


def stage_flops_per_rank(job: ParallelJob, stage: int) -> float:
    """FLOPs one rank of ``stage`` runs per iteration (its share of ``global_batch / dp`` sequences)."""
    m, par = job.model, job.parallelism
    per_token = sum(layer_flops_per_token(job, i) for i in job.stage_layers()[stage])
    if stage == par.pp - 1:
        per_token += 6 * m.output_params()  # the head (and final norm) as one more matmul, not recomputed
        if m.tied_embeddings:
            per_token += 6 * m.vocab * m.hidden  # the tied head's multiply-adds (its weights counted as the embedding)
    tokens = job.training.global_batch / par.dp * m.seq_len
    return tokens * per_token / par.tp


def compute_seconds(job: ParallelJob) -> float:
    """The slowest stage's compute per iteration, at ``device_flops x efficiency``."""
    rate = job.training.device_flops * job.training.efficiency
    return max(stage_flops_per_rank(job, p) for p in range(job.parallelism.pp)) / rate


def bubble_fraction(job: ParallelJob) -> float:
    """``(pp - 1) / (m + pp - 1)``: the idle share of a 1F1B pipeline."""
    pp = job.parallelism.pp
    return (pp - 1) / (job.micro_batches + pp - 1)


# ---------------------------------------------------------------------------------------------- memory
def activation_bytes_per_layer(job: ParallelJob) -> float:
    """Korthikanti et al. 2022, tensor + sequence parallel: ``s b h (34 + 5 a s / h) / tp``; with
    FlashAttention the scores are not stored: ``34 s b h / tp``."""
    m, par = job.model, job.parallelism
    s, b, h, a = m.seq_len, par.micro_batch, m.hidden, m.heads
    scores = 0.0 if job.training.flash_attention else 5 * a * s / h
    return s * b * h * (34 + scores) / par.tp


@dataclass(frozen=True)
class StageMemory:
    """Bytes on one accelerator of a pipeline stage."""

    stage: int
    params: float
    grads: float
    optimizer: float
    activations: float

    @property
    def total(self) -> float:
        return self.params + self.grads + self.optimizer + self.activations


def stage_memory(job: ParallelJob, stage: int) -> StageMemory:
    t, par, m = job.training, job.parallelism, job.model
    dense, expert = stage_params(job, stage)
    k_dense, k_expert = par.dp, par.dp // par.ep

    def sharded(psi: float, k: int, stages: tuple[int, ...]) -> float:
        return psi / k if t.zero_stage in stages else psi

    params = sharded(dense, k_dense, (3,)) * t.precision_bytes + sharded(expert, k_expert, (3,)) * t.precision_bytes
    grads = sharded(dense, k_dense, (2, 3)) * t.grad_bytes + sharded(expert, k_expert, (2, 3)) * t.grad_bytes
    optimizer = (
        sharded(dense, k_dense, (1, 2, 3)) * t.optimizer_bytes
        + sharded(expert, k_expert, (1, 2, 3)) * t.optimizer_bytes
    )
    layers = len(job.stage_layers()[stage])
    in_flight = min(par.pp - stage, job.micro_batches)
    full = activation_bytes_per_layer(job)
    if t.recompute:
        kept = 2 * m.seq_len * par.micro_batch * m.hidden / par.tp
        activations = in_flight * layers * kept + full
    else:
        activations = in_flight * layers * full
    return StageMemory(stage, params, grads, optimizer, activations)


# ---------------------------------------------------------------------------------------------- traffic
def _ring(groups: list[tuple[int, ...]], amount: list[float]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    src, dst, size = [], [], []
    for members, bytes_ in zip(groups, amount):
        if len(members) < 2 or bytes_ == 0:
            continue
        order = np.asarray(members)
        src.append(order)
        dst.append(np.roll(order, -1))
        size.append(np.full(len(order), bytes_))
    return _joined(src, dst, size)


def _joined(src: list, dst: list, size: list) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if not src:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0)
    return np.concatenate(src).astype(np.int64), np.concatenate(dst).astype(np.int64), np.concatenate(size)


def transfers(job: ParallelJob) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per kind, the rank-to-rank transfers of one iteration as arrays ``(src, dst, bytes)``."""
    stage_of = job.stage_of
    stages = range(job.parallelism.pp)
    # Per stage once: every group of a stage moves the same bytes (a job has thousands of groups).
    tp_bytes = [tp_member_bytes(job, p) for p in stages]
    dp_bytes = [dp_member_bytes(job, p) for p in stages]
    ep_bytes = [ep_pair_bytes(job, p) for p in stages]
    tp_groups = job.tp_groups()
    out = {"tp": _ring(list(tp_groups), [tp_bytes[stage_of(g[0])] for g in tp_groups])}

    pp_src, pp_dst, pp_size = [], [], []
    send = pp_send_bytes(job)
    for chain in job.pp_groups():
        a, b = np.asarray(chain[:-1]), np.asarray(chain[1:])
        pp_src += [a, b]
        pp_dst += [b, a]
        pp_size += [np.full(len(a), send), np.full(len(a), send)]
    out["pp"] = _joined(pp_src, pp_dst, pp_size)

    dp_groups, edp_groups = list(job.dp_groups()), list(job.expert_dp_groups())
    dense = _ring(dp_groups, [dp_bytes[stage_of(g[0])][0] for g in dp_groups])
    expert = _ring(edp_groups, [dp_bytes[stage_of(g[0])][1] for g in edp_groups])
    out["dp"] = tuple(np.concatenate([x, y]) for x, y in zip(dense, expert))

    ep_src, ep_dst, ep_size = [], [], []
    for members in job.ep_groups():
        pair = ep_bytes[stage_of(members[0])]
        if pair == 0:
            continue
        order = np.asarray(members)
        a, b = np.meshgrid(order, order, indexing="ij")
        off = a != b
        ep_src.append(a[off])
        ep_dst.append(b[off])
        ep_size.append(np.full(int(off.sum()), pair))
    out["ep"] = _joined(ep_src, ep_dst, ep_size)
    return out


def _frozen(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


@dataclass(frozen=True)
class IterationProfile:
    """One iteration of a job. Volumes are bytes per iteration; ``inter_server[kind]`` is the
    ``n x n`` matrix of bytes server i sends to server j (``i != j``), ``scale_up[kind]`` the bytes
    that stay inside each server (charged to its scale-up fabric). ``groups`` name the ranks of
    every TP, PP, DP, expert-DP and EP group (members in ring order)."""

    job: ParallelJob
    groups: Mapping[str, tuple[tuple[int, ...], ...]]
    rank_bytes: Mapping[str, float]
    inter_server: Mapping[str, np.ndarray]
    scale_up: Mapping[str, np.ndarray]
    compute_s: float
    bubble_s: float
    bubble_fraction: float
    flops: float
    memory: tuple[StageMemory, ...]

    @property
    def memory_per_accelerator(self) -> float:
        """The most any accelerator holds (the fullest stage)."""
        return max(s.total for s in self.memory)

    def traffic_matrix(self) -> np.ndarray:
        """All inter-server bytes of one iteration, every kind together (n x n)."""
        return sum(self.inter_server[k] for k in KINDS)

    def inter_server_bytes(self, kind: str) -> float:
        return float(self.inter_server[kind].sum())

    def summary(self) -> dict[str, float]:
        """The profile's totals as plain numbers (seconds, bytes per iteration), for reports."""
        out = {
            "compute_s": self.compute_s,
            "bubble_s": self.bubble_s,
            "bubble_fraction": self.bubble_fraction,
            "flops": self.flops,
            "memory_per_accelerator_bytes": self.memory_per_accelerator,
        }
        for kind in KINDS:
            out[f"{kind}_inter_server_bytes"] = self.inter_server_bytes(kind)
            out[f"{kind}_scale_up_bytes"] = float(self.scale_up[kind].sum())
        return out


def server_split(job: ParallelJob, src: np.ndarray, dst: np.ndarray, size: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(inter, inside)`` of rank-to-rank transfers: the n x n bytes server ``rank // g`` sends to
    another server, and the bytes that stay inside each server."""
    n, g = job.servers, job.training.gpus_per_server
    s_src, s_dst = src // g, dst // g
    across = s_src != s_dst
    matrix = np.zeros((n, n))
    np.add.at(matrix, (s_src[across], s_dst[across]), size[across])
    return matrix, np.bincount(s_src[~across], weights=size[~across], minlength=n).astype(float)


def profile(job: ParallelJob) -> IterationProfile:
    """Everything one iteration of ``job`` moves, computes and holds."""
    moved = transfers(job)
    inter, scale_up, volume = {}, {}, {}
    for kind in KINDS:
        src, dst, size = moved[kind]
        matrix, inside = server_split(job, src, dst, size)
        inter[kind] = _frozen(matrix)
        scale_up[kind] = _frozen(inside)
        volume[kind] = float(size.sum())
    pp = job.parallelism.pp
    compute = compute_seconds(job)
    groups = {
        "tp": job.tp_groups(),
        "pp": job.pp_groups(),
        "dp": job.dp_groups(),
        "expert_dp": job.expert_dp_groups(),
        "ep": job.ep_groups(),
    }
    flops = sum(stage_flops_per_rank(job, p) for p in range(pp)) * job.accelerators / pp
    return IterationProfile(
        job=job,
        groups=MappingProxyType(groups),
        rank_bytes=MappingProxyType(volume),
        inter_server=MappingProxyType(inter),
        scale_up=MappingProxyType(scale_up),
        compute_s=compute,
        bubble_s=compute * (pp - 1) / job.micro_batches,
        bubble_fraction=bubble_fraction(job),
        flops=flops,
        memory=tuple(stage_memory(job, p) for p in range(pp)),
    )
