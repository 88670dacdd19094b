"""The server traffic matrix of a job, checked by a brute-force count that shares no code with
topoopt_ilp.jobs.iteration: ranks from their coordinates, groups by dictionary, volumes from the
closed forms of docs/guide/llm-jobs.md, summed transfer by transfer."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from topoopt_ilp.jobs.iteration import KINDS, profile
from topoopt_ilp.jobs.job import Parallelism, ParallelJob, Training
from topoopt_ilp.jobs.model import MoE, TransformerModel

MODEL = TransformerModel(
    name="toy-moe",
    layers=5,
    hidden=16,
    ffn=32,
    heads=4,
    kv_heads=2,
    vocab=50,
    seq_len=8,
    moe=MoE(experts=8, top_k=2, expert_ffn=8, shared_experts=1, first_dense_layers=1),
)


def brute_force(model, servers, g, tp, pp, dp, ep, b, batch, zero, recompute):
    """Per kind, the n x n inter-server bytes and the bytes kept inside servers."""
    P, G = 2, 2
    s, h, k = model.seq_len, model.hidden, model.moe.top_k
    m = batch // (dp * b)
    passes = 4 + 2 * recompute
    n_rank = tp * pp * dp
    coords = {}
    for rank in range(n_rank):
        t, d, p = rank % tp, (rank // tp) % dp, rank // (tp * dp)
        coords[rank] = (t, d % ep, d // ep, p)
    # stages: L // pp layers, the first L % pp one more
    bounds, start = [], 0
    for p in range(pp):
        size = model.layers // pp + (p < model.layers % pp)
        bounds.append(list(range(start, start + size)))
        start += size

    def params(p):
        experts = sum(model.moe.experts * 3 * h * model.moe.expert_ffn for i in bounds[p] if model.is_moe_layer(i))
        dense = sum(model.layer_params(i) for i in bounds[p]) - experts
        dense += (vocab_h := model.vocab * h) * (p == 0) + (vocab_h + h) * (p == pp - 1)
        return dense / tp, experts / (tp * ep)

    def zero_bytes(kk):
        if kk == 1:
            return 0.0
        return {0: 2 * (kk - 1) / kk * G, 1: (kk - 1) / kk * (G + P), 2: (kk - 1) / kk * (G + P)}.get(
            zero, (kk - 1) / kk * (G + 2 * m * P)
        )

    moved = {kind: [] for kind in KINDS}  # (src rank, dst rank, bytes)

    def ring(kind, members, amount):
        if len(members) > 1:
            for i, r in enumerate(members):
                moved[kind].append((r, members[(i + 1) % len(members)], amount))

    tp_groups, dp_groups, edp_groups, ep_groups = (defaultdict(list) for _ in range(4))
    for rank, (t, e, q, p) in sorted(coords.items()):
        tp_groups[(e, q, p)].append(rank)
        dp_groups[(t, p)].append(rank)
        edp_groups[(t, e, p)].append(rank)
        ep_groups[(t, q, p)].append(rank)
    for members in tp_groups.values():
        p = coords[members[0]][3]
        ring("tp", members, m * len(bounds[p]) * passes * 2 * (tp - 1) / tp * b * s * h * P)
    for members in dp_groups.values():
        ring("dp", members, params(coords[members[0]][3])[0] * zero_bytes(dp))
    for members in edp_groups.values():
        ring("dp", members, params(coords[members[0]][3])[1] * zero_bytes(dp // ep))
    for members in ep_groups.values():
        p = coords[members[0]][3]
        moe_layers = sum(model.is_moe_layer(i) for i in bounds[p])
        for a in members:
            for c in members:
                if a != c:
                    moved["ep"].append((a, c, m * moe_layers * passes * (b * s / tp) * k * h * P / ep))
    for rank, (t, e, q, p) in coords.items():
        if p + 1 < pp:
            nxt = rank + tp * dp
            moved["pp"] += [(rank, nxt, m * b * s * h * P / tp), (nxt, rank, m * b * s * h * P / tp)]

    inter = {kind: np.zeros((servers, servers)) for kind in KINDS}
    inside = {kind: 0.0 for kind in KINDS}
    for kind, items in moved.items():
        for a, c, amount in items:
            if a // g == c // g:
                inside[kind] += amount
            else:
                inter[kind][a // g, c // g] += amount
    return inter, inside


CASES = [
    dict(servers=4, g=4, tp=2, pp=2, dp=4, ep=2, b=1, batch=16, zero=0, recompute=False),
    dict(servers=16, g=1, tp=2, pp=1, dp=8, ep=4, b=2, batch=16, zero=1, recompute=True),  # TP crosses servers
    dict(servers=3, g=4, tp=1, pp=3, dp=4, ep=4, b=1, batch=8, zero=3, recompute=False),  # 5 layers on 3 stages
    dict(servers=2, g=8, tp=2, pp=1, dp=8, ep=8, b=1, batch=8, zero=2, recompute=False),  # EP groups span both servers
]


def check_against_brute_force(case) -> float:
    """Asserts that the profile and the brute force agree; returns the inter-server total."""
    c = dict(case)
    training = Training(global_batch=c["batch"], zero_stage=c["zero"], recompute=c["recompute"], gpus_per_server=c["g"])
    par = Parallelism(tp=c["tp"], pp=c["pp"], dp=c["dp"], ep=c["ep"], micro_batch=c["b"])
    prof = profile(ParallelJob(model=MODEL, training=training, parallelism=par, servers=c["servers"]))
    inter, inside = brute_force(MODEL, **c)
    for kind in KINDS:
        np.testing.assert_allclose(prof.inter_server[kind], inter[kind], rtol=1e-12, err_msg=kind)
        assert prof.scale_up[kind].sum() == pytest.approx(inside[kind], rel=1e-12), kind
        assert prof.rank_bytes[kind] == pytest.approx(inter[kind].sum() + inside[kind], rel=1e-12), kind
    total = sum(inter[kind].sum() for kind in KINDS)
    assert prof.traffic_matrix().sum() == pytest.approx(total, rel=1e-12)
    return total


@pytest.mark.parametrize("case", CASES)
def test_traffic_matrix_equals_the_brute_force_count(case):
    assert check_against_brute_force(case) > 0


def divisors_of(n):
    return [d for d in range(1, n + 1) if n % d == 0]


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_random_splits_match_the_brute_force_count(data):
    g = data.draw(st.sampled_from([1, 2, 4]), "g")
    servers = data.draw(st.integers(1, 4), "servers")
    n = servers * g
    tp = data.draw(st.sampled_from([t for t in divisors_of(n) if t <= 2]), "tp")
    pp = data.draw(st.sampled_from([p for p in divisors_of(n // tp) if p <= MODEL.layers]), "pp")
    dp = n // (tp * pp)
    ep = data.draw(st.sampled_from([e for e in divisors_of(dp) if MODEL.moe.experts % e == 0]), "ep")
    b = data.draw(st.integers(1, 2), "b")
    batch = dp * b * data.draw(st.integers(1, 3), "m")
    zero = data.draw(st.integers(0, 3), "zero")
    recompute = data.draw(st.booleans(), "recompute")
    case = dict(servers=servers, g=g, tp=tp, pp=pp, dp=dp, ep=ep, b=b, batch=batch, zero=zero, recompute=recompute)
    check_against_brute_force(case)


@pytest.mark.parametrize("case", CASES)
def test_total_flops_do_not_depend_on_the_split(case):
    # 6 N_matmul + 12 L s h per token (+ a third more with recomputation, except the head's 6 V h + norm)
    c = dict(case)
    training = Training(global_batch=c["batch"], recompute=c["recompute"], gpus_per_server=c["g"])
    par = Parallelism(tp=c["tp"], pp=c["pp"], dp=c["dp"], ep=c["ep"], micro_batch=c["b"])
    prof = profile(ParallelJob(model=MODEL, training=training, parallelism=par, servers=c["servers"]))
    head = MODEL.vocab * MODEL.hidden + MODEL.hidden
    body = MODEL.matmul_active_params() - head
    factor = 8 if c["recompute"] else 6
    per_token = factor * body + 6 * head + (factor * 2) * MODEL.layers * MODEL.seq_len * MODEL.hidden
    assert prof.flops == pytest.approx(per_token * c["batch"] * MODEL.seq_len, rel=1e-12)
