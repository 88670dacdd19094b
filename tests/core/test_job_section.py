"""Job instances (docs/guide/llm-jobs.md, **Job instances**): a small job whose every number is
worked out by hand below, through the data types, the file reader and the commands; the bad inputs
of a job section; and the server numbering that puts DP groups on cosets."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from topoopt_ilp.cli import main
from topoopt_ilp.core.graph import circulant
from topoopt_ilp.core.instance import Cluster, Instance, JobSpec
from topoopt_ilp.errors import InputError, NoFeasibleParallelisationError
from topoopt_ilp.evaluation.architectures import evaluate_architecture
from topoopt_ilp.evaluation.evaluate import evaluate
from topoopt_ilp.files.instance_file import instance_to_dict, parse_instance
from topoopt_ilp.jobs.iteration import profile
from topoopt_ilp.jobs.job import Parallelism

# ------------------------------------------------------------------------------------------------
# The small job, by hand. A 4-layer transformer, h = 64, FFN 256 (SwiGLU: 3 matrices), 4 heads
# (MHA), vocabulary 100, s = 16, untied head, no biases. 4 servers x g = 2 accelerators, tp = pp =
# dp = 2, micro-batch 1, global batch 8, so m = 8 / (2 x 1) = 4 micro-batches. ZeRO 0, bf16 (P = G = 2).
#
# Parameters: attention 4 h^2 = 16384, FFN 3 h f = 49152, two RMSNorms 2h = 128: a layer 65664.
# Stage 0: 2 layers + embedding V h = 6400 = 137728; per rank / tp: 68864.
# Stage 1: 2 layers + final norm 64 + head 6400 = 137792; per rank: 68896.
# DP (ZeRO 0, k = 2): a member sends 2 (k-1)/k Psi G = 2 Psi: 137728 (stage 0), 137792 (stage 1).
#   Two DP groups per stage (t = 0, 1) on the same two servers: the servers' ring carries twice that,
#   an AllReduce of S = b k / (2 (k-1)) = b over 2 servers: S0 = 275456, S1 = 275584.
# Servers: rank = t + 2 (d + 2 p), server = rank // 2 = d + 2 p; numbered p + pp q (q = d):
#   physical 0, 1, 2, 3 -> 0, 2, 1, 3. Stage 0 on {0, 2}, stage 1 on {1, 3}: both cosets of Z_4.
# PP: per micro-batch and rank, b s h P / tp = 16 x 64 x 2 / 2 = 1024 bytes, x m = 4096, both ranks
#   of a server to the same next-stage server: 8192 bytes on 0->1, 1->0, 2->3, 3->2.
# TP (inside a server, tp = g): m L_p (4 + 0) 2 (tp-1)/tp b s h P = 4 x 2 x 4 x 1 x 2048 = 65536 per
#   rank, 131072 per server on the scale-up fabric: / (g x 800 Gbps = 2e11 B/s) = 6.5536e-7 s.
# Compute: per token and layer 6 N + 12 s h = 393984 + 12288 = 406272; stage 1 adds the head,
#   6 x 6464 = 38784: 851328 per token; 4 sequences x 16 tokens / tp = 32 tokens per rank:
#   27242496 FLOPs at 1 TFLOP/s x 0.5 = 5.4484992e-5 s. Bubble: (pp-1)/m of it = 1.3621248e-5 s.
# ------------------------------------------------------------------------------------------------
TINY_MODEL = {"name": "tiny", "layers": 4, "hidden": 64, "ffn": 256, "heads": 4, "vocab": 100, "seq_len": 16}
COMPUTE_S = 27242496 / 0.5e12
BUBBLE_S = COMPUTE_S / 4
SCALE_UP_S = 131072 / 2e11
DP_GROUPS = {(0, 2): 275456.0, (1, 3): 275584.0}
PP_PAIRS = {(0, 1): 8192.0, (1, 0): 8192.0, (2, 3): 8192.0, (3, 2): 8192.0}
# On the ring 0-1-2-3-0 (jumps [1]), shortest paths split each DP transfer over both 2-hop paths:
# every arc carries half of each group's S, plus PP on 0<->1 and 2<->3 (arc 0->1: 283712 bytes).
RING_BUSIEST_BYTES = 275456 / 2 + 275584 / 2 + 8192
RING_COMM_S = RING_BUSIEST_BYTES / 12.5e9 + 2 * 1e-6  # 100 Gbps links, 2 hops of 1 us


def tiny_doc(**job) -> dict:
    return {
        "format": "topoopt-instance",
        "version": 1,
        "name": "tiny-job",
        "cluster": {
            "servers": 4,
            "degree": 2,
            "link_bandwidth_gbps": 100,
            "accelerators_per_server": 2,
            "scale_up_gbps_per_accelerator": 800,
        },
        "job": {
            "model": dict(TINY_MODEL),
            "global_batch": 8,
            "parallelism": {"tp": 2, "pp": 2, "dp": 2},
            "zero_stage": 0,
            "device_tflops": 1,
            "efficiency": 0.5,
            **job,
        },
    }


@pytest.fixture
def tiny() -> Instance:
    return parse_instance(tiny_doc())


def test_the_small_job_compiles_to_the_hand_computed_traffic_and_terms(tiny):
    job = tiny.compiled_job
    assert job.compute_s == pytest.approx(COMPUTE_S, rel=1e-12)
    assert job.bubble_s == pytest.approx(BUBBLE_S, rel=1e-12)
    assert job.scale_up_s == pytest.approx(SCALE_UP_S, rel=1e-12)
    assert {g.members: g.bytes for g in tiny.demand.allreduce} == DP_GROUPS
    assert {(a, b): v for a, b, v in tiny.demand.mp} == PP_PAIRS
    assert job.server_of_rank == (0, 0, 2, 2, 1, 1, 3, 3)


def test_the_evaluator_adds_compute_bubble_and_scale_up_to_the_hand_computed_comm_time(tiny):
    m = evaluate(tiny, circulant(4, (1,), False), routing="shortest_path")
    assert m.comm_time_s == pytest.approx(RING_COMM_S, rel=1e-9)
    assert m.compute_time_s == pytest.approx(COMPUTE_S + BUBBLE_S + SCALE_UP_S, rel=1e-12)
    assert m.iteration_time_s == pytest.approx(COMPUTE_S + BUBBLE_S + SCALE_UP_S + RING_COMM_S, rel=1e-9)
    full = parse_instance(tiny_doc(overlap="full"))
    assert evaluate(full, circulant(4, (1,), False), routing="shortest_path").iteration_time_s == pytest.approx(
        max(COMPUTE_S + BUBBLE_S + SCALE_UP_S, RING_COMM_S), rel=1e-12
    )


def test_a_switched_baseline_adds_the_same_terms(tiny):
    """On a big switch with d B = 200 Gbps per server, the busiest port is server 1's (or 3's): the
    stage-1 DP ring's 275584 bytes plus 8192 of PP, each way."""
    m = evaluate_architecture(tiny, "big_switch")
    assert m.bandwidth_time_s == pytest.approx((275584 + 8192) / 25e9, rel=1e-12)
    assert m.iteration_time_s == pytest.approx(COMPUTE_S + BUBBLE_S + SCALE_UP_S + m.comm_time_s, rel=1e-12)


def test_solve_verify_evaluate_from_the_command_line(tmp_path, capsys):
    path, out = tmp_path / "tiny.json", tmp_path / "tiny.solution.json"
    path.write_text(json.dumps(tiny_doc()))
    assert main(["solve", str(path), "--out", str(out), "--quiet"]) == 0
    assert main(["verify", str(path), str(out)]) == 0
    assert main(["evaluate", str(path), str(out)]) == 0
    sol = json.loads(out.read_text())
    metrics = sol["metrics"]
    # The heuristic builds the ring 0-1-2-3-0 (d = 2 on 4 servers): the hand-computed time.
    assert metrics["iteration_time_s"] == pytest.approx(COMPUTE_S + BUBBLE_S + SCALE_UP_S + RING_COMM_S, rel=1e-9)
    assert sol["objective"] == pytest.approx(metrics["iteration_time_s"], rel=1e-12)
    capsys.readouterr()


def test_an_exact_bound_on_the_communication_bounds_the_iteration(tmp_path, capsys):
    path, out = tmp_path / "tiny.json", tmp_path / "tiny.solution.json"
    path.write_text(json.dumps(tiny_doc()))
    assert main(["solve", str(path), "--method", "exact", "--time-limit", "30", "--out", str(out), "--quiet"]) == 0
    assert main(["verify", str(path), str(out)]) == 0
    sol = json.loads(out.read_text())
    fixed = COMPUTE_S + BUBBLE_S + SCALE_UP_S
    assert fixed <= sol["bound"] <= sol["objective"]
    assert sol["objective"] <= COMPUTE_S + BUBBLE_S + SCALE_UP_S + RING_COMM_S * (1 + 1e-9)
    capsys.readouterr()


def test_the_job_section_round_trips(tiny):
    moe = {"experts": 4, "top_k": 2, "expert_ffn": 32}
    doc = tiny_doc(model={**TINY_MODEL, "moe": moe}, parallelism={"tp": 2, "pp": 1, "dp": 4, "ep": 2}, recompute=True)
    for inst in (tiny, parse_instance(doc)):
        again = parse_instance(json.loads(json.dumps(instance_to_dict(inst))))
        assert again == inst and again.demand == inst.demand
    assert "demand" not in instance_to_dict(tiny)
    assert replace(tiny, name="other").compiled_job == tiny.compiled_job  # replace() keeps the job's demand


def test_an_instance_without_a_job_keeps_its_meaning():
    c = Cluster(servers=4, degree=2, link_bandwidth_gbps=100)
    assert c.accelerators_per_server == 1 and c.scale_up_gbps_per_accelerator is None
    doc = tiny_doc()
    del doc["job"]
    doc["demand"] = {"allreduce": [{"members": "all", "bytes": 1e6}]}
    inst = parse_instance(doc)
    assert inst.compiled_job is None
    m = evaluate(inst, circulant(4, (1,), False), routing="shortest_path")
    assert m.compute_time_s == 0 and m.iteration_time_s == m.comm_time_s


def test_the_traffic_adds_up_to_the_profile(tiny):
    """The compiled demand moves, between servers, every byte the job's profile moves there."""
    prof = profile(tiny.compiled_job.job)
    ring = sum(2 * (g.size - 1) / g.size * g.bytes * g.size for g in tiny.demand.allreduce)
    mp = sum(v for _, _, v in tiny.demand.mp)
    assert ring + mp == pytest.approx(prof.traffic_matrix().sum(), rel=1e-12)


@pytest.mark.parametrize(
    "model, tp, pp, dp",
    [("llama3-70b", 8, 4, 32), ("llama3-70b", 8, 1, 128), ("llama3-70b", 4, 2, 128), ("gpt3-175b", 16, 2, 32)],
)
def test_dp_groups_sit_on_cosets(model, tp, pp, dp):
    """Numbered p + pp q, every DP group's servers are a coset {c + (n/k) i} of Z_n (module docstring)."""
    n = 128
    cluster = Cluster(
        servers=n, degree=8, link_bandwidth_gbps=400, accelerators_per_server=8, scale_up_gbps_per_accelerator=3600
    )
    spec = JobSpec(model=model, global_batch=2048, parallelism=Parallelism(tp=tp, pp=pp, dp=dp))
    inst = Instance(cluster=cluster, job=replace(spec, memory_gb=1e6))
    assert inst.demand.allreduce
    for g in inst.demand.allreduce:
        k, start = g.size, min(g.members)
        assert n % k == 0 and sorted(g.members) == [(start + n // k * i) % n for i in range(k)], g.members


def test_search_picks_a_feasible_split_and_agrees_with_it_given(tiny):
    searched = parse_instance(tiny_doc(parallelism="search"))
    chosen = searched.compiled_job.job.parallelism
    given = parse_instance(
        tiny_doc(
            parallelism={
                "tp": chosen.tp,
                "pp": chosen.pp,
                "dp": chosen.dp,
                "ep": chosen.ep,
                "micro_batch": chosen.micro_batch,
            }
        )
    )
    assert given.demand == searched.demand and given.compiled_job.fixed_time_s == searched.compiled_job.fixed_time_s


# ------------------------------------------------------------------------------------------------ bad input
BAD = {
    "degrees do not multiply to servers x g": (
        {"parallelism": {"tp": 2, "pp": 2, "dp": 1}},
        "job.parallelism",
        "8 accelerators",
    ),
    "tp above the heads": ({"parallelism": {"tp": 8, "pp": 1, "dp": 1}}, "job.parallelism.tp", "4 attention heads"),
    "pp above the layers": ({"parallelism": {"tp": 1, "pp": 8, "dp": 1}}, "job.parallelism.pp", "4 layers"),
    "ep not dividing the experts": (
        {
            "model": {**TINY_MODEL, "moe": {"experts": 3, "top_k": 1, "expert_ffn": 32}},
            "parallelism": {"tp": 2, "pp": 2, "dp": 2, "ep": 2},
        },
        "job.parallelism.ep",
        "3 experts",
    ),
    "unknown zoo model": ({"model": "llama-9"}, "job.model", "unknown model"),
    "a split that does not fit memory": ({"memory_gb": 1e-6}, "job.parallelism", "GB per accelerator"),
    "a bad micro-batch": ({"parallelism": {"tp": 2, "pp": 2, "dp": 2, "micro_batch": 3}}, "job.global_batch", "8"),
    "a string degree": ({"parallelism": {"tp": "2", "pp": 2, "dp": 2}}, "job.parallelism.tp", "integer"),
    "an unknown key": ({"tensor_parallel": 2}, "job", "unknown key"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_jobs_are_one_line_exit_2(tmp_path, capsys, case):
    job, field, words = BAD[case]
    path = tmp_path / "job.json"
    path.write_text(json.dumps(tiny_doc(**job)))
    assert main(["solve", str(path), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith(f"error: {path}: {field}: "), err
    assert words in err, err


def test_intra_server_traffic_needs_a_scale_up_fabric(tmp_path, capsys):
    doc = tiny_doc()
    del doc["cluster"]["scale_up_gbps_per_accelerator"]
    path = tmp_path / "job.json"
    path.write_text(json.dumps(doc))
    assert main(["validate", str(path)]) == 2
    assert "cluster.scale_up_gbps_per_accelerator" in capsys.readouterr().err


def test_a_job_no_split_fits_is_exit_3(tmp_path, capsys):
    path = tmp_path / "job.json"
    path.write_text(json.dumps(tiny_doc(parallelism="search", memory_gb=1e-6)))
    assert main(["solve", str(path), "--quiet"]) == 3
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no parallelisation" in err and str(path) in err, err
    with pytest.raises(NoFeasibleParallelisationError):
        parse_instance(tiny_doc(parallelism="search", memory_gb=1e-6))


def test_an_instance_has_one_traffic_section():
    doc = tiny_doc()
    doc["demand"] = {"all_to_all": 1.0}
    with pytest.raises(InputError, match="exactly one of 'demand', 'workload' and 'job' \\(it has demand and job\\)"):
        parse_instance(doc)


# ------------------------------------------------------------------------------------------------ picking by the heuristic
def test_the_heuristic_pick_is_the_best_split_each_designed_on_its_own(tmp_path, capsys):
    """Every split of the small job that fits, each as its own file through `topoopt solve`: the
    pick is one with the least iteration time."""
    from topoopt_ilp.core.job_section import ranked_parallelisations
    from topoopt_ilp.methods.job_split import pick_split_by_heuristic

    searched = parse_instance(tiny_doc(parallelism="search"))
    splits = [p for _, p in ranked_parallelisations(searched.job, searched.cluster)]
    scores = pick_split_by_heuristic(searched, candidates=len(splits))
    assert len(scores) == len(splits) >= 3
    times = {}
    for k, p in enumerate(splits):
        par = {"tp": p.tp, "pp": p.pp, "dp": p.dp, "ep": p.ep, "micro_batch": p.micro_batch}
        path, out = tmp_path / f"{k}.json", tmp_path / f"{k}.solution.json"
        path.write_text(json.dumps(tiny_doc(parallelism=par)))
        assert main(["solve", str(path), "--out", str(out), "--quiet"]) == 0
        times[p] = json.loads(out.read_text())["metrics"]["iteration_time_s"]
    capsys.readouterr()
    assert times[scores[0].parallelism] == pytest.approx(min(times.values()), rel=1e-12)
    assert [s.iteration_time_s for s in scores] == sorted(s.iteration_time_s for s in scores)


def test_servers_holding_two_stages_keep_the_rank_order():
    """g = 4 with tp dp = 2: a server holds ranks of two stages, so servers are numbered rank // g."""
    doc = tiny_doc(parallelism={"tp": 1, "pp": 4, "dp": 2})
    doc["cluster"].update(servers=2, degree=1, accelerators_per_server=4)
    inst = parse_instance(doc)
    assert inst.compiled_job.server_of_rank == (0, 0, 0, 0, 1, 1, 1, 1)
    # stages 0, 1 on server 0 and 2, 3 on server 1: only the PP hop between stages 1 and 2 leaves a server
    assert {(a, b) for a, b, _ in inst.demand.mp} == {(0, 1), (1, 0)} and not inst.demand.allreduce
