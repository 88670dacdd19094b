"""The MSCCL checker: it passes the exported rings of every shipped design, a hand-written 3-rank
ring, and fails hand-broken files with the right message."""

from __future__ import annotations

import re
from dataclasses import replace
from functools import cache

import pytest

from conftest import INSTANCES
from topoopt_ilp import solve
from topoopt_ilp.cli import main
from topoopt_ilp.core.routes import RingSet, Routing
from topoopt_ilp.errors import InputError
from topoopt_ilp.evaluation.msccl import msccl_violations
from topoopt_ilp.export.msccl import msccl_xml
from topoopt_ilp.files import load_instance, parse_instance

#: Every instance at the top of instances/ and the paper's 12-server testbed workloads.
SHIPPED = sorted(str(p.relative_to(INSTANCES)) for p in [*INSTANCES.glob("*.json"), *INSTANCES.glob("paper/*testbed*")])


@cache
def design(name: str):
    inst = load_instance(INSTANCES / name)
    return inst, solve(inst, method="heuristic")


def ringed_groups():
    for name in SHIPPED:
        inst, sol = design(name)
        for g in sorted(set(sol.routing.rings.group.tolist())):
            yield name, g


@pytest.mark.parametrize("name, group", list(ringed_groups()))
def test_every_exported_design_passes(name, group):
    inst, sol = design(name)
    members = len(next(o for g, o, _ in sol.routing.rings.to_lists() if g == group))
    if 2 * members - 1 > 64:  # MSCCL's 64 steps per thread block: the exporter refuses, in one line
        with pytest.raises(InputError, match="steps per thread block, MSCCL runs at most 64"):
            msccl_xml(inst, sol, group)
        return
    report = msccl_violations(inst, sol, msccl_xml(inst, sol, group), group)
    assert report.valid, report.violations


def test_the_shipped_instances_give_ringed_groups():
    """The parametrisation above is not empty: designs with one and with several AllReduce groups."""
    names = {name for name, _ in ringed_groups()}
    assert {"testbed-12.json", "mix-16.json", "dp-mp-128.json", "coprime-circulant-32.json"} <= names


def three_ring():
    """Three servers on a ring, one AllReduce group over them, the solution's ring 0 -> 1 -> 2."""
    inst = parse_instance(
        {
            "format": "topoopt-instance",
            "version": 1,
            "cluster": {"servers": 3, "degree": 2, "link_bandwidth_gbps": 100},
            "demand": {"allreduce": [{"members": [0, 1, 2], "bytes": 3e6}]},
            "fixed_topology": {"links": [[0, 1, 1], [1, 2, 1], [0, 2, 1]]},
        }
    )
    sol = solve(inst)
    return inst, replace(sol, routing=Routing(rings=RingSet.from_lists([(0, [0, 1, 2], 1.0)])))


# Written by hand in msccl-tools' in-place style (one buffer, i): rank p sends its chunk p, adds and
# passes on chunk p-1, ends the reduction of chunk p+1, then passes the reduced chunks around.
HAND_WRITTEN = """<algo name="ring3" proto="Simple" nchannels="1" nchunksperloop="3" ngpus="3" coll="allreduce"
 inplace="1" outofplace="0" minBytes="0" maxBytes="0">
 <gpu id="0" i_chunks="3" o_chunks="0" s_chunks="0">
  <tb id="0" send="1" recv="2" chan="0">
   <step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
   <step s="1" type="rrs" srcbuf="i" srcoff="2" dstbuf="i" dstoff="2" cnt="1" depid="-1" deps="-1" hasdep="0"/>
   <step s="2" type="rrcs" srcbuf="i" srcoff="1" dstbuf="i" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0"/>
   <step s="3" type="rcs" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
   <step s="4" type="r" srcbuf="i" srcoff="2" dstbuf="i" dstoff="2" cnt="1" depid="-1" deps="-1" hasdep="0"/>
  </tb>
 </gpu>
 <gpu id="1" i_chunks="3" o_chunks="0" s_chunks="0">
  <tb id="0" send="2" recv="0" chan="0">
   <step s="0" type="s" srcbuf="i" srcoff="1" dstbuf="i" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0"/>
   <step s="1" type="rrs" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
   <step s="2" type="rrcs" srcbuf="i" srcoff="2" dstbuf="i" dstoff="2" cnt="1" depid="-1" deps="-1" hasdep="0"/>
   <step s="3" type="rcs" srcbuf="i" srcoff="1" dstbuf="i" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0"/>
   <step s="4" type="r" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
  </tb>
 </gpu>
 <gpu id="2" i_chunks="3" o_chunks="0" s_chunks="0">
  <tb id="0" send="0" recv="1" chan="0">
   <step s="0" type="s" srcbuf="i" srcoff="2" dstbuf="i" dstoff="2" cnt="1" depid="-1" deps="-1" hasdep="0"/>
   <step s="1" type="rrs" srcbuf="i" srcoff="1" dstbuf="i" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0"/>
   <step s="2" type="rrcs" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
   <step s="3" type="rcs" srcbuf="i" srcoff="2" dstbuf="i" dstoff="2" cnt="1" depid="-1" deps="-1" hasdep="0"/>
   <step s="4" type="r" srcbuf="i" srcoff="1" dstbuf="i" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0"/>
  </tb>
 </gpu>
</algo>
"""


def test_a_hand_written_three_rank_ring_passes():
    inst, sol = three_ring()
    report = msccl_violations(inst, sol, HAND_WRITTEN)
    assert report.valid, report.violations


def test_the_in_place_program_is_not_an_out_of_place_one():
    """Declared out of place too, the one-buffer program leaves the output buffer empty."""
    inst, sol = three_ring()
    report = msccl_violations(inst, sol, HAND_WRITTEN.replace('outofplace="0"', 'outofplace="1"'))
    assert "missing output: out of place: rank 0 ends without output chunk 0" in report.violations


def _step_line(text: str, rank: int, tb: int, s: int) -> str:
    """The line of step ``s`` of thread block ``tb`` of ``rank`` in a file laid out as the exporter's."""
    gpu = text.index(f'<gpu id="{rank}"')
    block = text.index(f'<tb id="{tb}"', gpu)
    start = text.index(f'<step s="{s}"', block)
    return text[start : text.index("\n", start)]


def _edit_step(text: str, rank: int, tb: int, s: int, **attrs) -> str:
    line = _step_line(text, rank, tb, s)
    new = line
    for key, value in attrs.items():
        new = re.sub(rf' {key}="[^"]*"', f' {key}="{value}"', new)
    return text.replace(line, new, 1)


@cache
def small():
    """dlrm-like-6: six servers, two rings (channels 0 and 1), 11 steps per thread block."""
    inst, sol = design("dlrm-like-6.json")
    return inst, sol, msccl_xml(inst, sol)


def _fails(text: str, kind: str, *words: str) -> list[str]:
    inst, sol, _ = small()
    found = msccl_violations(inst, sol, text).violations
    hits = [v for v in found if v.startswith(kind + ":") and all(w in v for w in words)]
    assert hits, found
    return list(found)


def test_a_dropped_step_fails():
    inst, sol, text = small()
    broken = text.replace(_step_line(text, 2, 0, 7) + "\n", "", 1)  # an rcs: the ring's all-gather stops at rank 2
    found = _fails(broken, "step order", "rank 2 thread block 0: its step 7 says s=8")
    assert any(v.startswith("deadlock:") or v.startswith("unmatched send:") for v in found), found


def test_a_send_on_a_missing_link_fails():
    inst, sol, text = small()
    x = sol.topology.matrix
    far = next(c for c in range(1, 6) if x[0, c] == 0)  # rank i is server i here: members 0..5
    line = text[text.index('<tb id="0" send="1"') :].split("\n")[0]
    broken = text.replace(line, line.replace('send="1"', f'send="{far}"'), 1)
    _fails(broken, "missing link", f"rank 0 thread block 0 sends to rank {far}", f"server 0 to server {far}")


def test_a_double_reduction_fails():
    inst, sol, text = small()
    line = _step_line(text, 3, 0, 8)  # an rcs of rank 3: make it add rank 3's input again
    dst = re.search(r'dstoff="(\d+)"', line).group(1)
    broken = _edit_step(text, 3, 0, 8, type="rrcs", srcoff=dst)
    _fails(broken, "double reduction", "adds rank 3's contribution 2 times")


def test_a_dependency_on_a_step_that_never_signals_fails():
    inst, sol, text = small()
    broken = _edit_step(text, 0, 0, 3, depid=1, deps=2)
    _fails(broken, "dependency", "rank 0 thread block 0 step 3 depends on thread block 1 step 2", "hasdep=0")


def test_a_dependency_cycle_deadlocks():
    inst, sol, text = small()
    broken = _edit_step(text, 0, 0, 0, depid=1, deps=10)
    broken = _edit_step(broken, 0, 1, 10, hasdep=1)
    broken = _edit_step(broken, 0, 1, 0, depid=0, deps=10)
    broken = _edit_step(broken, 0, 0, 10, hasdep=1)
    _fails(broken, "deadlock", "rank 0 thread block 0 step 0 (s) waits forever for thread block 1 step 10")


def test_a_count_mismatch_fails():
    inst, sol, text = small()
    broken = _edit_step(text, 1, 0, 0, cnt=2)
    _fails(broken, "count mismatch", "rank 2 thread block 0 step 1 receives 1 chunk(s) from rank 1", "sent 2")


def test_a_missing_attribute_is_named():
    inst, sol, text = small()
    _fails(text.replace(' outofplace="1"', ""), "file", "attribute outofplace is missing")


def test_a_document_type_declaration_is_refused():
    inst, sol, text = small()
    _fails('<!DOCTYPE algo [<!ENTITY a "b">]>\n' + text, "file", "document type declaration")


def test_traffic_that_differs_from_the_rings_fails():
    """A file with one ring for a solution that splits the group over two: right sums, wrong links."""
    inst, sol = three_ring()
    two = replace(sol, routing=Routing(rings=RingSet.from_lists([(0, [0, 1, 2], 0.5), (0, [0, 2, 1], 0.5)])))
    found = msccl_violations(inst, two, HAND_WRITTEN).violations
    assert (
        "traffic: the file sends 1.333 of the group's bytes from server 0 to server 1, the solution's rings 0.6667"
        in found
    ), found


def test_several_groups_need_the_group():
    inst, sol = design("mix-16.json")  # a group of 16 servers and two of 8
    with pytest.raises(InputError, match="--group G"):
        msccl_violations(inst, sol, msccl_xml(inst, sol, 0))
    assert msccl_violations(inst, sol, msccl_xml(inst, sol, 1), 1).valid
    found = msccl_violations(inst, sol, msccl_xml(inst, sol, 1), 0).violations
    assert found == ("header: ngpus 8 and gpu ids [0, 1, 2, 3, 4, 5, 6, 7]: expected the 16 ranks 0..15",)


def test_sizes_beyond_the_executors_are_refused_before_running():
    inst, sol, text = small()
    _fails(text.replace('nchunksperloop="12"', 'nchunksperloop="1000000000000"'), "header", "nchunksperloop must be")
    _fails(_edit_step(text, 0, 0, 0, cnt=72), "count", "rank 0 thread block 0 step 0: cnt 72 must be 1..71")


def test_a_file_that_is_not_xml_is_named():
    _fails("<algo name=", "file", "not well-formed XML")
    _fails("<nccl/>", "file", "the root element is <nccl>, expected <algo>")


def test_verify_refuses_an_unreadable_file_in_one_line(tmp_path, capsys):
    testbed = str(INSTANCES / "testbed-12.json")
    sol_path = tmp_path / "tb.json"
    assert main(["solve", testbed, "--out", str(sol_path), "--quiet"]) == 0
    capsys.readouterr()
    code = main(["verify", testbed, str(sol_path), "--msccl", str(tmp_path / "missing.xml")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "missing.xml" in err, err


# A second thread block on rank 0 that copies chunk 2 over chunk 1 of the one buffer: with no order to
# the ring's block it races with it; after the ring's last step (a dependency) it is ordered, and wrong.
LOCAL_COPY = """  <tb id="1" send="-1" recv="-1" chan="0">
   <step s="0" type="cpy" srcbuf="i" srcoff="2" dstbuf="i" dstoff="1" cnt="1" depid="{depid}" deps="{deps}" hasdep="0"/>
  </tb>
 </gpu>
 <gpu id="1\""""


def test_an_unordered_access_is_a_race():
    inst, sol = three_ring()
    racing = HAND_WRITTEN.replace(' </gpu>\n <gpu id="1"', LOCAL_COPY.format(depid=-1, deps=-1), 1)
    found = msccl_violations(inst, sol, racing).violations
    race = "race: in place: rank 0: thread block 0 step 2 and thread block 1 step 0 touch i[1] in no fixed order"
    assert race in found, found
    ordered = HAND_WRITTEN.replace(' </gpu>\n <gpu id="1"', LOCAL_COPY.format(depid=0, deps=4), 1)
    ordered = ordered.replace(
        'srcoff="2" dstbuf="i" dstoff="2" cnt="1" depid="-1" deps="-1" hasdep="0"/>\n  </tb>\n  <tb id="1"',
        'srcoff="2" dstbuf="i" dstoff="2" cnt="1" depid="-1" deps="-1" hasdep="1"/>\n  </tb>\n  <tb id="1"',
        1,
    )
    found = msccl_violations(inst, sol, ordered).violations
    assert not any(v.startswith("race:") for v in found), found
    assert "wrong chunk: in place: rank 0's output chunk 1 holds chunk 2" in found, found
