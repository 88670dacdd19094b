"""The enumeration of parallelisations: a known-feasible split of Llama-3 70B, the exactness of its
pruning against an unpruned brute force, and exit 3 when nothing fits."""

from __future__ import annotations

import itertools

import pytest

from topoopt_ilp.errors import EXIT_INFEASIBLE, InputError, NoFeasibleParallelisationError
from topoopt_ilp.jobs.enumerate import divisors, feasible_parallelisations, peak_memory
from topoopt_ilp.jobs.iteration import profile
from topoopt_ilp.jobs.job import Parallelism, ParallelJob, Training
from topoopt_ilp.jobs.model import MoE, TransformerModel
from topoopt_ilp.jobs.zoo import GLOBAL_BATCH, LLM_ZOO

H100_HBM = 80e9


def test_divisors():
    assert divisors(12) == [1, 2, 3, 4, 6, 12]
    assert divisors(1) == [1]
    assert divisors(49) == [1, 7, 49]


def test_llama3_70b_on_64_servers_of_8():
    model = LLM_ZOO["llama3-70b"]
    training = Training(global_batch=1024)  # 8M tokens of 8192: ZeRO 1, bf16, Adam
    found = feasible_parallelisations(model, training, 64, H100_HBM)
    splits = {(j.parallelism.tp, j.parallelism.pp, j.parallelism.dp, j.parallelism.micro_batch) for j in found}
    # tp 8 inside a server, 4 stages of 20 layers, dp 16, micro-batch 1: about 34 GB per accelerator
    # (4.5 GB weights, 4.5 GB gradients, 2.4 GB sharded Adam state, 22.8 GB activations).
    assert (8, 4, 16, 1) in splits
    job = next(j for j in found if str(j.parallelism) == "tp8 pp4 dp16 mb1")
    assert 30e9 < peak_memory(job) < 40e9
    assert profile(job).memory_per_accelerator == peak_memory(job)
    # every split found multiplies to 512, fits, and keeps tp inside a server
    for j in found:
        p = j.parallelism
        assert p.tp * p.pp * p.dp == 512 and p.tp <= 8 and peak_memory(j) <= H100_HBM
    # without TP or PP the 70B model's 16 bytes per parameter (ZeRO 1: 4 + 12/512) do not fit
    assert (1, 1, 512, 1) not in splits


def brute_force(model, training, servers, hbm):
    """Every (tp, pp, dp, ep, b) in range, kept when ParallelJob accepts it and it fits: no pruning."""
    n = servers * training.gpus_per_server
    out = set()
    for tp, pp, ep, b in itertools.product(range(1, n + 1), range(1, n + 1), range(1, n + 1), range(1, 65)):
        if n % (tp * pp):
            continue
        par = Parallelism(tp=tp, pp=pp, dp=n // (tp * pp), ep=ep, micro_batch=b)
        try:
            job = ParallelJob(model=model, training=training, parallelism=par, servers=servers)
        except InputError:
            continue
        if max(s.total for s in profile(job).memory) <= hbm:
            out.add(str(par))
    return out


@pytest.mark.parametrize("hbm", [5.0e4, 7.0e4, 9.5e4, 1.1e5])
def test_pruning_loses_nothing(hbm):
    model = TransformerModel(
        name="toy-moe",
        layers=4,
        hidden=16,
        ffn=32,
        heads=4,
        vocab=50,
        seq_len=16,
        moe=MoE(experts=4, top_k=2, expert_ffn=8),
    )
    training = Training(global_batch=16, gpus_per_server=4, zero_stage=1)
    found = {str(j.parallelism) for j in feasible_parallelisations(model, training, 2, hbm, max_tp=8)}
    expected = brute_force(model, training, 2, hbm)
    assert found == expected
    assert 0 < len(found)


def test_nothing_fits_tiny_memory():
    with pytest.raises(NoFeasibleParallelisationError) as e:
        feasible_parallelisations(LLM_ZOO["llama3-70b"], Training(global_batch=1024), 64, 1e9)
    assert e.value.exit_code == EXIT_INFEASIBLE == 3
    assert "no parallelisation on 64 servers x 8 accelerators fits 1 GB" in str(e.value)


def test_bad_memory_size():
    with pytest.raises(InputError, match="positive byte count"):
        feasible_parallelisations(LLM_ZOO["llama3-70b"], Training(global_batch=1024), 64, 0)


@pytest.mark.parametrize("servers", [128, 512])
@pytest.mark.parametrize("name", sorted(LLM_ZOO))
def test_every_zoo_model_has_a_split_at_the_issue_sizes(name, servers):
    # 128 and 512 servers of 8 x 80 GB, each model's global batch; Llama-3.1 405B needs
    # recomputation at 128 servers (without it the least any split needs is 83.6 GB).
    recompute = name == "llama3.1-405b"
    training = Training(global_batch=GLOBAL_BATCH[name], recompute=recompute)
    found = feasible_parallelisations(LLM_ZOO[name], training, servers, H100_HBM)
    assert found and all(peak_memory(j) <= H100_HBM for j in found)


def test_llama31_405b_needs_recomputation_at_128_servers():
    with pytest.raises(NoFeasibleParallelisationError, match="the least any needs: 83.6 GB"):
        feasible_parallelisations(LLM_ZOO["llama3.1-405b"], Training(global_batch=2048), 128, H100_HBM)


@pytest.mark.parametrize(
    "servers, hbm, max_tp, field",
    [
        (0, 80e9, None, "servers"),
        (True, 80e9, None, "servers"),
        (64, float("inf"), None, "hbm_bytes"),
        (64, 80e9, 0, "max_tp"),
    ],
)
def test_bad_enumeration_arguments(servers, hbm, max_tp, field):
    with pytest.raises(InputError) as e:
        feasible_parallelisations(LLM_ZOO["llama3-70b"], Training(global_batch=1024), servers, hbm, max_tp=max_tp)
    assert e.value.field == field
