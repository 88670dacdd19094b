"""Expert-parallel traffic under a given expert load (docs/guide/llm-jobs.md, **Expert load**).

The uniform assumption of :func:`~topoopt_ilp.jobs.iteration.ep_pair_bytes` (each EP member routes
``1/ep`` of its tokens to every member) is replaced by a load matrix ``W_l`` per MoE layer ``l``:
``W_l[i, j]`` tokens routed from EP rank ``i`` to expert ``j`` (``ep x E``, non-negative). EP rank
``r`` holds the experts ``r E/ep .. (r+1) E/ep - 1`` (Megatron-Core's contiguous local experts), so
the share of rank ``i``'s routed bytes that goes to rank ``r`` is::

    D_l[i, r] = sum_{j of r} W_l[i, j] / w_l,      w_l = (1/ep) sum_{i, j} W_l[i, j]

(``w_l`` the mean tokens a rank routes: the job fixes the volume, the matrix only how it splits,
so a matrix counted over more tokens means the same). The dispatch all-to-all and the combine's
gradient go ``i -> r``, the combine and the dispatch's gradient ``r -> i``; with recomputation the
forward pair runs twice. Per iteration, EP member ``i`` of a group of ``stage`` sends member
``r != i``::

    B[i, r] = m (2 + r_c) A sum_{l in MoE layers of the stage} (D_l[i, r] + D_l[r, i])

with ``A = (b s / tp) k h P`` (:func:`~topoopt_ilp.jobs.iteration.ep_routed_bytes`) and ``r_c = 1``
with recomputation. A uniform ``W`` gives ``D = 1/ep`` and ``B = m M_p (4 + 2 r_c) A / ep``: today's
uniform bytes. Every EP group of the job (every ``t``, ``p``, ``q``) follows the same matrix, its
members numbered by their EP rank.

A generated scenario set draws expert popularity from a Zipf law, ``p_j = j^-s / sum_k k^-s`` (the
skew MoE routers show without a balancing loss, Fedus et al. 2022, arXiv 2101.03961), assigned to
the experts by a random permutation per scenario (which experts are hot moves between iterations):
every EP rank routes by the same popularity, ``W[i, j] = p_{pi(j)}``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from topoopt_ilp.jobs.iteration import ep_routed_bytes, server_split
from topoopt_ilp.jobs.job import ParallelJob

__all__ = ["zipf_popularity", "zipf_scenarios", "routing_shares", "ep_load_transfers", "ep_load_traffic"]


def zipf_popularity(experts: int, skew: float) -> np.ndarray:
    """``p_j = j^-s / sum_k k^-s`` for ``j = 1..E``: the most popular expert first."""
    weights = np.arange(1, experts + 1, dtype=float) ** -float(skew)
    return weights / weights.sum()


def zipf_scenarios(ep: int, experts: int, skew: float, count: int, seed: int) -> list[np.ndarray]:
    """``count`` load matrices (``ep x E``, rows summing to 1): the Zipf popularity permuted over the
    experts once per scenario, the same row for every EP rank."""
    rng = np.random.default_rng(seed)
    popularity = zipf_popularity(experts, skew)
    return [np.tile(popularity[rng.permutation(experts)], (ep, 1)) for _ in range(count)]


def routing_shares(load: np.ndarray) -> np.ndarray:
    """``D[i, r]``: the share of EP rank i's routed bytes that goes to EP rank r (module docstring),
    for an ``ep x E`` load whose ``E`` is a multiple of ``ep`` and whose total is positive."""
    load = np.asarray(load, dtype=float)
    ep, experts = load.shape
    per_rank = load.reshape(ep, ep, experts // ep).sum(axis=2)
    return per_rank / (load.sum() / ep)


def ep_load_transfers(job: ParallelJob, shares: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The EP transfers ``(src ranks, dst ranks, bytes)`` of one iteration, ``shares[l]`` the
    :func:`routing_shares` of the model's ``l``-th MoE layer (one entry per MoE layer)."""
    m, par = job.model, job.parallelism
    empty = np.zeros(0, dtype=np.int64)
    if m.moe is None or par.ep == 1:
        return empty, empty, np.zeros(0)
    moe_index = np.cumsum([m.is_moe_layer(i) for i in range(m.layers)]) - 1
    per_direction = 2 + int(job.training.recompute)  # all-to-alls each way per layer and micro-batch
    half = job.micro_batches * per_direction * ep_routed_bytes(job)
    per_stage = []
    for layers in job.stage_layers():
        summed = np.zeros((par.ep, par.ep))
        for i in layers:
            if m.is_moe_layer(i):
                summed += shares[moe_index[i]]
        both = half * (summed + summed.T)
        np.fill_diagonal(both, 0.0)
        per_stage.append(both)
    src, dst, size = [], [], []
    off = ~np.eye(par.ep, dtype=bool)
    rows, cols = np.nonzero(off)
    for members in job.ep_groups():
        order = np.asarray(members)
        src.append(order[rows])
        dst.append(order[cols])
        size.append(per_stage[job.stage_of(members[0])][rows, cols])
    return np.concatenate(src).astype(np.int64), np.concatenate(dst).astype(np.int64), np.concatenate(size)


def ep_load_traffic(job: ParallelJob, shares: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """``(inter, inside)``: the n x n bytes the EP all-to-alls move between servers (server ``rank //
    g``, as :func:`~topoopt_ilp.jobs.iteration.profile` numbers them) and the bytes that stay inside
    each server, under the given shares."""
    return server_split(job, *ep_load_transfers(job, shares))
