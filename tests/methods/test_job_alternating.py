"""The alternating method on job instances (docs/guide/llm-jobs.md, **Choosing the split, the mapping
and the topology**): never worse than the heuristic pick it starts from, its split and mapping
recorded so that `topoopt verify` and `topoopt evaluate` score the same job, and its bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest

from topoopt_ilp.cli import main
from topoopt_ilp.core.instance import with_job_choice
from topoopt_ilp.errors import InputError, InstanceError
from topoopt_ilp.evaluation.evaluate import evaluate
from topoopt_ilp.evaluation.verify import verify
from topoopt_ilp.files.instance_file import instance_to_dict, parse_instance
from topoopt_ilp.files.solution_file import parse_solution, solution_to_dict
from topoopt_ilp.methods import solve
from topoopt_ilp.methods.job_split import pick_split_by_heuristic

MODEL = {"name": "small", "layers": 8, "hidden": 256, "ffn": 1024, "heads": 8, "vocab": 1000, "seq_len": 64}


def job_doc(parallelism="search", servers=8, degree=2, **job) -> dict:
    return {
        "format": "topoopt-instance",
        "version": 1,
        "name": "small-job",
        "cluster": {
            "servers": servers,
            "degree": degree,
            "link_bandwidth_gbps": 10,
            "accelerators_per_server": 2,
            "scale_up_gbps_per_accelerator": 800,
        },
        "job": {"model": dict(MODEL), "global_batch": 32, "parallelism": parallelism, "zero_stage": 0, **job},
    }


@pytest.fixture(scope="module")
def searched():
    return parse_instance(job_doc())


@pytest.fixture(scope="module")
def alternated(searched):
    return solve(searched, "alternating", rounds=2)


def test_alternating_is_never_worse_than_the_heuristic_pick(searched, alternated):
    pick = pick_split_by_heuristic(searched, candidates=8)[0]
    assert alternated.status == "feasible" and alternated.method == "alternating"
    assert alternated.metrics["iteration_time_s"] <= pick.iteration_time_s * (1 + 1e-12)
    assert alternated.objective == pytest.approx(alternated.metrics["iteration_time_s"], rel=1e-12)
    assert alternated.details["rounds"][0]["phase"].endswith(": start: heuristic design")


def test_the_recorded_split_and_mapping_reproduce_the_score(searched, alternated):
    choice = alternated.job
    assert set(choice) == {"parallelism", "server_map"}
    assert sorted(choice["server_map"]) == list(range(searched.n))
    assert not verify(searched, alternated).violations
    again = parse_solution(json.loads(json.dumps(solution_to_dict(alternated, directed=False))))
    assert dict(again.job["parallelism"]) == dict(choice["parallelism"])
    assert evaluate(searched, again).iteration_time_s == pytest.approx(
        alternated.metrics["iteration_time_s"], rel=1e-12
    )
    # the same job written as an instance file scores the same design the same way
    fixed = with_job_choice(searched, choice)
    doc = instance_to_dict(fixed)
    assert doc["job"]["server_map"] == list(choice["server_map"])
    reread = parse_instance(doc)
    bare = parse_solution({**solution_to_dict(alternated, directed=False), "job": None})
    assert evaluate(reread, bare).iteration_time_s == pytest.approx(alternated.metrics["iteration_time_s"], rel=1e-12)


def test_a_mapping_relabels_the_servers_and_keeps_the_fixed_terms():
    plain = parse_instance(job_doc({"tp": 2, "pp": 2, "dp": 4}))
    numbering = np.asarray(plain.compiled_job.server_of_rank[::2])  # server of each physical server
    flipped = [int(numbering[s]) for s in (1, 0, *range(2, 8))]
    mapped = parse_instance(job_doc({"tp": 2, "pp": 2, "dp": 4}, server_map=flipped))
    swap = {int(numbering[0]): int(numbering[1]), int(numbering[1]): int(numbering[0])}
    relabel = lambda s: swap.get(s, s)  # noqa: E731
    assert sorted((relabel(a), relabel(b), x) for a, b, x in plain.demand.mp) == sorted(mapped.demand.mp)
    assert mapped.compiled_job.fixed_time_s == plain.compiled_job.fixed_time_s


def test_the_command_line_writes_what_verify_and_evaluate_reproduce(tmp_path, capsys):
    path, out = tmp_path / "job.json", tmp_path / "job.solution.json"
    path.write_text(json.dumps(job_doc()))
    assert main(["solve", str(path), "--method", "alternating", "--rounds", "1", "--out", str(out)]) == 0
    assert "start: heuristic design" in capsys.readouterr().err  # the live rounds
    assert main(["verify", str(path), str(out)]) == 0
    capsys.readouterr()
    assert main(["evaluate", str(path), str(out), "--json"]) == 0
    scored = json.loads(capsys.readouterr().out)
    written = json.loads(out.read_text())
    assert "job" in written
    found = scored.get("iteration_time_s", scored.get("metrics", {}).get("iteration_time_s"))
    assert found == pytest.approx(written["metrics"]["iteration_time_s"], rel=1e-12)


@pytest.mark.parametrize(
    "options, match",
    [
        ({"time_limit_s": 0}, "time_limit_s"),
        ({"time_limit_s": -1.0}, "time_limit_s"),
        ({"rounds": 0}, "rounds"),
        ({"topology_method": "exact"}, "TopologyFinder"),
    ],
)
def test_bad_options_are_refused_before_anything_runs(searched, options, match):
    with pytest.raises(InputError, match=match):
        solve(searched, "alternating", **options)


@pytest.mark.parametrize(
    "server_map, field",
    [
        ([0, 1, 2, 3, 4, 5, 6], "job.server_map"),
        ([0, 1, 2, 3, 4, 5, 6, 6], "job.server_map[7]"),
        ([0, 1, 2, 3, 4, 5, 6, 8], "job.server_map[7]"),
        ([0, 1, 2, 3, 4, 5, 6, -1], "job.server_map[7]"),
    ],
)
def test_a_bad_server_map_names_its_field(server_map, field):
    with pytest.raises(InstanceError) as info:
        parse_instance(job_doc({"tp": 2, "pp": 2, "dp": 4}, server_map=server_map))
    assert info.value.field == field


def test_a_bad_job_choice_in_a_solution_is_a_verify_violation(searched, alternated):
    bad = parse_solution(
        {**solution_to_dict(alternated, directed=False), "job": {"parallelism": {"tp": 3, "pp": 1, "dp": 5}}}
    )
    report = verify(searched, bad)
    assert report.violations and "job choice" in report.violations[0]


@pytest.mark.parametrize("architecture", ["rail_optimised", "rail_only"])
def test_the_rail_tuned_split_is_the_best_of_every_split_on_that_network(searched, architecture):
    """Brute force: every split that fits, each on the equal-cost rail network by the evaluator."""
    from topoopt_ilp.core.job_section import ranked_parallelisations
    from topoopt_ilp.evaluation.architectures import evaluate_architecture
    from topoopt_ilp.methods.job_split import best_split_on_architecture, split_instance

    tuned = best_split_on_architecture(searched, architecture)
    splits = [p for _, p in ranked_parallelisations(searched.job, searched.cluster)]
    times = {
        p: evaluate_architecture(split_instance(searched, p), architecture, equal_cost=True).iteration_time_s
        for p in splits
    }
    assert len(tuned) == len(splits) >= 3
    assert tuned[0].iteration_time_s == pytest.approx(min(times.values()), rel=1e-12)
    assert times[tuned[0].parallelism] == pytest.approx(tuned[0].iteration_time_s, rel=1e-12)
    with pytest.raises(InputError, match="integer >= 1"):
        best_split_on_architecture(searched, architecture, candidates=0)


def test_rerouting_keeps_the_chosen_split(searched, alternated):
    from topoopt_ilp.methods.reroute import route

    rerouted = route(searched, alternated, time_limit_s=30)
    assert rerouted.job is not None and dict(rerouted.job["parallelism"]) == dict(alternated.job["parallelism"])
    assert not verify(searched, rerouted).violations
    assert rerouted.metrics["iteration_time_s"] <= alternated.metrics["iteration_time_s"] * (1 + 1e-9)
