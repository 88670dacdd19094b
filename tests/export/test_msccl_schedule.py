"""A collective schedule as an MSCCL algorithm (``topoopt collective ... --to msccl``): the exact and
greedy schedules of shipped designs (every collective) pass the independent MSCCL checker,
hand-broken files fail it, and the command refuses what it cannot write."""

from __future__ import annotations

import re
from functools import cache

import numpy as np
import pytest

from conftest import INSTANCES
from topoopt_ilp.cli import main
from topoopt_ilp.core.collective import Collective, CollectiveSchedule, LinkModel, Send
from topoopt_ilp.core.solution import Topology
from topoopt_ilp.errors import InputError
from topoopt_ilp.evaluation.msccl import msccl_schedule_violations
from topoopt_ilp.export.msccl_schedule import msccl_schedule_xml, useful_sends
from topoopt_ilp.files import load_instance, save_solution
from topoopt_ilp.methods import solve
from topoopt_ilp.models.collective import solve_collective
from topoopt_ilp.models.common import ExactOptions

LINK = LinkModel(1e-6, 12.5e9)


@cache
def design(name: str) -> Topology:
    return solve(load_instance(INSTANCES / name), method="heuristic").topology


@pytest.mark.parametrize("name", ["mix-8.json", "fixed-ring-8.json", "fixed-links-6.json"])
@pytest.mark.parametrize("method", ["exact", "heuristic"])
@pytest.mark.parametrize("chunks", [1, 2])
def test_schedules_of_shipped_designs_pass_the_checker(name, method, chunks):
    topology = design(name)
    gather = Collective("allgather", tuple(range(topology.n)), bytes=1e6, chunks=chunks)
    result = solve_collective(topology, gather, LINK, method=method, options=ExactOptions(time_limit_s=20))
    text = msccl_schedule_xml(gather, result.schedule)
    report = msccl_schedule_violations(topology.matrix, gather.servers, text)
    assert report.valid, report.violations[:3]
    # every useful send is one send step and one receive step: n (n - 1) chunks arrive
    assert text.count('type="s"') == text.count('type="r"') == topology.n * (topology.n - 1) * chunks


@pytest.mark.parametrize("name", ["mix-8.json", "fixed-links-6.json"])
@pytest.mark.parametrize("method", ["exact", "heuristic", "ring"])
def test_allreduce_schedules_pass_in_and_out_of_place(name, method):
    topology = design(name)
    n = topology.n
    reduce = Collective("allreduce", tuple(range(n)), bytes=1e6, chunks=2)
    result = solve_collective(topology, reduce, LINK, method=method, options=ExactOptions(time_limit_s=20))
    text = msccl_schedule_xml(reduce, result.schedule)
    assert 'inplace="1" outofplace="1"' in text
    report = msccl_schedule_violations(topology.matrix, reduce.servers, text, "allreduce")
    assert report.valid, report.violations[:3]
    # ReduceScatter: n - 1 partial sums received per chunk id (one from every rank but the owner, whose
    # trees the sums follow); AllGather: n - 1 copies per chunk id
    assert text.count('type="rrc"') == text.count('type="r"') == (n - 1) * 2 * n


def test_broken_allreduce_fails():
    topology = design("fixed-links-6.json")
    reduce = Collective("allreduce", tuple(range(6)), bytes=1e6)
    text = msccl_schedule_xml(reduce, solve_collective(topology, reduce, LINK, method="heuristic").schedule)
    # a partial sum received but not added: some output lacks a contribution
    dropped = text.replace('type="rrc"', 'type="r"', 1)
    report = msccl_schedule_violations(topology.matrix, reduce.servers, dropped, "allreduce")
    assert any("lacks rank" in v for v in report.violations), report.violations
    # a later partial sum no longer waits for the earlier one into the same chunk
    m = re.search(
        r'type="rrc" srcbuf="o" srcoff="\d+" dstbuf="o" dstoff="\d+" cnt="1" depid="(\d+)" deps="(\d+)"', text
    )
    unordered = text[: m.start(1)] + '-1" deps="-1' + text[m.end(2) :]
    report = msccl_schedule_violations(topology.matrix, reduce.servers, unordered, "allreduce")
    assert any(v.startswith("race") for v in report.violations), report.violations


def _ring(n: int) -> tuple[np.ndarray, Collective, CollectiveSchedule]:
    """A one-way ring's AllGather by hand: in step t server i forwards chunk i - t + 1 to i + 1."""
    x = np.zeros((n, n), dtype=int)
    for i in range(n):
        x[i, (i + 1) % n] = 1
    sends = tuple(Send(t, (i - t + 1) % n, i, (i + 1) % n) for t in range(1, n) for i in range(n))
    return x, Collective("allgather", tuple(range(n)), bytes=1e3), CollectiveSchedule(sends, 1.0, n - 1)


def test_hand_made_ring_passes_and_counts():
    x, gather, schedule = _ring(4)
    text = msccl_schedule_xml(gather, schedule)
    assert msccl_schedule_violations(x, gather.servers, text).valid
    # a chunk forwarded in step t > 1 depends on its receipt, which signals
    assert text.count('hasdep="1"') == 4 * 2 and text.count('depid="-1"') == 4 * 1 + 4 * 3 + 4


@pytest.mark.parametrize(
    "edit, needle",
    [
        # the last hop of rank 3's receipts writes the wrong output chunk
        (lambda t: _nth_sub(t, r'type="r" srcbuf="i" srcoff="-1" dstbuf="o" dstoff="(\d)"', "3", -1), "rank 3"),
        # a forwarded send no longer waits for its receipt
        (lambda t: t.replace('depid="2" deps="0"', 'depid="-1" deps="-1"', 1), "unwritten chunk"),
        # one receive step dropped: its sender's message is never received and later sends read nothing
        (lambda t: re.sub(r'\n\s*<step s="2" type="r"[^\n]*', "", t, count=1), ""),
        # the collective named wrong
        (lambda t: t.replace('coll="allgather"', 'coll="allreduce"'), "coll"),
        # a rank sends over a pair the topology does not link
        (lambda t: t.replace('<tb id="1" send="1"', '<tb id="1" send="2"', 1), "link"),
        # the own-chunk copy skipped
        (lambda t: t.replace('type="cpy"', 'type="nop"', 1), "output chunk 0"),
    ],
)
def test_hand_broken_files_fail(edit, needle):
    x, gather, schedule = _ring(4)
    text = msccl_schedule_xml(gather, schedule)
    broken = edit(text)
    assert broken != text
    report = msccl_schedule_violations(x, gather.servers, broken)
    assert not report.valid
    assert any(needle in v for v in report.violations), report.violations


def _nth_sub(text: str, pattern: str, value: str, which: int) -> str:
    m = list(re.finditer(pattern, text))[which]
    return text[: m.start(1)] + value + text[m.end(1) :]


def test_redundant_receipts_are_dropped():
    x, gather, schedule = _ring(4)
    again = Send(3, 0, 3, 0)  # server 0 gets its own chunk back
    both = CollectiveSchedule((*schedule.sends, again), 1.0, 3)
    assert again not in useful_sends(gather, both)
    assert msccl_schedule_violations(x, gather.servers, msccl_schedule_xml(gather, both)).valid


def test_refusals():
    x, gather, schedule = _ring(4)
    part = Collective("allgather", (0, 1, 2), 1e3)
    with pytest.raises(InputError, match="not in the collective"):
        msccl_schedule_xml(part, schedule)
    with pytest.raises(InputError, match="runs allgather"):
        msccl_schedule_violations(x, gather.servers, msccl_schedule_xml(gather, schedule), "gather")


@pytest.mark.parametrize("name", ["mix-8.json", "fixed-links-6.json"])
@pytest.mark.parametrize("method", ["exact", "heuristic"])
@pytest.mark.parametrize("kind", ["reducescatter", "broadcast", "alltoall"])
def test_other_collectives_pass_the_checker(name, method, kind):
    topology = design(name)
    n = topology.n
    root = 2 if kind == "broadcast" else None
    collective = Collective(kind, tuple(range(n)), bytes=1e6, chunks=2, root=root)
    result = solve_collective(topology, collective, LINK, method=method, options=ExactOptions(time_limit_s=10))
    text = msccl_schedule_xml(collective, result.schedule)
    report = msccl_schedule_violations(topology.matrix, collective.servers, text, kind, root=root or 0)
    assert report.valid, report.violations[:3]
    assert f'coll="{kind}" inplace="0" outofplace="1"' in text
    if kind == "reducescatter":  # n - 1 partial sums arrive per chunk id, only in the owner's output at the end
        assert text.count('type="rrc"') == (n - 1) * 2 * n and 'type="r"' not in text
        assert f'nchunksperloop="{2 * n}"' in text and 'o_chunks="2"' in text
    if kind == "broadcast":  # every rank but the root receives each piece once; the root copies its input
        assert text.count('type="r"') == (n - 1) * 2 and text.count('type="cpy"') == 2
        assert 'nchunksperloop="2"' in text and "root rank 2" in text
    if kind == "alltoall":  # each rank copies its pieces for itself; the rest arrive at least once
        assert text.count('type="cpy"') == 2 * n and text.count('type="r"') >= n * (n - 1) * 2
        # the relayed pieces wait in scratch
        relayed = text.count('type="r"') - n * (n - 1) * 2
        assert sum(int(v) for v in re.findall(r's_chunks="(\d+)"', text)) == relayed


def _checked(kind, edit, root=0):
    topology = design("fixed-links-6.json")
    collective = Collective(kind, tuple(range(6)), 1e6, 1, root if kind == "broadcast" else None)
    text = msccl_schedule_xml(collective, solve_collective(topology, collective, LINK, method="heuristic").schedule)
    broken = edit(text)
    assert broken != text
    return msccl_schedule_violations(topology.matrix, collective.servers, broken, kind, root).violations


def test_broken_reducescatter_broadcast_alltoall_fail():
    # a partial sum received but not added
    found = _checked("reducescatter", lambda t: t.replace('type="rrc"', 'type="r"', 1))
    assert any("lacks rank" in v for v in found), found
    # the wrong collective named
    found = _checked("reducescatter", lambda t: t.replace('coll="reducescatter"', 'coll="allreduce"'))
    assert any(v.startswith("header: coll") for v in found), found
    # the root's copy to its own output skipped
    found = _checked("broadcast", lambda t: t.replace('type="cpy"', 'type="nop"'))
    assert "missing output: out of place: rank 0 ends without output chunk 0" in found, found
    # the file's root is rank 0, the claim rank 1: rank 1's input is never read as the message
    topology = design("fixed-links-6.json")
    bcast = Collective("broadcast", tuple(range(6)), 1e6, 1, 0)
    text = msccl_schedule_xml(bcast, solve_collective(topology, bcast, LINK, method="heuristic").schedule)
    assert not msccl_schedule_violations(topology.matrix, bcast.servers, text, "broadcast", root=1).valid
    # an all-to-all piece received into another rank's output slot
    found = _checked(
        "alltoall", lambda t: _nth_sub(t, r'type="r" srcbuf="i" srcoff="-1" dstbuf="o" dstoff="(\d+)"', "5", 0)
    )
    assert any(v.startswith(("wrong chunk", "race", "missing output")) for v in found), found
    # an in-place claim the check does not make for an all-to-all
    found = _checked("alltoall", lambda t: t.replace('inplace="0"', 'inplace="1"'))
    assert any("out of place only" in v for v in found), found


@pytest.fixture(scope="module")
def mix_solution(tmp_path_factory):
    path = tmp_path_factory.mktemp("msccl") / "mix.json"
    save_solution(solve(load_instance(INSTANCES / "mix-8.json"), method="heuristic"), path, directed=False)
    return str(path)


def test_command_writes_a_checked_file(mix_solution, tmp_path, capsys):
    out = tmp_path / "algo.xml"
    mix = str(INSTANCES / "mix-8.json")
    argv = ["collective", mix, mix_solution, "--collective", "allgather", "--bytes", "1e6", "--chunks", "2"]
    assert main([*argv, "--method", "heuristic", "--to", "msccl", "-o", str(out)]) == 0
    text = out.read_text()
    assert 'coll="allgather"' in text and 'ngpus="8"' in text and 'nchunksperloop="16"' in text
    assert msccl_schedule_violations(design("mix-8.json").matrix, tuple(range(8)), text).valid
    capsys.readouterr()
    scatter = [*argv[:3], "--collective", "reducescatter", *argv[5:]]
    assert main([*scatter, "--method", "heuristic", "--to", "msccl", "-o", str(tmp_path / "rs.xml")]) == 0
    assert 'coll="reducescatter"' in (tmp_path / "rs.xml").read_text()
    bcast = [*argv[:3], "--collective", "broadcast", "--root", "3", *argv[5:]]
    assert main([*bcast, "--method", "heuristic", "--to", "msccl", "-o", str(tmp_path / "b.xml")]) == 0
    assert "root rank 3" in (tmp_path / "b.xml").read_text()
    capsys.readouterr()
    assert main([*argv, "--to", "msccl"]) == 2  # --to without -o
    assert "give -o FILE" in capsys.readouterr().err


@pytest.mark.parametrize(
    "kind, extra", [("reducescatter", []), ("broadcast", ["--root", "5"]), ("alltoall", []), ("allreduce", [])]
)
def test_verify_runs_a_schedules_file(mix_solution, tmp_path, capsys, kind, extra):
    mix = str(INSTANCES / "mix-8.json")
    out = tmp_path / "algo.xml"
    made = ["collective", mix, mix_solution, "--collective", kind, "--bytes", "1e6", *extra]
    assert main([*made, "--method", "heuristic", "--to", "msccl", "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["verify", mix, mix_solution, "--msccl", str(out), "--collective", kind, *extra]) == 0
    assert f"a valid MSCCL {kind} algorithm" in capsys.readouterr().out
    # claimed as another collective, or (a broadcast) from another root: exit 1 with the violations
    other = "allgather" if kind != "allgather" else "allreduce"
    assert main(["verify", mix, mix_solution, "--msccl", str(out), "--collective", other]) == 1
    assert "coll is" in capsys.readouterr().out
    if kind == "broadcast":
        assert main(["verify", mix, mix_solution, "--msccl", str(out), "--collective", kind, "--root", "0"]) == 1
    # a file broken by hand
    broken = tmp_path / "broken.xml"
    broken.write_text(out.read_text().replace('type="r"', 'type="nop"', 1).replace('type="rrc"', 'type="nop"', 1))
    assert main(["verify", mix, mix_solution, "--msccl", str(broken), "--collective", kind, *extra]) == 1


def test_verify_schedule_file_refusals(mix_solution, tmp_path, capsys):
    mix = str(INSTANCES / "mix-8.json")
    out = tmp_path / "algo.xml"
    made = ["collective", mix, mix_solution, "--collective", "allgather", "--bytes", "1e6", "--servers", "0,2,4,6"]
    assert main([*made, "--method", "heuristic", "--to", "msccl", "-o", str(out)]) == 0
    check = ["verify", mix, mix_solution, "--msccl", str(out), "--collective", "allgather"]
    capsys.readouterr()
    assert main([*check, "--servers", "0,2,4,6"]) == 0
    # other servers than the file's: its ranks run on other links, and its comment names other servers
    assert main([*check, "--servers", "0,1,2,3"]) == 1
    assert "rank:server" in capsys.readouterr().out
    for argv, needle in [
        ([*check, "--servers", "0,9"], "not in the topology"),
        ([*check, "--root", "0"], "--root goes with --collective broadcast"),
        (["verify", mix, mix_solution, "--collective", "allgather"], "--collective applies to --msccl"),
        ([*check, "--group", "0"], "--group"),
        ([*check[:4], "missing.xml", *check[5:]], "missing.xml"),
    ]:
        assert main(argv) == 2, argv
        assert needle in capsys.readouterr().err, argv
