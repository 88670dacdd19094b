"""ParallelJob: one clear InputError per bad split, the stage split and the Megatron rank order."""

from __future__ import annotations

import pytest

from topoopt_ilp.errors import EXIT_BAD_INPUT, InputError
from topoopt_ilp.jobs.job import Parallelism, ParallelJob, Training
from topoopt_ilp.jobs.model import MoE, TransformerModel

DENSE = TransformerModel(name="toy", layers=5, hidden=8, ffn=16, heads=4, kv_heads=2, vocab=10, seq_len=3)
MOE = TransformerModel(
    name="toy-moe", layers=2, hidden=4, ffn=8, heads=2, vocab=10, seq_len=3, moe=MoE(experts=4, top_k=2, expert_ffn=2)
)


def job(model=DENSE, servers=2, g=4, batch=16, **par) -> ParallelJob:
    degrees = dict(tp=2, pp=2, dp=2, ep=1, micro_batch=1) | par
    return ParallelJob(
        model=model,
        training=Training(global_batch=batch, gpus_per_server=g),
        parallelism=Parallelism(**degrees),
        servers=servers,
    )


@pytest.mark.parametrize(
    "model, par, field, words",
    [
        (DENSE, dict(tp=2, pp=2, dp=1), "job.parallelism", "the cluster has 2 servers x 4 = 8 accelerators"),
        (DENSE, dict(tp=8, pp=1, dp=1), "job.tp", "exceeds the model's 4 attention heads"),
        (DENSE, dict(tp=4, pp=1, dp=2), "job.tp", "does not divide the 4 heads and 2 KV heads"),
        (DENSE, dict(tp=1, pp=8, dp=1), "job.pp", "exceeds the model's 5 layers"),
        (DENSE, dict(ep=2), "job.ep", "on a dense model"),
        (MOE, dict(tp=1, pp=1, dp=8, ep=8), "job.ep", "does not divide the 4 experts"),
        (MOE, dict(tp=2, pp=1, dp=4, ep=4, micro_batch=1), None, None),
        (
            MOE,
            dict(tp=1, pp=2, dp=4, ep=4, micro_batch=8),
            "job.global_batch",
            "not a multiple of dp 4 x micro-batch 8",
        ),
        (DENSE, dict(tp=0), "job.tp", "must be an integer >= 1"),
    ],
)
def test_bad_splits(model, par, field, words):
    if field is None:
        job(model, **par)  # valid: ep 4 divides dp 4 and the 4 experts
        return
    with pytest.raises(InputError) as e:
        job(model, **par)
    assert e.value.field == field and words in str(e.value)
    assert e.value.exit_code == EXIT_BAD_INPUT
    assert "\n" not in str(e.value)


def test_ep_must_divide_dp():
    with pytest.raises(InputError, match="ep 4 does not divide dp 2"):
        job(MOE, servers=2, tp=2, pp=2, dp=2, ep=4)


@pytest.mark.parametrize(
    "kwargs, field",
    [
        (dict(global_batch=0), "job.global_batch"),
        (dict(global_batch=8, zero_stage=4), "job.zero_stage"),
        (dict(global_batch=8, efficiency=1.5), "job.efficiency"),
        (dict(global_batch=8, device_flops=-1.0), "job.device_flops"),
        (dict(global_batch=8, recompute="yes"), "job.recompute"),
    ],
)
def test_bad_training(kwargs, field):
    with pytest.raises(InputError) as e:
        Training(**kwargs)
    assert e.value.field == field


def test_stage_split_and_micro_batches():
    j = job(DENSE, tp=2, pp=2, dp=2, micro_batch=2)
    assert [list(r) for r in j.stage_layers()] == [[0, 1, 2], [3, 4]]
    assert j.micro_batches == 16 // (2 * 2)
    assert j.accelerators == 8


def test_rank_order_tp_fastest_then_dp_then_pp():
    # rank = t + tp (d + dp p), d = e + ep q: 8 ranks, tp 2, dp 2 (ep 2 inside it), pp 2.
    j = job(MOE, tp=2, pp=2, dp=2, ep=2)
    assert j.tp_groups() == ((0, 1), (2, 3), (4, 5), (6, 7))
    assert j.dp_groups() == ((0, 2), (1, 3), (4, 6), (5, 7))
    assert j.pp_groups() == ((0, 4), (1, 5), (2, 6), (3, 7))
    assert j.ep_groups() == ((0, 2), (1, 3), (4, 6), (5, 7))
    assert j.expert_dp_groups() == ((0,), (1,), (2,), (3,), (4,), (5,), (6,), (7,))
    assert [j.stage_of(r) for r in range(8)] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert j.rank(1, 1, 1) == 7


def test_expert_groups_inside_dp():
    # tp 1, pp 1, dp 8, ep 2: EP groups are consecutive DP pairs, expert-DP groups stride 2.
    j = job(MOE, servers=2, g=4, tp=1, pp=1, dp=8, ep=2)
    assert j.ep_groups() == ((0, 1), (2, 3), (4, 5), (6, 7))
    assert j.expert_dp_groups() == ((0, 2, 4, 6), (1, 3, 5, 7))


def test_wrong_types():
    with pytest.raises(InputError, match="expected a Training"):
        ParallelJob(model=DENSE, training=None, parallelism=Parallelism(tp=1, pp=1, dp=1), servers=1)
    with pytest.raises(InputError) as e:
        TransformerModel(name="x", layers=1, hidden=4, ffn=4, heads=1, vocab=2, seq_len=2, bias=1)
    assert e.value.field == "model.bias"
