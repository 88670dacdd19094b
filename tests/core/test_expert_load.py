"""Expert-load scenarios of a job (docs/guide/llm-jobs.md, **Expert load**): the EP bytes of a skewed
load worked out by hand, the uniform load reproducing the uniform traffic, the mean scenario, the
file form, and the bad inputs (exit 2 naming the field)."""

from __future__ import annotations

import copy
import json
from dataclasses import replace

import numpy as np
import pytest

from conftest import tiny_moe_doc
from topoopt_ilp.cli import main
from topoopt_ilp.core.job_section import GivenLoad, ZipfLoad, scenario_count
from topoopt_ilp.errors import InputError
from topoopt_ilp.files.instance_file import instance_to_dict, parse_instance
from topoopt_ilp.jobs.expert_load import zipf_popularity, zipf_scenarios
from topoopt_ilp.jobs.iteration import profile
from topoopt_ilp.methods.expert_scenarios import mean_instance, scenario_instance

# ------------------------------------------------------------------------------------------------
# By hand. One MoE layer (2 experts, top-1), h = 8, s = 4; 2 servers of one accelerator, tp = pp = 1,
# dp = ep = 2, micro-batch 1, global batch 2: m = 1 micro-batch. Each rank routes b s / tp = 4 tokens
# of h P = 16 bytes. Expert j sits on EP rank j. The load W = [[3, 1], [0, 4]]: rank 0 sends 1 token
# to expert 1 (on server 1), rank 1 sends none to expert 0. Per iteration 0 -> 1 carries the dispatch
# (forward) and the combine's gradient (backward) of that token, 2 x 16 = 32 bytes; 1 -> 0 its
# combine and the dispatch's gradient, 32 bytes. Uniform routing sends half of the 4 tokens each
# way, 4 times: 4 x 2 x 16 = 128 bytes each way.
# ------------------------------------------------------------------------------------------------
SMALL_MOE = {
    "name": "small-moe",
    "layers": 1,
    "hidden": 8,
    "ffn": 16,
    "heads": 2,
    "vocab": 10,
    "seq_len": 4,
    "moe": {"experts": 2, "top_k": 1, "expert_ffn": 8, "first_dense_layers": 0},
}
SKEWED = [[3, 1], [0, 4]]


def small_doc(**job) -> dict:
    return {
        "format": "topoopt-instance",
        "version": 1,
        "cluster": {"servers": 2, "degree": 1, "link_bandwidth_gbps": 100},
        "job": {
            "model": copy.deepcopy(SMALL_MOE),
            "global_batch": 2,
            "parallelism": {"tp": 1, "pp": 1, "dp": 2, "ep": 2},
            **job,
        },
    }


def ep_pairs(instance) -> dict:
    return {(a, b): v for a, b, v in instance.demand.mp}


def test_a_skewed_load_moves_the_hand_computed_bytes_between_servers():
    skewed = parse_instance(small_doc(expert_load=[{"matrix": SKEWED}]))
    assert ep_pairs(skewed) == pytest.approx({(0, 1): 32.0, (1, 0): 32.0}, rel=1e-12)
    uniform = parse_instance(small_doc())
    assert ep_pairs(uniform) == {(0, 1): 128.0, (1, 0): 128.0}


def test_a_matrix_counted_over_more_tokens_means_the_same():
    """The job fixes the volume; the matrix only how it splits."""
    tenfold = parse_instance(small_doc(expert_load=[{"matrix": [[30, 10], [0, 40]]}]))
    assert ep_pairs(tenfold) == pytest.approx({(0, 1): 32.0, (1, 0): 32.0}, rel=1e-12)


def test_a_uniform_matrix_reproduces_the_uniform_traffic():
    base = parse_instance(tiny_moe_doc())
    uniform = parse_instance(tiny_moe_doc(expert_load=[{"matrix": [[5.0] * 4] * 4}]))
    assert ep_pairs(uniform).keys() == ep_pairs(base).keys()
    for pair, size in ep_pairs(base).items():
        assert ep_pairs(uniform)[pair] == pytest.approx(size, rel=1e-12)
    assert uniform.compiled_job.scale_up_s == pytest.approx(base.compiled_job.scale_up_s, rel=1e-12)
    assert uniform.demand.allreduce == base.demand.allreduce
    assert profile(base.compiled_job.job).inter_server["ep"].sum() > 0  # the test would pass on no EP bytes


def test_per_layer_matrices_and_one_for_all_layers_agree_when_equal():
    one = parse_instance(
        tiny_moe_doc(expert_load=[{"matrix": [[1, 2, 3, 4], [4, 0, 0, 1], [0, 0, 1, 0], [2, 2, 2, 2]]}])
    )
    per_layer = parse_instance(
        tiny_moe_doc(expert_load=[{"layers": [[[1, 2, 3, 4], [4, 0, 0, 1], [0, 0, 1, 0], [2, 2, 2, 2]]] * 3}])
    )
    assert ep_pairs(one) == pytest.approx(ep_pairs(per_layer), rel=1e-12)


def test_the_mean_scenario_is_the_mean_of_the_scenarios_traffic():
    """The traffic is linear in the routing shares, and the mean scenario averages the shares."""
    inst = parse_instance(tiny_moe_doc(expert_load=[{"zipf": 1.5, "scenarios": 3, "seed": 7}]))
    assert scenario_count(inst.job) == 3
    each = [ep_pairs(scenario_instance(inst, k)) for k in range(3)]
    mean = ep_pairs(mean_instance(inst))
    assert mean == ep_pairs(inst)  # the default scenario is the mean
    for pair, size in mean.items():
        assert size == pytest.approx(sum(e.get(pair, 0.0) for e in each) / 3, rel=1e-12)
    assert each[0] != each[1]  # the permutation moves the hot experts


def test_with_two_ep_ranks_a_shared_popularity_leaves_the_pair_bytes_unchanged():
    """B[0, 1] = half (D[0, 1] + D[1, 0]) = half (p_1 + p_0) = half: the skew shows only in which
    direction the dispatch and the combine carry it."""
    doc = small_doc(expert_load=[{"matrix": [[3, 1], [3, 1]]}])
    assert ep_pairs(parse_instance(doc)) == pytest.approx({(0, 1): 128.0, (1, 0): 128.0}, rel=1e-12)


def test_zipf_scenarios_by_hand():
    """E = 2, s = 1: p = (2/3, 1/3); every EP rank routes by the same permuted popularity."""
    assert zipf_popularity(2, 1.0) == pytest.approx([2 / 3, 1 / 3])
    for w in zipf_scenarios(3, 2, 1.0, 4, seed=0):
        assert w.shape == (3, 2)
        assert sorted(w[0]) == pytest.approx([1 / 3, 2 / 3]) and (w == w[0]).all()
    assert zipf_popularity(4, 0.0) == pytest.approx([0.25] * 4)


def test_the_section_round_trips_through_the_file_form():
    doc = tiny_moe_doc(
        expert_load=[
            {"matrix": [[1, 2, 3, 4], [4, 0, 0, 1], [0, 0, 1, 0], [2, 2, 2, 2]]},
            {"zipf": 1.2, "scenarios": 2},
        ]
    )
    doc["job"]["expert_scenario"] = 2
    inst = parse_instance(doc)
    assert inst.job.expert_load[1] == ZipfLoad(1.2, 2, 0)
    again = parse_instance(json.loads(json.dumps(instance_to_dict(inst))))
    assert again.job == inst.job and again.demand == inst.demand


@pytest.mark.parametrize(
    ("load", "field", "message"),
    [
        ([{"matrix": [[1, 1]]}], "job.expert_load[0].matrix", "has 1 rows, expected 2"),
        ([{"matrix": [[1, 1, 1], [1, 1, 1]]}], "job.expert_load[0].matrix[0]", "has 3 entries, expected 2"),
        ([{"matrix": [[1, -1], [1, 1]]}], "job.expert_load[0].matrix[0][1]", "must be >= 0"),
        ([{"matrix": [[1, "2"], [1, 1]]}], "job.expert_load[0].matrix[0][1]", "expected a number"),
        ([{"matrix": [[0, 0], [0, 0]]}], "job.expert_load[0].matrix", "routes no tokens"),
        ([{"layers": [[[1, 1], [1, 1]]] * 2}], "job.expert_load[0].layers", "one matrix per MoE layer"),
        ([{"matrix": [[1, 1], [1, 1]], "layers": []}], "job.expert_load[0]", "exactly one of"),
        ([{"zipf": -1, "scenarios": 2}], "job.expert_load[0].zipf", "must be >= 0"),
        ([{"zipf": 1, "scenarios": 0}], "job.expert_load[0].scenarios", ">= 1"),
        ({"matrix": [[1, 1], [1, 1]]}, "job.expert_load", "expected a list"),
    ],
)
def test_a_bad_expert_load_names_its_field(load, field, message):
    with pytest.raises(InputError, match=message) as err:
        parse_instance(small_doc(expert_load=load))
    assert err.value.field == field


def test_a_scenario_out_of_range_and_a_dense_model_are_refused():
    with pytest.raises(InputError) as err:
        parse_instance(small_doc(expert_load=[{"matrix": SKEWED}], expert_scenario=1))
    assert err.value.field == "job.expert_scenario"
    dense = small_doc(expert_load=[{"matrix": SKEWED}])
    del dense["job"]["model"]["moe"]
    dense["job"]["parallelism"]["ep"] = 1
    with pytest.raises(InputError, match="has no experts") as err:
        parse_instance(dense)
    assert err.value.field == "job.expert_load"


def test_a_search_checks_the_rows_against_the_chosen_ep():
    doc = small_doc(expert_load=[{"matrix": [[1, 1]]}])
    doc["job"]["parallelism"] = "search"
    with pytest.raises(InputError, match="the job's ep is") as err:
        parse_instance(doc)
    assert err.value.field == "job.expert_load[0].matrix"


def test_the_cli_exits_2_naming_the_field(tmp_path, capsys):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(small_doc(expert_load=[{"matrix": [[1, -1], [1, 1]]}])))
    assert main(["solve", str(path)]) == 2
    assert "job.expert_load[0].matrix[0][1]" in capsys.readouterr().err


def test_replace_with_python_lists_hashes():
    inst = parse_instance(small_doc())
    spec = replace(inst.job, expert_load=[GivenLoad(matrix=[[3, 1], [0, 4]])])
    assert hash(spec) == hash(replace(inst.job, expert_load=(GivenLoad(matrix=((3.0, 1.0), (0.0, 4.0))),)))
    assert np.isclose(sum(b for *_, b in replace(inst, job=spec, demand=None).demand.mp), 64.0)
