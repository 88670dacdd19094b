"""The benchmark scripts' argument types: a bad value is one usage line and exit 2, never a traceback."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import _args  # noqa: E402


def test_paper_names_accept_the_shipped_instances_and_name_the_choices_otherwise():
    assert _args.paper_names("dlrm-128-d8, bert-128-d8") == ["dlrm-128-d8", "bert-128-d8"]
    with pytest.raises(argparse.ArgumentTypeError, match="unknown paper instance dlrm-128; choose from bert-128-d4"):
        _args.paper_names("dlrm-128")
    for empty in ("", ","):
        with pytest.raises(argparse.ArgumentTypeError, match="at least one"):
            _args.paper_names(empty)
    with pytest.raises(argparse.ArgumentTypeError, match="one paper instance name, not 2"):
        _args.paper_name("dlrm-128-d8,bert-128-d8")
    assert _args.load_paper("dlrm-128-d8").n == 128


@pytest.mark.parametrize("text", ["x", "1,x", "1.5", "-1", "", "inf"])
def test_int_list_refuses_what_is_not_a_list_of_integers_at_least_zero(text):
    with pytest.raises(argparse.ArgumentTypeError):
        _args.int_list(text)


@pytest.mark.parametrize("text", ["x", "-1", "nan", "inf", "-inf", ""])
def test_seconds_refuses_negative_and_non_finite(text):
    with pytest.raises(argparse.ArgumentTypeError, match="seconds >= 0"):
        _args.seconds(text)


def test_good_values_parse():
    assert _args.int_list("0, 3") == [0, 3]
    assert _args.seconds("0") == 0.0 and _args.seconds("2.5") == 2.5
    assert _args.instance_file("instances/testbed-12.json") == str(ROOT / "instances" / "testbed-12.json")


def test_an_instance_file_that_does_not_load_gives_the_loader_message(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(argparse.ArgumentTypeError, match="malformed JSON"):
        _args.instance_file(str(bad))
    with pytest.raises(argparse.ArgumentTypeError, match="cannot read file"):
        _args.instance_files(f"instances/testbed-12.json,{tmp_path / 'missing.json'}")


@pytest.mark.parametrize(
    "script, args",
    [
        ("placement_scale.py", ["--instances", "nope"]),
        ("block_placement.py", ["--seeds", "0,x"]),
        ("search_variants.py", ["--variants", "kick_top=x"]),
        ("joint_small.py", ["--instances", "nope"]),
        ("schedule_overlap.py", ["--instances", "nope.json"]),
        ("model_build.py", ["1"]),
    ],
)
def test_a_script_given_a_bad_argument_exits_2_with_one_error_line(script, args):
    r = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), *args], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 2 and r.stdout == ""
    assert f"{script}: error: " in r.stderr and "Traceback" not in r.stderr
