"""The CLI as a user runs it: outputs, exit codes, atomic writes, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import INSTANCES, minimal
from topoopt_ilp.cli import main

TESTBED = str(INSTANCES / "testbed-12.json")


def run(*args):
    return subprocess.run([sys.executable, "-m", "topoopt_ilp", *args], capture_output=True, text=True, timeout=120)


def test_solve_testbed_writes_a_verified_solution(tmp_path, capsys):
    out = tmp_path / "tb.json"
    assert main(["solve", TESTBED, "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "jumps [1, 5]" in text and "verified           yes" in text
    data = json.loads(out.read_text())
    assert data["format"] == "topoopt-solution" and data["status"] == "feasible"
    assert data["topology"]["jumps"] == [1, 5] and data["metrics"]["diameter"] == 3
    assert main(["verify", TESTBED, str(out)]) == 0
    assert main(["evaluate", TESTBED, str(out), "--json"]) == 0
    metrics = json.loads(capsys.readouterr().out.split("\n", 1)[1])
    assert metrics["iteration_time_s"] == pytest.approx(data["metrics"]["iteration_time_s"])


def test_verify_says_a_file_without_a_design_has_nothing_to_verify(tmp_path, capsys):
    out = tmp_path / "none.json"
    assert main(["solve", TESTBED, "--method", "exact", "--time-limit", "0", "--out", str(out), "--quiet"]) == 4
    capsys.readouterr()
    assert main(["verify", TESTBED, str(out)]) == 1
    assert "holds no design (status no_solution" in capsys.readouterr().out


def test_evaluate_names_a_file_without_a_design_and_warns_on_false_metrics(tmp_path, capsys):
    none = tmp_path / "none.json"
    assert main(["solve", TESTBED, "--method", "exact", "--time-limit", "0", "--out", str(none), "--quiet"]) == 4
    capsys.readouterr()
    assert main(["evaluate", TESTBED, str(none)]) == 2
    assert f"{none}: holds no design (status no_solution)" in capsys.readouterr().err
    out = tmp_path / "tb.json"
    assert main(["solve", TESTBED, "--out", str(out), "--quiet"]) == 0
    data = json.loads(out.read_text())
    data["metrics"]["iteration_time_s"] = 0.001  # a false claim: evaluate's own scores are right, but say so
    out.write_text(json.dumps(data))
    assert main(["evaluate", TESTBED, str(out)]) == 0
    captured = capsys.readouterr()
    assert "fails verification" in captured.err and "metrics.iteration_time_s is 0.001" in captured.err
    assert "0.001" not in captured.out


def test_an_instance_problem_found_by_solve_names_the_file(tmp_path, capsys):
    data = json.loads(open(MIX8).read())
    data["cluster"].update(degree=1, regular=False)
    path = tmp_path / "deg1.json"
    path.write_text(json.dumps(data))
    assert main(["solve", str(path)]) == 2
    assert f"error: {path}: cluster.degree: degree 1" in capsys.readouterr().err


def test_verify_reports_violations_with_exit_1(tmp_path, capsys):
    out = tmp_path / "tb.json"
    assert main(["solve", TESTBED, "--out", str(out), "--quiet"]) == 0
    data = json.loads(out.read_text())
    data["topology"]["links"].append([0, 6, 1])
    data["metrics"]["iteration_time_s"] *= 2
    out.write_text(json.dumps(data))
    assert main(["verify", TESTBED, str(out)]) == 1
    text = capsys.readouterr().out
    assert "server 0 has degree 5, needs exactly 4" in text


@pytest.mark.parametrize(
    "args, code, message",
    [
        (["solve", "missing.json"], 2, "cannot read file"),
        (["solve", TESTBED, "--method", "exact", "--backend", "nosuch"], 2, "nosuch"),
        (
            ["solve", TESTBED, "--backend", "highs"],
            2,
            "--backend applies to --method exact or alternating, not heuristic",
        ),
        (["solve", TESTBED, "--time-limit", "-1"], 2, "must be a finite number >= 0"),
        (["solve", TESTBED, "--threads", "0"], 2, "must be an integer >= 1"),
        (["evaluate", TESTBED], 2, "has no fixed_topology"),
        (["evaluate", TESTBED, TESTBED], 2, "(this is an instance file)"),
        (
            ["solve", str(INSTANCES / "testbed-12.json"), "--method", "baseline", "--baseline", "torus", "--seed", "x"],
            2,
            "expected an integer",
        ),
        (["solve", TESTBED, "--solver-option", "highs.presolve=off"], 2, "--solver-option applies to --method exact"),
        (
            ["solve", TESTBED, "--method", "exact", "--solver-option", "highs.presolve"],
            2,
            "expected BACKEND.NAME=VALUE",
        ),
        (
            ["solve", TESTBED, "--method", "exact", "--solver-option", "cbc.cuts=off"],
            2,
            "is for cbc, but the solve runs on highs",
        ),
        (
            ["solve", TESTBED, "--method", "exact", "--solver-option", "highs.no_such=1"],
            2,
            "HiGHS rejected option no_such=1",
        ),
        (
            ["solve", TESTBED, "--method", "exact", "--backend", "scip", "--solver-option", "scip.x=1"],
            2,
            "scip takes no native parameters (highs, cbc do)",
        ),
        (["solve", TESTBED, "--method", "exact", "--seed", "-1"], 2, "--seed must be an integer >= 0, got -1"),
        (["solve", TESTBED, "--method", "baseline", "--seed", "-1"], 2, "--seed must be an integer >= 0, got -1"),
        (["compare", TESTBED, "--seed", "-1"], 2, "--seed must be an integer >= 0, got -1"),
        (
            ["generate", "bert", "--servers", "7", "--degree", "3", "--bandwidth", "1"],
            2,
            "servers x degree = 21 is odd",
        ),
        (
            ["solve", TESTBED, "--method", "exact", "--warm-start", "missing.json"],
            2,
            "warm start file missing.json does not exist",
        ),
        (
            ["solve", TESTBED, "--method", "exact", "--warm-start", "no/such/sol"],
            2,
            "warm start file no/such/sol does not exist",
        ),
        (["solve", TESTBED, "--method", "exact", "--warm-start", "heurstic"], 2, "'heurstic' is none of these"),
        (
            ["solve", TESTBED, "--method", "exact", "--rings", "coset"],
            2,
            "the ring policy (rings) is the placement problem's",
        ),
        (["solve", TESTBED, "--rings", "coset"], 2, "--rings applies to --method exact or alternating, not heuristic"),
        (["solve", TESTBED, "--method", "exact", "--rings", "longest"], 2, "invalid choice: 'longest'"),
    ],
)
def test_bad_usage_is_one_line_and_exit_2(args, code, message, tmp_path):
    r = run(*args, "--out", str(tmp_path / "x.json")) if args[0] == "solve" else run(*args)
    assert r.returncode == code, r.stderr
    assert message in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert not (tmp_path / "x.json").exists()


def test_solver_options_reach_the_solver(tmp_path, capsys):
    """--solver-option is passed through: a node limit of 0 stops HiGHS at the root, where the same
    solve without it proves its model optimal."""
    mix = str(INSTANCES / "mix-8.json")
    args = ["solve", mix, "--method", "exact", "--warm-start", "none", "--json"]
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)["details"]["model_status"] == "optimal"
    code = main([*args, "--solver-option", "highs.mip_max_nodes=0"])
    out = json.loads(capsys.readouterr().out)
    assert out["details"].get("model_status", out["status"]) in ("feasible", "no_solution") and code in (0, 4)


def test_odd_regular_instance_is_refused(tmp_path):
    p = tmp_path / "odd.json"
    p.write_text(json.dumps(minimal(cluster={"servers": 5, "degree": 3, "link_bandwidth_gbps": 1})))
    r = run("validate", str(p))
    assert r.returncode == 2 and "servers*degree = 15 is odd" in r.stderr


def test_validate_and_help(capsys):
    assert main(["validate", TESTBED]) == 0
    assert "12 servers, degree 4, 25 Gbps" in capsys.readouterr().out
    for cmd in ("solve", "verify", "evaluate", "validate"):
        with pytest.raises(SystemExit) as exc:
            main([cmd, "--help"])
        assert exc.value.code == 0
        assert "usage: topoopt" in capsys.readouterr().out


def test_console_script_and_module_agree(tmp_path):
    exe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import shutil,sys; print(shutil.which('topoopt', path=sys.argv[1]))",
            str(__import__("pathlib").Path(sys.executable).parent),
        ],
        capture_output=True,
        text=True,
    ).stdout.strip()
    assert exe != "None"
    a = subprocess.run([exe, "solve", TESTBED, "--json"], capture_output=True, text=True)
    b = run("solve", TESTBED, "--json")
    assert a.returncode == b.returncode == 0
    ja, jb = json.loads(a.stdout), json.loads(b.stdout)
    assert ja["topology"] == jb["topology"] and ja["metrics"] == jb["metrics"]


def test_every_shipped_instance_solves_and_verifies(tmp_path):
    for path in sorted(INSTANCES.glob("*.json")):
        out = tmp_path / (path.stem + ".sol.json")
        assert main(["solve", str(path), "--out", str(out), "--quiet"]) == 0, path
        assert main(["verify", str(path), str(out)]) == 0, path


def test_exact_export_and_warm_start_file(tmp_path, capsys):
    import highspy

    inst = str(INSTANCES / "dlrm-like-6.json")
    heur = tmp_path / "heur.json"
    assert main(["solve", inst, "--out", str(heur), "--quiet"]) == 0
    model = tmp_path / "model.mps"
    out = tmp_path / "exact.json"
    code = main(
        [
            "solve",
            inst,
            "--method",
            "exact",
            "--warm-start",
            str(heur),
            "--time-limit",
            "60",
            "--export-model",
            str(model),
            "--out",
            str(out),
            "--json",
        ]
    )
    assert code == 0
    sol = json.loads(out.read_text())
    assert sol["details"]["warm_start"] == str(heur)
    # The exported model, re-read by HiGHS on its own, has the optimum the MILP reported (lambda, scaled).
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    assert h.readModel(str(model)) == highspy.HighsStatus.kOk
    h.run()
    lam = h.getInfo().objective_function_value
    scale = 2 * 5 / 6 * 20e6  # the model counts bytes in units of its largest demand entry (the ring share)
    assert lam * 40e9 / 8 / scale == pytest.approx(sol["details"]["milp_throughput"], rel=1e-6)
    assert main(["verify", inst, str(out)]) == 0
    capsys.readouterr()


def test_placement_on_a_fixed_topology_by_each_formulation(tmp_path, capsys):
    inst = str(INSTANCES / "dlrm-mini-8-fixed.json")
    objectives = {}
    for formulation in ("auto", "enumeration", "milp"):
        out = tmp_path / f"{formulation}.json"
        assert (
            main(
                [
                    "solve",
                    inst,
                    "--method",
                    "exact",
                    "--formulation",
                    formulation,
                    "--time-limit",
                    "120",
                    "--out",
                    str(out),
                    "--quiet",
                ]
            )
            == 0
        )
        sol = json.loads(out.read_text())
        assert sol["status"] == "optimal" and sol["details"]["algorithm"] == (
            "milp" if formulation == "milp" else "enumeration"
        )
        objectives[formulation] = sol["objective"]
        assert main(["verify", inst, str(out)]) == 0
    assert (
        objectives["auto"]
        == pytest.approx(objectives["milp"], rel=1e-6)
        == pytest.approx(objectives["enumeration"], rel=1e-6)
    )
    capsys.readouterr()
    assert main(["solve", inst, "--method", "exact", "--formulation", "naive"]) == 2
    assert "unknown formulation 'naive' for the placement problem" in capsys.readouterr().err
    # one ring per group in coset order, the placement model of earlier releases: never better here
    out = tmp_path / "coset.json"
    assert main(["solve", inst, "--method", "exact", "--rings", "coset", "--out", str(out), "--quiet"]) == 0
    sol = json.loads(out.read_text())
    assert sol["status"] == "optimal" and sol["details"]["rings"] == "coset"
    assert sol["objective"] >= objectives["auto"] * (1 - 1e-9) and main(["verify", inst, str(out)]) == 0


MIX8 = str(INSTANCES / "mix-8.json")


def _no_solve(*args, **kwargs):
    raise AssertionError("the output path must be checked before solving")


@pytest.mark.parametrize(
    "target, message",
    [
        ("nodir/x.json", "cannot write {tmp}/nodir/x.json: directory {tmp}/nodir does not exist"),
        ("adir", "cannot write {tmp}/adir: is a directory"),
        ("/proc/x.json", "cannot write /proc/x.json: directory /proc is not writable"),
        ("", "--out needs a file name, got ''"),
    ],
)
def test_unwritable_out_is_bad_input_before_solving(tmp_path, capsys, monkeypatch, target, message):
    import importlib

    (tmp_path / "adir").mkdir()
    monkeypatch.setattr(importlib.import_module("topoopt_ilp.methods"), "solve", _no_solve)
    path = target if target in ("", "/proc/x.json") else str(tmp_path / target)
    assert main(["solve", MIX8, "--out", path]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message.format(tmp=tmp_path) in err
    assert main(["solve", MIX8, "--method", "exact", "--export-model", str(tmp_path / "nodir" / "m.lp")]) == 2
    assert f"cannot write {tmp_path}/nodir/m.lp: directory {tmp_path}/nodir does not exist" in capsys.readouterr().err


def test_unwritable_outputs_of_generate_and_draw(tmp_path, capsys):
    assert (
        main(
            [
                "generate",
                "dlrm",
                "--servers",
                "8",
                "--degree",
                "2",
                "--bandwidth",
                "100",
                "-o",
                str(tmp_path / "nodir" / "g.json"),
            ]
        )
        == 2
    )
    assert "directory" in capsys.readouterr().err and not (tmp_path / "nodir").exists()
    assert main(["generate", "dlrm", "--servers", "8", "--degree", "2", "--bandwidth", "100", "-o", ""]) == 2
    assert "-o needs a file name" in capsys.readouterr().err
    sol = tmp_path / "s.json"
    assert main(["solve", MIX8, "--out", str(sol), "--quiet"]) == 0
    assert main(["draw", str(sol), "-o", str(tmp_path / "nodir" / "d.png")]) == 2
    assert f"cannot write {tmp_path}/nodir/d.png: directory {tmp_path}/nodir does not exist" in capsys.readouterr().err


def test_evaluate_refuses_a_solution_that_does_not_match_the_instance(tmp_path, capsys):
    sol = tmp_path / "s.json"
    assert main(["solve", MIX8, "--out", str(sol), "--quiet"]) == 0
    data = json.loads(sol.read_text())
    loop = dict(data, topology=dict(data["topology"], links=data["topology"]["links"] + [[0, 0, 1]]))
    (tmp_path / "loop.json").write_text(json.dumps(loop))
    assert main(["evaluate", MIX8, str(tmp_path / "loop.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "server 0 has a link to itself" in err and "internal error" not in err
    # Rings for AllReduce groups the instance lacks: a solution made for another instance.
    data["routing"]["rings"].append([7, 1.0, [0, 1]])
    (tmp_path / "other.json").write_text(json.dumps(data))
    assert main(["evaluate", MIX8, str(tmp_path / "other.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the solution does not match the instance: ring" in err and "group 7" in err


def test_evaluate_workload_solution_without_placement_is_bad_input(tmp_path, capsys):
    inst = str(INSTANCES / "dlrm-mini-6.json")
    sol = tmp_path / "s.json"
    assert main(["solve", inst, "--out", str(sol), "--quiet"]) == 0
    data = json.loads(sol.read_text())
    data["placement"] = None
    data["routing"]["rings"] = [[0, 1.0, [0, 1, 2, 3, 4, 5]], [1, 1.0, [1, 4]]]  # as --method alternating writes
    sol.write_text(json.dumps(data))
    capsys.readouterr()
    assert main(["evaluate", inst, str(sol)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "ring 1 names AllReduce group 1" in err and "states no placement" in err


def test_verify_and_evaluate_report_a_directed_flag_that_differs_from_the_instance(tmp_path, capsys):
    sol = tmp_path / "s.json"
    assert main(["solve", MIX8, "--out", str(sol), "--quiet"]) == 0
    data = json.loads(sol.read_text())
    data["topology"]["directed"] = True
    sol.write_text(json.dumps(data))
    assert main(["verify", MIX8, str(sol)]) == 1
    out = capsys.readouterr().out
    assert "1 violation(s)" in out and "the solution's links are directed, the instance's undirected" in out
    assert main(["evaluate", MIX8, str(sol)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the solution's links are directed, the instance's undirected" in err


def test_evaluate_warns_when_the_solution_fails_verification(tmp_path, capsys):
    # Found by a user: a solution with a link removed was scored (iteration time inf) without a word.
    sol = tmp_path / "sol.json"
    assert (
        main(
            [
                "solve",
                str(INSTANCES / "mix-8.json"),
                "--method",
                "exact",
                "--time-limit",
                "20",
                "--out",
                str(sol),
                "--quiet",
            ]
        )
        == 0
    )
    capsys.readouterr()
    data = json.loads(sol.read_text())
    data["topology"]["links"] = data["topology"]["links"][1:]
    sol.write_text(json.dumps(data))
    assert main(["evaluate", str(INSTANCES / "mix-8.json"), str(sol)]) == 0
    err = capsys.readouterr().err
    assert err.startswith("warning: ") and "fails verification" in err and len(err.strip().splitlines()) == 1


def test_out_writes_through_a_symlink_and_never_over_the_instance(tmp_path, capsys):
    # Found by a user: --out onto a symlink replaced the link; --out INSTANCE overwrote the instance.
    inst = tmp_path / "in.json"
    inst.write_text((INSTANCES / "mix-8.json").read_text())
    link = tmp_path / "link.json"
    link.symlink_to(tmp_path / "real.json")
    assert main(["solve", str(inst), "--out", str(link), "--quiet"]) == 0
    assert link.is_symlink() and json.loads((tmp_path / "real.json").read_text())["format"] == "topoopt-solution"
    before = inst.read_text()
    assert main(["solve", str(inst), "--out", str(tmp_path / "." / "in.json"), "--quiet"]) == 2
    assert "is the instance file itself" in capsys.readouterr().err and inst.read_text() == before


def test_a_closed_pipe_ends_quietly(tmp_path):
    """``topoopt solve ... | head -1`` printed "internal error: BrokenPipeError" (a user's report)."""
    import subprocess
    import sys

    for _ in range(3):  # the reader may leave before or after the output is written
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "topoopt_ilp",
                "compare",
                str(INSTANCES / "testbed-12.json"),
                "--methods",
                "heuristic",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        proc.stdout.readline()
        proc.stdout.close()
        err = proc.stderr.read().decode()
        proc.wait(timeout=60)
        assert "internal error" not in err and "Traceback" not in err and proc.returncode in (0, 1)


def test_evaluate_names_the_mismatch_when_scoring_fails(tmp_path, capsys):
    """A solution scored against an instance whose demand its routes do not cover: the scoring failed
    with "no complete route for pair ..."; the verifier's reason is what the user needs (a user's
    report: a BERT solution against the testbed)."""
    import json

    inst, sol = tmp_path / "i.json", tmp_path / "s.json"
    inst.write_text(json.dumps(minimal(demand={"mp": {"pairs": [[0, 2, 1e6]]}})))
    links = [[i, (i + 1) % 8, 1] for i in range(8)]
    sol.write_text(
        json.dumps(
            {
                "format": "topoopt-solution",
                "version": 1,
                "status": "feasible",
                "method": "given",
                "topology": {"servers": 8, "directed": False, "links": links, "jumps": [1]},
                "routing": {"offset_routes": [[1, 1.0, [1]], [7, 1.0, [7]]]},
                "placement": {"layer_degree": [1], "layer_start": [0], "block_server": []},
            }
        )
    )
    assert main(["evaluate", str(inst), str(sol)]) == 2
    err = capsys.readouterr().err
    assert "does not match the instance" in err and "no workload" in err and err.count("\n") == 1


def test_a_requested_gap_gives_feasible_not_optimal(tmp_path):
    """``--gap 0.5`` let the exact method stop 25 % from its bound and call that optimal, while the
    same solve without it proves a 9 % better design (a user's report). A requested gap now gives
    ``feasible`` with the gap, as a time limit does; optimal means within the default 1e-4."""
    import json

    from topoopt_ilp import files
    from topoopt_ilp.evaluation.verify import verify

    data = json.loads((INSTANCES / "mix-8.json").read_text())
    data["cluster"]["hop_latency_us"] = 0
    inst_path, out = tmp_path / "mix8.json", tmp_path / "s.json"
    inst_path.write_text(json.dumps(data))
    assert (
        main(
            [
                "solve",
                str(inst_path),
                "--method",
                "exact",
                "--gap",
                "0.5",
                "--warm-start",
                "none",
                "--time-limit",
                "30",
                "--out",
                str(out),
                "--quiet",
            ]
        )
        == 0
    )
    sol = files.load_solution(out)
    assert sol.status == "feasible" or sol.gap <= 1e-4
    assert verify(files.load_instance(inst_path), sol).valid


def test_degree_one_cannot_carry_a_demand_that_connects_three_servers(tmp_path, capsys):
    """Undirected degree 1 joins servers in pairs: the heuristic failed with "no complete route" and
    the exact model with "non-finite coefficient" (exit 1) on an AllReduce over 9 servers (a user's
    report). The methods say why; a switched network with one port per server still evaluates it,
    and a demand of disjoint pairs is solved."""
    import json

    path = tmp_path / "d1.json"
    path.write_text(
        json.dumps(
            minimal(
                cluster={"servers": 9, "degree": 1, "link_bandwidth_gbps": 100, "regular": False},
                demand={"allreduce": [{"members": "all", "bytes": 1e7}]},
            )
        )
    )
    assert main(["validate", str(path)]) == 0
    for method in ("heuristic", "exact"):
        assert (
            main(
                ["solve", str(path), "--method", method, "--warm-start", "none"]
                if method == "exact"
                else ["solve", str(path)]
            )
            == 2
        )
        assert "joins servers in pairs" in capsys.readouterr().err
    assert main(["evaluate", str(path), "--architecture", "big_switch"]) == 0
    pairs = tmp_path / "pairs.json"
    pairs.write_text(
        json.dumps(
            minimal(
                cluster={"servers": 8, "degree": 1, "link_bandwidth_gbps": 100},
                demand={"mp": {"pairs": [[0, 1, 1e6], [2, 3, 1e6], [5, 4, 1e6]]}},
            )
        )
    )
    assert main(["solve", str(pairs), "--quiet"]) == 0


def test_degree_one_workloads_are_refused_with_the_reason(tmp_path, capsys):
    """A workload at undirected degree 1 on 6 servers validated, then the heuristic printed
    "feasible", iteration time inf, "verified NO" (exit 1) and alternating / exact "no complete
    route for pair 1->2" (a user's report): the methods now say why, and 2 servers still solve."""
    six, two = tmp_path / "b61.json", tmp_path / "b21.json"
    assert main(["generate", "bert", "--servers", "6", "--degree", "1", "--bandwidth", "25", "-o", str(six)]) == 0
    assert main(["generate", "bert", "--servers", "2", "--degree", "1", "--bandwidth", "25", "-o", str(two)]) == 0
    capsys.readouterr()
    assert main(["validate", str(six)]) == 0  # a valid file, which the design methods refuse: validate says so
    assert "note: the design methods refuse it: degree 1 with undirected links" in capsys.readouterr().out
    for method in ("heuristic", "alternating", "exact"):
        out = tmp_path / f"{method}.json"
        assert main(["solve", str(six), "--method", method, "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "joins servers in pairs" in err and not out.exists()
    assert main(["compare", str(six), "--methods", "heuristic"]) == 2  # was a table of error rows, exit 1
    assert "joins servers in pairs" in capsys.readouterr().err
    assert main(["solve", str(two), "--quiet"]) == 0


def test_generate_compute_model(tmp_path, capsys):
    """--compute-model critical_path writes the key (next to overlap); the default leaves it out."""
    import json

    out, plain = tmp_path / "cp.json", tmp_path / "plain.json"
    assert (
        main(
            [
                "generate",
                "bert-testbed",
                "--servers",
                "12",
                "--degree",
                "4",
                "--bandwidth",
                "25",
                "--compute-model",
                "critical_path",
                "-o",
                str(out),
            ]
        )
        == 0
    )
    assert (
        main(["generate", "bert-testbed", "--servers", "12", "--degree", "4", "--bandwidth", "25", "-o", str(plain)])
        == 0
    )
    w, w0 = json.loads(out.read_text())["workload"], json.loads(plain.read_text())["workload"]
    assert w["compute_model"] == "critical_path" and "compute_model" not in w0
    assert list(w)[-2:] == ["compute_model", "layers"] and w["layers"] == w0["layers"]
    from topoopt_ilp import files

    assert files.load_instance(out).workload.compute_model == "critical_path"


def test_a_fixed_topology_that_cannot_carry_the_demand_is_infeasible(tmp_path, capsys):
    """The heuristic scored it as "feasible", iteration time inf, "verified NO" (exit 1): no routing
    exists, so the instance is infeasible (exit 3), with the reason, and the file says so."""
    import json

    from topoopt_ilp import files

    def write(name, cluster, demand, links):
        path = tmp_path / name
        path.write_text(json.dumps(minimal(cluster=cluster, demand=demand, fixed_topology={"links": links})))
        return path

    pairs = [[0, 1, 1], [2, 3, 1]]
    ring = write(
        "ring.json",
        {"servers": 4, "degree": 1, "link_bandwidth_gbps": 100},
        {"allreduce": [{"members": "all", "bytes": 1e6}]},
        pairs,
    )
    out = tmp_path / "s.json"
    assert main(["solve", str(ring), "--out", str(out)]) == 3
    assert "no path from 0 to 2 in the topology, but both are members of AllReduce group 0" in capsys.readouterr().out
    assert files.load_solution(out).status == "infeasible"
    mp = write(
        "mp.json", {"servers": 4, "degree": 1, "link_bandwidth_gbps": 100}, {"mp": {"pairs": [[1, 3, 1e6]]}}, pairs
    )
    assert main(["solve", str(mp), "--quiet"]) == 3
    directed = write(
        "dir.json",
        {"servers": 3, "degree": 1, "link_bandwidth_gbps": 100, "links": "directed"},
        {"mp": {"pairs": [[0, 2, 1e6]]}},
        [[0, 1, 1], [1, 2, 1], [2, 0, 1]],
    )
    assert main(["solve", str(directed), "--quiet"]) == 0  # 0 -> 1 -> 2: carried
    a2a = write("a2a.json", {"servers": 4, "degree": 1, "link_bandwidth_gbps": 100}, {"all_to_all": 1e6}, pairs)
    assert main(["solve", str(a2a)]) == 3
    assert "no path from 0 to 2 in the topology, but the demand sends bytes 0->2" in capsys.readouterr().out
    ok = write(
        "ok.json", {"servers": 4, "degree": 1, "link_bandwidth_gbps": 100}, {"mp": {"pairs": [[2, 3, 1e6]]}}, pairs
    )
    assert main(["solve", str(ok), "--quiet"]) == 0


def test_fixed_topologies_a_start_or_a_score_cannot_use_say_why(tmp_path, capsys):
    """A workload whose data-parallel start the fixed topology cannot carry was "feasible" at an
    infinite time (exit 1, verified NO); evaluate of a fixed topology that cannot carry the demand
    printed inf with no reason; a partial path refused in evaluate named no file (user test 7)."""
    import json

    data = json.loads((INSTANCES / "dlrm-mini-6.json").read_text())
    data["fixed_topology"] = {"links": [[0, 1, 1], [1, 2, 1], [2, 0, 1], [3, 4, 1], [4, 5, 1], [5, 3, 1]]}
    wl = tmp_path / "wl.json"
    wl.write_text(json.dumps(data))
    out = tmp_path / "wl-sol.json"
    assert main(["solve", str(wl), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "TopoOpt's start (every layer data-parallel) does not fit the fixed topology" in err and not out.exists()
    disc = tmp_path / "disc.json"
    disc.write_text(
        json.dumps(
            minimal(
                cluster={"servers": 4, "degree": 1, "link_bandwidth_gbps": 100},
                demand={"mp": {"pairs": [[0, 3, 1e6]]}},
                fixed_topology={"links": [[0, 1, 1], [2, 3, 1]]},
            )
        )
    )
    assert main(["evaluate", str(disc)]) == 0  # scored: infinite, and why
    captured = capsys.readouterr()
    assert (
        "inf" in captured.out
        and "note: the fixed topology cannot carry the demand: no path from 0 to 3 in the topology, but the demand sends bytes 0->3"
        in captured.err
    )
    sol = tmp_path / "mix.json"
    assert (
        main(
            [
                "solve",
                str(INSTANCES / "mix-8.json"),
                "--method",
                "exact",
                "--time-limit",
                "20",
                "--out",
                str(sol),
                "--quiet",
            ]
        )
        == 0
    )
    edited = json.loads(sol.read_text())
    paths = edited["routing"]["paths"]
    paths[0][0] = paths[0][0] / 2  # one path of a pair now carries half its share
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(edited))
    capsys.readouterr()
    assert main(["evaluate", str(INSTANCES / "mix-8.json"), str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(bad) in err


def test_every_writing_command_takes_o_and_out(tmp_path, capsys):
    """-o is the short form of the output option everywhere (generate and draw also take --out)."""
    sol = tmp_path / "tb.json"
    assert main(["solve", TESTBED, "-o", str(sol), "--quiet"]) == 0 and sol.exists()
    inst = tmp_path / "g.json"
    assert main(["generate", "dlrm", "--servers", "8", "--degree", "2", "--bandwidth", "100", "--out", str(inst)]) == 0
    assert json.loads(inst.read_text())["cluster"]["servers"] == 8
    png = tmp_path / "tb.png"
    assert main(["draw", str(sol), "--out", str(png)]) == 0 and png.stat().st_size > 0
    rows = tmp_path / "rows.csv"
    assert main(["sweep", TESTBED, "--methods", "heuristic", "--format", "csv", "-o", str(rows), "--quiet"]) == 0
    assert rows.read_text().startswith("instance,")
    capsys.readouterr()


# Found by an audit of the output guards (each case once lost a file or said nothing).
def test_a_trailing_slash_never_writes_over_the_file_it_names(tmp_path, capsys):
    inst = tmp_path / "in.json"
    inst.write_text((INSTANCES / "mix-8.json").read_text())
    before = inst.read_text()
    assert main(["solve", str(inst), "--quiet", "--out", f"{inst}/"]) == 2
    assert "names a directory" in capsys.readouterr().err and inst.read_text() == before
    assert main(["solve", str(inst), "--quiet", "--out", f"{tmp_path / 'sub'}/"]) == 2
    assert "does not exist" in capsys.readouterr().err and not (tmp_path / "sub").exists()


def test_sweep_and_draw_never_write_over_their_inputs(tmp_path, capsys):
    inst = tmp_path / "in.json"
    inst.write_text((INSTANCES / "mix-8.json").read_text())
    before = inst.read_text()
    assert main(["sweep", str(tmp_path), "--methods", "heuristic", "--quiet", "--out", str(inst)]) == 2
    assert "is the instance file itself" in capsys.readouterr().err and inst.read_text() == before
    sol = tmp_path / "sol.png"  # a solution file under a drawing's name
    assert main(["solve", str(inst), "--quiet", "--out", str(sol)]) == 0
    kept = sol.read_text()
    assert main(["draw", str(sol), "-o", str(sol)]) == 2
    assert "is the solution file itself" in capsys.readouterr().err and sol.read_text() == kept


def test_a_device_or_fifo_is_written_into_not_replaced(tmp_path, capsys):
    import os
    import stat
    import threading

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()))
    reader.start()
    assert main(["solve", str(INSTANCES / "mix-8.json"), "--quiet", "--out", str(fifo)]) == 0
    reader.join(30)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and json.loads(got[0])["format"] == "topoopt-solution"
    assert main(["generate", "bert", "--servers", "8", "--degree", "2", "--bandwidth", "100", "-o", os.devnull]) == 0
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)


def test_a_run_without_a_solution_keeps_an_existing_out_file(tmp_path, capsys):
    out = tmp_path / "keep.json"
    assert main(["solve", str(INSTANCES / "mix-8.json"), "--quiet", "--out", str(out)]) == 0
    kept = out.read_text()
    assert (
        main(
            [
                "solve",
                str(INSTANCES / "mix-8.json"),
                "--method",
                "exact",
                "--time-limit",
                "0",
                "--quiet",
                "--out",
                str(out),
            ]
        )
        == 4
    )
    assert "not replaced" in capsys.readouterr().err and out.read_text() == kept
    fresh = tmp_path / "fresh.json"  # with nothing to keep, the record is written
    assert (
        main(
            [
                "solve",
                str(INSTANCES / "mix-8.json"),
                "--method",
                "exact",
                "--time-limit",
                "0",
                "--quiet",
                "--out",
                str(fresh),
            ]
        )
        == 4
    )
    assert json.loads(fresh.read_text())["status"] == "no_solution"


@pytest.mark.parametrize(
    "args, message",
    [
        (["--baseline", "torus"], "--baseline applies to --method baseline, not heuristic"),
        (["--method", "exact", "--select", "best"], "--select and --mode apply to --method heuristic or alternating"),
        (["--method", "exact", "--threads", "2000"], "--threads must be an integer in 1..1024"),
    ],
)
def test_an_option_of_another_method_or_out_of_range_is_refused(args, message, capsys):
    try:
        code = main(["solve", str(INSTANCES / "mix-8.json"), *args])
    except SystemExit as exc:  # argparse's own refusal
        code = exc.code
    assert code == 2 and message in capsys.readouterr().err


def test_a_start_file_that_says_it_holds_nothing_is_refused(tmp_path, capsys):
    sol = tmp_path / "s.json"
    assert main(["solve", str(INSTANCES / "mix-8.json"), "--quiet", "--out", str(sol)]) == 0
    data = json.loads(sol.read_text())
    data["status"] = "no_solution"
    sol.write_text(json.dumps(data))
    assert (
        main(
            ["solve", str(INSTANCES / "mix-8.json"), "--method", "exact", "--warm-start", str(sol), "--time-limit", "5"]
        )
        == 2
    )
    assert "its status is no_solution, so it holds no design to start from" in capsys.readouterr().err
    assert main(["draw", str(sol), "-o", str(tmp_path / "d.png")]) == 2
    assert "holds no design (status no_solution)" in capsys.readouterr().err


def test_empty_output_names_are_refused(capsys):
    assert main(["evaluate-paper", "--out", ""]) == 2
    assert "--out needs a directory name" in capsys.readouterr().err
    dlrm = str(INSTANCES / "dlrm-mini-6.json")
    assert main(["schedule", dlrm, dlrm, "--out", ""]) == 2
    assert "--out needs a file name" in capsys.readouterr().err
    assert main(["schedule", dlrm, dlrm, "--check", ""]) == 2
    assert "--check needs a schedule file name" in capsys.readouterr().err
