"""``topoopt export --to msccl``: the rounding of ring shares to chunks, the file as MSCCL's parser
needs it, the round trip through ``topoopt verify --msccl``, and the refusals."""

from __future__ import annotations

import itertools
import xml.etree.ElementTree as ET
from dataclasses import replace

import pytest

from conftest import INSTANCES
from topoopt_ilp import solve
from topoopt_ilp.cli import main
from topoopt_ilp.core.routes import RingSet, Routing
from topoopt_ilp.errors import InputError
from topoopt_ilp.export import EXPORTERS, export
from topoopt_ilp.export.msccl import SHARE_TOLERANCE, chunk_counts, msccl_rings, msccl_xml
from topoopt_ilp.files import load_instance, save_solution

TESTBED = str(INSTANCES / "testbed-12.json")


def brute_force_total(shares):
    """The smallest M <= 71 with chunk counts m >= 1 summing to M within the tolerance of every share,
    by trying every split (None when there is none)."""
    for total in range(len(shares), 72):
        for head in itertools.product(range(1, total), repeat=len(shares) - 1):
            last = total - sum(head)
            counts = (*head, last)
            if last >= 1 and max(abs(m / total - f) for m, f in zip(counts, shares)) <= SHARE_TOLERANCE:
                return total
    return None


@pytest.mark.parametrize(
    "shares",
    [(1.0,), (0.5, 0.5), (1 / 3,) * 3, (0.25,) * 4, (0.7, 0.3), (0.123, 0.877), (0.2, 0.3, 0.5), (0.61, 0.13, 0.26)],
)
def test_chunk_counts_take_the_smallest_total_within_the_tolerance(shares):
    counts, total = chunk_counts(shares)
    assert sum(counts) == total and min(counts) >= 1
    assert max(abs(m / total - f) for m, f in zip(counts, shares)) <= SHARE_TOLERANCE
    assert total == brute_force_total(shares)


def test_chunk_counts_closed_forms():
    assert chunk_counts([0.25] * 4) == ([1, 1, 1, 1], 4)
    assert chunk_counts([0.7, 0.3]) == ([7, 3], 10)
    counts, total = chunk_counts([0.5003, 0.4997])  # no M <= 71 within 0.005... except M = 2
    assert (counts, total) == ([1, 1], 2)


def test_chunk_counts_without_a_total_within_tolerance_take_the_least_error():
    shares = [1 / 137, 136 / 137]  # 1/137 needs M >= 137 to be within 0.005 of 1/M... never
    counts, total = chunk_counts(shares)
    error = max(abs(m / total - f) for m, f in zip(counts, shares))
    assert error < 1 / 71
    best = min(abs(1 / m - shares[0]) for m in range(2, 72))  # one chunk for the small ring is best
    assert error == pytest.approx(best)


def test_a_share_below_one_chunk_in_71_is_refused():
    with pytest.raises(InputError, match="less than one chunk in 71"):
        chunk_counts([0.001, 0.999])


def test_the_file_has_every_attribute_msccls_parser_requires():
    inst = load_instance(TESTBED)
    sol = solve(inst, method="heuristic")
    text = msccl_xml(inst, sol)
    assert "<?xml" not in text  # MSCCL's parser reads no declaration
    root = ET.fromstring(text)
    need = {"nchunksperloop", "nchannels", "ngpus", "proto", "coll", "minBytes", "maxBytes", "inplace", "outofplace"}
    assert need <= set(root.attrib) and root.get("coll") == "allreduce" and root.get("ngpus") == "12"
    assert root.get("nchannels") == "4" and root.get("nchunksperloop") == str(12 * 4)  # 4 rings of 1/4
    for gpu in root.findall("gpu"):
        assert {"id", "i_chunks", "o_chunks", "s_chunks"} <= set(gpu.attrib)
        for tb in gpu.findall("tb"):
            assert {"id", "send", "recv", "chan"} <= set(tb.attrib)
            steps = tb.findall("step")
            assert [s.get("s") for s in steps] == [str(i) for i in range(2 * 12 - 1)]
            assert [s.get("type") for s in steps] == ["s"] + ["rrs"] * 10 + ["rrcs"] + ["rcs"] * 10 + ["r"]
            for step in steps:
                assert {"srcbuf", "srcoff", "dstbuf", "dstoff", "cnt", "depid", "deps", "hasdep"} <= set(step.attrib)


def test_shares_become_chunk_counts():
    inst = load_instance(TESTBED)
    sol = solve(inst, method="heuristic")
    rings = sol.routing.rings.to_lists()
    split = [(g, order, share) for (g, order, _), share in zip(rings, (0.4, 0.3, 0.2, 0.1))]
    uneven = replace(sol, routing=replace(sol.routing, rings=RingSet.from_lists(split)))
    _, _, chosen = msccl_rings(inst, uneven)
    assert [r.count for r in chosen] == [4, 3, 2, 1]
    assert [r.first_chunk for r in chosen] == [0, 48, 84, 108]  # k = 12 chunks per count


def solved(tmp_path, capsys, instance: str):
    """The heuristic design of ``instance`` as a solution file, and a path for the XML."""
    sol_path = tmp_path / "solution.json"
    assert main(["solve", instance, "--out", str(sol_path), "--quiet"]) == 0
    capsys.readouterr()
    return sol_path, tmp_path / "allreduce.xml"


def test_round_trip_through_verify(tmp_path, capsys):
    sol_path, out = solved(tmp_path, capsys, TESTBED)
    assert main(["export", TESTBED, str(sol_path), "--to", "msccl", "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["verify", TESTBED, str(sol_path), "--msccl", str(out)]) == 0
    assert "a valid MSCCL algorithm" in capsys.readouterr().out
    out.write_text(out.read_text().replace('type="rcs"', 'type="rrcs"', 1))  # now it reads its unused src
    assert main(["verify", TESTBED, str(sol_path), "--msccl", str(out)]) == 1
    printed = capsys.readouterr().out
    assert "1 violation(s) of the MSCCL algorithm" in printed
    assert "offset: rank 0 thread block 0 step 12: src i[-1:0] is outside the 48 chunks" in printed


def test_groups_are_chosen_with_group(tmp_path, capsys):
    mix = str(INSTANCES / "mix-16.json")
    sol_path, out = solved(tmp_path, capsys, mix)
    code = main(["export", mix, str(sol_path), "--to", "msccl", "-o", str(out)])
    _one_line_no_file(capsys, code, out, "rings 3 AllReduce groups (0, 1, 2)", "--group G")
    assert main(["export", mix, str(sol_path), "--to", "msccl", "-o", str(out), "--group", "1"]) == 0
    capsys.readouterr()
    assert main(["verify", mix, str(sol_path), "--msccl", str(out), "--group", "1"]) == 0
    assert main(["verify", mix, str(sol_path), "--group", "1"]) == 2
    assert "--group applies to --msccl only" in capsys.readouterr().err
    code = main(["export", mix, str(sol_path), "--to", "cabling", "-o", str(tmp_path / "p.csv"), "--group", "1"])
    assert code == 2 and "takes no option group" in capsys.readouterr().err


def _one_line_no_file(capsys, code, path, *words):
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and not path.exists(), err
    assert all(w in err for w in words), err


def test_a_solution_without_rings_is_refused(tmp_path, capsys):
    fixed = str(INSTANCES / "fixed-links-6.json")
    sol_path, out = solved(tmp_path, capsys, fixed)
    code = main(["export", fixed, str(sol_path), "--to", "msccl", "-o", str(out)])
    _one_line_no_file(capsys, code, out, "records no AllReduce rings")


def test_a_ring_over_a_forwarded_hop_is_refused(tmp_path, capsys):
    inst = load_instance(TESTBED)
    sol = solve(inst, method="heuristic")
    x = sol.topology.matrix
    far = next(c for c in range(2, 12) if x[0, c] == 0 and x[1, c] == 0)
    order = [0, far] + [s for s in range(1, 12) if s != far]  # 0 -> far is no link
    forwarded = replace(sol, routing=Routing(rings=RingSet.from_lists([(0, order, 1.0)])))
    sol_path, out = tmp_path / "fwd.json", tmp_path / "a.xml"
    save_solution(forwarded, sol_path, directed=False)
    code = main(["export", TESTBED, str(sol_path), "--to", "msccl", "-o", str(out)])
    _one_line_no_file(capsys, code, out, f"hops from server 0 to server {far}, which share no link")


def test_a_group_beyond_msccls_limits_is_refused(tmp_path):
    inst = load_instance(INSTANCES / "dp-mp-128.json")
    sol = solve(inst, method="heuristic")
    out = tmp_path / "a.xml"
    with pytest.raises(InputError, match="group 0 does not fit in an MSCCL algorithm: its ring of 128 ranks"):
        export(inst, sol, str(out), "msccl", group=0)
    with pytest.raises(InputError, match="takes no option fabric"):
        EXPORTERS["msccl"](inst, sol, str(out), fabric="ocs")
    with pytest.raises(InputError, match="--group must be an AllReduce group 0..4"):
        export(inst, sol, str(out), "msccl", group=7)
    assert not out.exists()
