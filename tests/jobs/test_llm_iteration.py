"""Every per-iteration formula on 2-layer toy jobs, against numbers worked out by hand in the comments."""

from __future__ import annotations

import numpy as np
import pytest

from topoopt_ilp.jobs import iteration as it
from topoopt_ilp.jobs.job import Parallelism, ParallelJob, Training
from topoopt_ilp.jobs.model import MoE, TransformerModel

# h 4, f 8, 2 heads of dim 2, vocab 10, s 3, SwiGLU, no bias: a layer has 64 + 96 + 8 = 168
# parameters, the embedding 40, the head and final norm 44.
DENSE = TransformerModel(name="toy", layers=2, hidden=4, ffn=8, heads=2, vocab=10, seq_len=3)
# Layer 1 is MoE: 4 experts of FFN 2 (24 parameters each), top 2, 1 shared; 96 routed-expert parameters.
MOE = TransformerModel(
    name="toy-moe",
    layers=2,
    hidden=4,
    ffn=8,
    heads=2,
    vocab=10,
    seq_len=3,
    moe=MoE(experts=4, top_k=2, expert_ffn=2, shared_experts=1, first_dense_layers=1),
)
RATE = 1e3  # FLOP/s, so that times are easy to read


def dense_job(zero=0, recompute=False, flash=True) -> ParallelJob:
    # 4 servers x 2 accelerators; tp 2, pp 2, dp 2; micro-batch 2 of a global batch 8: m = 2.
    training = Training(
        global_batch=8,
        zero_stage=zero,
        recompute=recompute,
        flash_attention=flash,
        gpus_per_server=2,
        device_flops=RATE,
        efficiency=1.0,
    )
    return ParallelJob(
        model=DENSE, training=training, parallelism=Parallelism(tp=2, pp=2, dp=2, micro_batch=2), servers=4
    )


def moe_job(g=1, zero=0) -> ParallelJob:
    # 4 accelerators, tp 1, pp 1, dp 4, ep 2, micro-batch 1 of 8: m = 2.
    training = Training(global_batch=8, zero_stage=zero, gpus_per_server=g, device_flops=RATE, efficiency=1.0)
    return ParallelJob(
        model=MOE, training=training, parallelism=Parallelism(tp=1, pp=1, dp=4, ep=2, micro_batch=1), servers=4 // g
    )


def test_tp_volumes():
    j = dense_job()
    assert it.tp_allreduce_bytes(j) == 2 * 3 * 4 * 2 == 48  # b s h P
    # m 2 x 1 layer x 4 AllReduces x 2 (tp-1)/tp = 1 x 48
    assert it.tp_member_bytes(j, 0) == 2 * 1 * 4 * 1 * 48 == 384
    assert it.tp_member_bytes(dense_job(recompute=True), 1) == 2 * 1 * 6 * 48 == 576


def test_pp_volume():
    assert it.pp_send_bytes(dense_job()) == 2 * 48 / 2 == 48  # m b s h P / tp


def test_stage_params():
    j = dense_job()
    assert it.stage_params(j, 0) == ((168 + 40) / 2, 0)
    assert it.stage_params(j, 1) == ((168 + 44) / 2, 0)


@pytest.mark.parametrize(
    "zero, per_param",
    [
        (0, 2 * 0.5 * 2),  # AllReduce of 2-byte gradients over 2 members
        (1, 0.5 * (2 + 2)),  # ReduceScatter grads + AllGather params
        (2, 0.5 * (2 + 2)),
        (3, 0.5 * (2 + 2 * 2 * 2)),  # ReduceScatter once + AllGather 2 m times
    ],
)
def test_dp_volumes_per_zero_stage(zero, per_param):
    j = dense_job(zero=zero)
    assert it.dp_member_bytes(j, 0) == (104 * per_param, 0)
    assert it.dp_member_bytes(j, 1) == (106 * per_param, 0)


def test_moe_dp_and_ep_volumes():
    j = moe_job()
    # dense parameters per rank 460 - 96 = 364 over dp 4: 2 * 3/4 * 2 bytes = 3 per parameter;
    # experts 96 / ep 2 = 48 over expert-DP 2: 2 * 1/2 * 2 = 2 per parameter.
    assert it.stage_params(j, 0) == (364, 48)
    assert it.dp_member_bytes(j, 0) == (364 * 3, 48 * 2)
    # A = (b s / tp) k h P = 3 * 2 * 4 * 2 = 48; m 2 x 1 MoE layer x 4 all-to-alls x A / ep 2
    assert it.ep_pair_bytes(j, 0) == 2 * 1 * 4 * 48 / 2 == 192
    assert it.ep_pair_bytes(dense_job(), 0) == 0


def test_compute_and_bubble():
    j = dense_job()
    # per token and layer: 6 * 168 + 12 * s 3 * h 4 = 1152; stage 1 adds the head 6 * 44.
    assert it.layer_flops_per_token(j, 0) == 1152
    # a rank runs global 8 / dp 2 * s 3 = 12 tokens over tp 2
    assert it.stage_flops_per_rank(j, 0) == 12 * 1152 / 2 == 6912
    assert it.stage_flops_per_rank(j, 1) == 12 * (1152 + 264) / 2 == 8496
    assert it.compute_seconds(j) == 8496 / RATE
    assert it.bubble_fraction(j) == 1 / 3  # (pp-1)/(m+pp-1) = 1/3
    p = it.profile(j)
    assert p.bubble_s == pytest.approx(8.496 * 1 / 2)
    assert p.bubble_s / (p.bubble_s + p.compute_s) == pytest.approx(p.bubble_fraction)
    # all ranks together: 6 N_matmul + 12 L s h per token, N_matmul = 2*168 + 44 = 380, 24 tokens
    assert p.flops == (6 * 380 + 12 * 2 * 3 * 4) * 24 == 61632
    recompute = dense_job(recompute=True)
    assert it.layer_flops_per_token(recompute, 0) == 8 * 168 + 16 * 12


def test_memory_by_hand():
    j = dense_job(zero=0)
    # stage 0: 104 parameters x (2 + 2 + 12); activations 34 s b h / tp = 34*3*2*4/2 = 408 per layer,
    # 1 layer, min(pp - 0, m) = 2 micro-batches in flight.
    m0 = it.stage_memory(j, 0)
    assert (m0.params, m0.grads, m0.optimizer, m0.activations) == (208, 208, 1248, 816)
    m1 = it.stage_memory(j, 1)
    assert (m1.params, m1.activations) == (212, 408)
    assert it.profile(j).memory_per_accelerator == 208 + 208 + 1248 + 816
    # scores stored: 5 a s / h = 7.5 more per s b h
    assert it.activation_bytes_per_layer(dense_job(flash=False)) == 3 * 2 * 4 * (34 + 7.5) / 2
    # ZeRO 3 shards everything over dp 2
    z3 = it.stage_memory(dense_job(zero=3), 0)
    assert (z3.params, z3.grads, z3.optimizer) == (104, 104, 624)
    z1 = it.stage_memory(dense_job(zero=1), 0)
    assert (z1.params, z1.grads, z1.optimizer) == (208, 208, 624)
    z2 = it.stage_memory(dense_job(zero=2), 0)
    assert (z2.params, z2.grads, z2.optimizer) == (208, 104, 624)
    # recomputation keeps each layer's input (2 s b h / tp = 24) per micro-batch in flight, plus one full layer
    r = it.stage_memory(dense_job(recompute=True), 0)
    assert r.activations == 2 * 1 * 24 + 408


def test_moe_memory_by_hand():
    m = it.stage_memory(moe_job(zero=1), 0)
    # dense 364 x (2 + 2) + 364 x 12 / 4; experts 48 x (2 + 2) + 48 x 12 / 2
    assert m.params + m.grads + m.optimizer == 364 * 4 + 364 * 3 + 48 * 4 + 48 * 6


def test_profile_server_traffic_dense():
    p = it.profile(dense_job())
    # TP groups are pairs of consecutive ranks: inside a server of 2, all on the scale-up fabric.
    assert p.inter_server_bytes("tp") == 0
    assert list(p.scale_up["tp"]) == [2 * 384] * 4
    # PP: 4 ranks x 48 forward + 4 x 48 backward, all between servers (ranks r and r + 4)
    assert p.inter_server_bytes("pp") == 8 * 48
    assert p.inter_server["pp"][0, 2] == 2 * 48 and p.inter_server["pp"][2, 0] == 2 * 48
    # DP pairs (0, 2), (1, 3) on stage 0 and (4, 6), (5, 7) on stage 1: each member sends 208 or 212
    assert p.inter_server_bytes("dp") == 4 * 208 + 4 * 212
    assert p.traffic_matrix().sum() == 8 * 48 + 4 * 208 + 4 * 212
    assert np.all(np.diag(p.traffic_matrix()) == 0)
    assert p.groups["tp"] == ((0, 1), (2, 3), (4, 5), (6, 7))
    with pytest.raises(ValueError):
        p.inter_server["pp"][0, 1] = 1.0  # read-only


def test_profile_server_traffic_moe():
    p = it.profile(moe_job(g=1))  # one accelerator per server: everything crosses servers
    assert p.inter_server_bytes("ep") == 4 * 192
    assert p.inter_server["ep"][0, 1] == 192 and p.inter_server["ep"][0, 2] == 0
    assert p.inter_server_bytes("dp") == 4 * 1092 + 4 * 96
    assert p.traffic_matrix().sum() == 4 * 192 + 4 * 1092 + 4 * 96
    inside = it.profile(moe_job(g=2))  # EP pairs (0, 1), (2, 3) now share a server
    assert inside.inter_server_bytes("ep") == 0 and inside.scale_up["ep"].sum() == 4 * 192


def test_summary_totals():
    p = it.profile(dense_job())
    s = p.summary()
    assert s["pp_inter_server_bytes"] == 8 * 48 and s["tp_scale_up_bytes"] == 8 * 384
    assert s["memory_per_accelerator_bytes"] == p.memory_per_accelerator
    assert it.collectives_per_layer(dense_job(recompute=True)) == 6
