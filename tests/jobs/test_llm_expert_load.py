"""The EP traffic of a given expert load (topoopt_ilp.jobs.expert_load) against a brute-force count
that walks every EP group, MoE layer, micro-batch, rank and expert and adds each all-to-all's bytes
(dispatch, combine, their gradients, and with recomputation the forward pair again) to the server
pair it crosses."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import tiny_moe_doc
from topoopt_ilp.files.instance_file import parse_instance
from topoopt_ilp.jobs.expert_load import ep_load_traffic, routing_shares


def brute_force(job, load: np.ndarray) -> np.ndarray:
    m, par, t = job.model, job.parallelism, job.training
    g, n = t.gpus_per_server, job.servers
    experts_per_rank = m.moe.experts // par.ep
    tokens = par.micro_batch * m.seq_len / par.tp  # a rank's tokens per micro-batch
    mean_row = load.sum() / par.ep
    token_bytes = m.hidden * t.precision_bytes
    passes = [("dispatch", "forward"), ("combine", "forward"), ("combine", "backward"), ("dispatch", "backward")]
    if t.recompute:
        passes += [("dispatch", "forward"), ("combine", "forward")]
    out = np.zeros((n, n))
    for group in job.ep_groups():
        moe_layers = [i for i in job.stage_layers()[job.stage_of(group[0])] if m.is_moe_layer(i)]
        for _layer in moe_layers:
            for _micro_batch in range(job.micro_batches):
                for i, rank in enumerate(group):
                    for j in range(m.moe.experts):
                        owner = group[j // experts_per_rank]
                        size = tokens * m.moe.top_k * load[i, j] / mean_row * token_bytes
                        for op, direction in passes:
                            # dispatch forward and combine backward go to the expert; the others return
                            to_expert = (op == "dispatch") == (direction == "forward")
                            a, b = (rank, owner) if to_expert else (owner, rank)
                            if a // g != b // g:
                                out[a // g, b // g] += size
    return out


@pytest.mark.parametrize("recompute", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_random_load_matches_the_brute_force_count(recompute, seed):
    job = parse_instance(tiny_moe_doc(recompute=recompute)).compiled_job.job
    load = np.random.default_rng(seed).integers(0, 10, size=(4, 4)).astype(float)
    load[0, 0] += 1  # a positive total
    inter, _ = ep_load_traffic(job, [routing_shares(load)] * job.model.moe_layers)
    expected = brute_force(job, load)
    assert expected.sum() > 0
    np.testing.assert_allclose(inter, expected, rtol=1e-12, atol=1e-9)
