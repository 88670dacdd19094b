"""``topoopt generate`` for the LLM zoo, and the shipped job instances (instances/llm/): each solves
with the heuristic and verifies, and is what the generator writes."""

from __future__ import annotations

import json

import pytest

from conftest import INSTANCES
from topoopt_ilp.cli import main
from topoopt_ilp.files.instance_file import load_instance
from topoopt_ilp.files.llm_zoo import generate_job, llm_filename
from topoopt_ilp.jobs.job import Parallelism
from topoopt_ilp.jobs.zoo import GLOBAL_BATCH, LLM_ZOO

SHIPPED = sorted(p.name for p in (INSTANCES / "llm").glob("*.json"))


def test_the_shipped_set_covers_the_zoo_at_128_and_512_servers_and_both_degrees():
    assert len(SHIPPED) >= 5
    models = {name.split("-128-")[0] for name in SHIPPED if "-128-" in name}
    assert {"llama3-70b", "gpt3-175b", "mixtral-8x7b"} <= models <= set(LLM_ZOO)
    assert {name.split("-512-")[0] for name in SHIPPED if "-512-d8-400g" in name} == set(LLM_ZOO)
    assert any("-d4-" in name for name in SHIPPED) and any("-d8-" in name for name in SHIPPED)
    for name in SHIPPED:
        assert (INSTANCES / "llm" / name).stat().st_size < 2000  # the job, not its traffic


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_llm_instance_solves_with_the_heuristic_and_verifies(tmp_path, capsys, name):
    path, out = INSTANCES / "llm" / name, tmp_path / "solution.json"
    assert main(["solve", str(path), "--out", str(out), "--quiet"]) == 0
    assert main(["verify", str(path), str(out)]) == 0
    inst = load_instance(path)
    job = inst.compiled_job
    metrics = json.loads(out.read_text())["metrics"]
    fixed = job.compute_s + job.bubble_s + job.scale_up_s
    assert metrics["iteration_time_s"] == pytest.approx(fixed + metrics["comm_time_s"], rel=1e-12)
    # the file's description names the split its job section gives
    assert str(job.job.parallelism) in inst.description
    capsys.readouterr()


def test_a_shipped_instance_is_what_generate_writes(tmp_path, capsys):
    name = "llama3-70b-128-d4-400g.json"
    out = tmp_path / name
    assert (
        main(["generate", "llama3-70b", "--servers", "128", "--degree", "4", "--bandwidth", "400", "-o", str(out)]) == 0
    )
    assert json.loads(out.read_text()) == json.loads((INSTANCES / "llm" / name).read_text())
    capsys.readouterr()


def test_generate_writes_a_job_instance_with_the_zoo_batch_and_the_cluster():
    data = generate_job("llama3-70b", 16, 4, 100, parallelism=Parallelism(tp=8, pp=4, dp=4))
    assert data["name"] == llm_filename("llama3-70b", 16, 4, 100).removesuffix(".json")
    assert data["cluster"]["accelerators_per_server"] == 8 and data["cluster"]["scale_up_gbps_per_accelerator"] == 3600
    assert data["job"] == {
        "model": "llama3-70b",
        "global_batch": GLOBAL_BATCH["llama3-70b"],
        "parallelism": {"tp": 8, "pp": 4, "dp": 4, "ep": 1, "micro_batch": 1},
    }
    assert generate_job("llama3-70b", 16, 4, 100, search=True)["job"]["parallelism"] == "search"


@pytest.mark.parametrize(
    "argv, code, words",
    [
        (["llama3-70b", "--tp", "8"], 2, "--tp, --pp and --dp together"),
        (["llama3-70b", "--tp", "8", "--pp", "3", "--dp", "5"], 2, "accelerators"),
        (["dlrm", "--tp", "8"], 2, "are for LLM jobs"),
        (["llama3.1-405b"], 3, "no parallelisation"),
    ],
)
def test_generate_refuses_in_one_line(capsys, argv, code, words):
    assert main(["generate", *argv[:1], "--servers", "16", "--degree", "4", "--bandwidth", "100", *argv[1:]]) == code
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and words in err, err


def test_generate_picks_by_the_heuristic_and_the_file_verifies(tmp_path, capsys):
    out, sol = tmp_path / "job.json", tmp_path / "solution.json"
    argv = ["generate", "llama3-70b", "--servers", "16", "--degree", "4", "--bandwidth", "100"]
    assert main([*argv, "--pick", "heuristic", "--candidates", "2", "-o", str(out)]) == 0
    data = json.loads(out.read_text())
    assert isinstance(data["job"]["parallelism"], dict) and "picked by the evaluator" in data["description"]
    assert main(["solve", str(out), "--out", str(sol), "--quiet"]) == 0
    assert main(["verify", str(out), str(sol)]) == 0
    assert main([*argv, "--pick", "heuristic", "--search"]) == 2
    capsys.readouterr()
