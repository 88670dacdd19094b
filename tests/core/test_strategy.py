"""Strategy -> demand and compute, checked entry by entry against hand computation."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from topoopt_ilp.core.instance import AllReduceGroup
from topoopt_ilp.core.strategy import (
    Strategy,
    data_parallel,
    parse_strategy,
    server_memory,
    strategy_demand,
    strategy_to_demand,
    strategy_to_dict,
    validate_strategy,
)
from topoopt_ilp.core.workload import Block, Layer, Workload
from topoopt_ilp.errors import InstanceError


def layer(name, *, configs, params=0.0, act=0.0, mem=None, compute_s=None, flops=None, measured=None):
    return Layer(
        name=name,
        param_bytes=params,
        activation_bytes=act,
        memory_bytes=mem,
        configs=tuple(configs),
        compute_s=compute_s,
        flops=flops,
        measured=measured,
    )


def four_server_case():
    """n = 4: layer a at degree 4 on {0,1,2,3}, layer b at degree 2 on {0,2}; a table on server 0."""
    w = Workload(
        layers=(
            layer("a", configs=(2, 4), params=100, act=40, compute_s=1.0),
            layer("b", configs=(1, 2), params=10, act=8, compute_s=2.0),
        ),
        blocks=(Block(name="t", bytes=10, lookup_bytes=12, consumer=1),),
        batch_size=8,
        server_memory_bytes=1e9,
    )
    return w, Strategy((4, 2), (0, 0), (0,))


def test_four_servers_by_hand():
    w, s = four_server_case()
    assert data_parallel(w, 4) == s
    groups, mp, compute = strategy_demand(w, 4, s)
    assert groups == (AllReduceGroup((0, 1, 2, 3), 100.0), AllReduceGroup((0, 2), 10.0))
    # a: replica r on server r holds a quarter (10 bytes of activations). b: server 0 holds the
    # first half, server 2 the second. So server 1's quarter goes to 0 and server 3's to 2; the
    # gradients come back. The table on server 0 sends 12/2 = 6 to each b replica (server 0's share
    # stays local) and gets 6 back from server 2.
    expected = np.array(
        [
            [0, 10, 6, 0],
            [10, 0, 0, 0],
            [6, 0, 0, 10],
            [0, 0, 10, 0],
        ],
        dtype=float,
    )
    assert np.array_equal(mp, expected)
    # a: 1.0 s / 4 on every server; b: 2.0 s / 2 on servers 0 and 2; the table costs nothing here.
    assert np.array_equal(compute, [1.25, 0.25, 1.25, 0.25])


def six_server_case():
    """n = 6, three layers with degrees 3, 2, 6 at different starts, one table, a measured time."""
    w = Workload(
        layers=(
            layer("l0", configs=(1, 3), params=9, act=60, compute_s=3.0),
            layer("l1", configs=(2,), params=5, act=12, compute_s=4.0, measured={2: 1.5}),
            layer("l2", configs=(3, 6), params=7, act=99, flops=600.0),
        ),
        blocks=(Block(name="emb", bytes=1, lookup_bytes=30, compute_s=0.25, consumer=1),),
        batch_size=12,
        server_memory_bytes=1e6,
        device_flops=100.0,
    )
    return w, Strategy((3, 2, 6), (1, 0, 0), (4,))


def test_six_servers_by_hand():
    w, s = six_server_case()
    assert validate_strategy(w, 6, s) == []
    groups, mp, compute = strategy_demand(w, 6, s)
    assert groups == (AllReduceGroup((1, 3, 5), 9.0), AllReduceGroup((0, 3), 5.0), AllReduceGroup(tuple(range(6)), 7.0))
    e = np.zeros((6, 6))
    # l0 (servers 1, 3, 5 hold thirds [0,1/3), [1/3,2/3), [2/3,1) of 60 bytes) -> l1 (servers 0, 3
    # hold halves): 1->0 a third (20); 3->0 the sixth [1/3,1/2) (10), 3->3 local; 5->3 a third (20).
    e[1, 0] += 20
    e[3, 0] += 10
    e[5, 3] += 20
    e[0, 1] += 20
    e[0, 3] += 10
    e[3, 5] += 20  # gradients back
    # l1 (0: [0,1/2), 3: [1/2,1) of 12 bytes) -> l2 (server t holds [t/6, (t+1)/6)): 2 bytes each
    # to servers 1, 2 from 0 and to 4, 5 from 3; servers 0 and 3 keep their own sixth.
    e[0, 1] += 2
    e[0, 2] += 2
    e[3, 4] += 2
    e[3, 5] += 2
    e[1, 0] += 2
    e[2, 0] += 2
    e[4, 3] += 2
    e[5, 3] += 2
    # the table on server 4 feeds l1: 15 bytes to each of servers 0 and 3, and 15 back from each.
    e[4, 0] += 15
    e[4, 3] += 15
    e[0, 4] += 15
    e[3, 4] += 15
    assert np.array_equal(mp, e)
    assert mp[3, 4] == 17 and mp[0, 1] == 22  # sums of two contributions, spelled out
    # l0: 3.0/3 = 1.0 on 1, 3, 5. l1: measured 1.5 on 0, 3. l2: 600 FLOP / 100 FLOP/s = 6 s, /6 = 1.0
    # everywhere. Table: 0.25 on server 4.
    assert np.array_equal(compute, [2.5, 2.0, 1.0, 3.5, 1.25, 2.0])


def test_same_placement_moves_nothing_and_identical_cosets_merge():
    w = Workload(
        layers=(
            layer("x", configs=(2,), params=3, act=50, compute_s=1),
            layer("y", configs=(2,), params=4, act=50, compute_s=1),
            layer("z", configs=(2,), params=6, act=50, compute_s=1),
            layer("k1", configs=(1,), params=100, act=50, compute_s=1),  # a single replica: no AllReduce
            layer("free", configs=(2,), params=0, act=0, compute_s=1),  # no parameters: no AllReduce
        ),
        batch_size=4,
        server_memory_bytes=1e6,
    )
    s = Strategy((2, 2, 2, 1, 2), (1, 1, 0, 2, 1), ())
    groups, mp, _ = strategy_demand(w, 4, s)
    # x and y share the coset {1, 3}: one group of 3 + 4 bytes; z on {0, 2} is another group.
    assert groups == (AllReduceGroup((1, 3), 7.0), AllReduceGroup((0, 2), 6.0))
    # x -> y: same placement, nothing moves. y {1,3} -> z {0,2}: 25 bytes 1->0 and 3->2 (and back).
    # z {0,2} -> k1 {2}: server 0's half (25) goes to 2. k1 {2} -> free {1,3}: 25 to each.
    e = np.zeros((4, 4))
    e[1, 0] = e[0, 1] = e[3, 2] = e[2, 3] = 25
    e[0, 2] += 25
    e[2, 0] += 25
    e[2, 1] += 25
    e[1, 2] += 25
    e[2, 3] += 25
    e[3, 2] += 25
    assert np.array_equal(mp, e)


def test_data_parallel_round_robin_blocks():
    w = Workload(
        layers=(layer("a", configs=(1, 2), compute_s=1), layer("b", configs=(2, 1), compute_s=1)),
        blocks=tuple(Block(name=f"t{i}", bytes=1, lookup_bytes=1) for i in range(5)),
        batch_size=4,
        server_memory_bytes=100,
    )
    s = data_parallel(w, 2)
    assert s == Strategy((2, 2), (0, 0), (0, 1, 0, 1, 0))
    assert data_parallel(w, 4).block_server == (0, 1, 2, 3, 0)


def test_data_parallel_places_blocks_by_memory_when_round_robin_overflows():
    # Found by a user: blocks [1.5, 0.1 x 5, 1.5] GB on 6 servers of 2.1 GB: round robin puts both
    # 1.5 GB tables on server 0, so the heuristic and alternating methods failed on a feasible job.
    sizes = [1.5e9] + [1e8] * 5 + [1.5e9]
    w = Workload(
        layers=(layer("a", configs=(1, 2, 3, 6), mem=3e8, compute_s=1),),
        blocks=tuple(Block(name=f"t{i}", bytes=b, lookup_bytes=1) for i, b in enumerate(sizes)),
        batch_size=6,
        server_memory_bytes=2.1e9,
    )
    robin = tuple(b % 6 for b in range(7))
    assert validate_strategy(w, 6, Strategy((6,), (0,), robin))  # round robin breaks memory
    s = data_parallel(w, 6)
    assert s.block_server != robin and validate_strategy(w, 6, s) == []
    assert s.block_server[0] != s.block_server[6]  # the two large tables apart
    # When round robin fits, TopoOpt's rule is kept (see the test above); when nothing fits, round
    # robin is returned and the memory check names the server.
    tight = Workload(
        layers=w.layers,
        blocks=tuple(Block(name=f"t{i}", bytes=1.9e9, lookup_bytes=1) for i in range(7)),
        batch_size=6,
        server_memory_bytes=2.1e9,
    )
    assert data_parallel(tight, 6).block_server == robin


def test_violations_are_listed():
    w, good = four_server_case()
    assert validate_strategy(w, 4, Strategy((4, 2), (0,), (0,))) == [
        "layer_start has 1 entries, the workload has 2 layers"
    ]
    assert validate_strategy(w, 4, Strategy((4, 2), (0, 0), ())) == [
        "block_server has 0 entries, the workload has 1 blocks"
    ]
    assert validate_strategy(w, 4, Strategy((3, 4), (0, 2), (4,))) == [
        "layer 0 (a): degree 3 is not among its configs [2, 4]",
        "layer 1 (b): degree 4 is not among its configs [1, 2]",
        "block 0 (t): server 4 out of range 0..3",
    ]
    assert validate_strategy(w, 4, Strategy((2, 1), (2, 3), (0,))) == [
        "layer 0 (a): start 2 out of range 0..1 for degree 2 on 4 servers"
    ]
    with pytest.raises(ValueError, match="invalid strategy: layer 0 \\(a\\): start 2"):
        strategy_demand(w, 4, Strategy((2, 1), (2, 3), (0,)))


def test_memory_is_counted_per_server():
    # replica memory = memory_bytes + activation_bytes / k
    w = Workload(
        layers=(
            layer("a", configs=(2, 4), act=40, mem=100, compute_s=1),  # k=2: 120 on {0,2}; k=4: 110 on all
            layer("b", configs=(1, 2), act=8, mem=20, compute_s=1),
        ),  # k=1: 28 on {s}
        blocks=(Block(name="t", bytes=5, lookup_bytes=0), Block(name="u", bytes=3, lookup_bytes=0)),
        batch_size=8,
        server_memory_bytes=150,
    )
    s = Strategy((2, 1), (0, 2), (2, 1))
    assert np.array_equal(server_memory(w, 4, s), [120, 3, 120 + 28 + 5, 0])
    assert validate_strategy(w, 4, s) == ["server 2: memory 153 bytes exceeds server_memory_bytes 150"]
    assert validate_strategy(w, 4, Strategy((4, 1), (0, 3), (2, 1))) == []  # 110+5, 110+3, 110+28
    # a memory violation does not stop the demand computation
    assert strategy_demand(w, 4, s)[2].tolist() == [0.5, 0.0, 1.5, 0.0]


def test_demand_object_and_json_round_trip():
    w, s = six_server_case()
    demand = strategy_to_demand(w, 6, s)
    groups, mp, _ = strategy_demand(w, 6, s)
    assert demand.allreduce == groups
    assert np.array_equal(demand.mp_matrix(6), mp)
    assert parse_strategy(strategy_to_dict(s), w, 6) == s
    assert strategy_to_dict(s) == {"layer_degree": [3, 2, 6], "layer_start": [1, 0, 0], "block_server": [4]}
    with pytest.raises(InstanceError) as exc:
        parse_strategy({"layer_degree": [3, 2, 6], "layer_start": [1, 0, 0], "block_server": [9]}, w, 6)
    assert exc.value.field == "placement" and exc.value.reason == "block 0 (emb): server 9 out of range 0..5"
    with pytest.raises(InstanceError, match="unknown key 'x'"):
        parse_strategy({"layer_degree": [], "layer_start": [], "x": 1}, w, 6)
    with pytest.raises(InstanceError, match="expected a list of integers"):
        parse_strategy({"layer_degree": [3, 2.0, 6], "layer_start": [1, 0, 0]}, w, 6)


# ----------------------------------------------------------------------------------------------
# Invariants on random workloads: whatever the placement, traffic is symmetric (every forward
# byte has its gradient), compute adds up to the layers' totals, and resharding never moves more
# than all activations.
@st.composite
def random_case(draw):
    n = draw(st.sampled_from([2, 4, 6, 8, 12]))
    divs = [k for k in range(1, n + 1) if n % k == 0]
    layers, degrees, starts = [], [], []
    for i in range(draw(st.integers(1, 5))):
        configs = draw(st.lists(st.sampled_from(divs), min_size=1, max_size=len(divs), unique=True))
        layers.append(
            layer(
                f"l{i}",
                configs=configs,
                params=draw(st.integers(0, 50)),
                act=draw(st.integers(0, 60)),
                compute_s=draw(st.integers(0, 20)),
            )
        )
        k = draw(st.sampled_from(configs))
        degrees.append(k)
        starts.append(draw(st.integers(0, n // k - 1)))
    blocks = tuple(
        Block(
            name=f"b{b}",
            bytes=1,
            lookup_bytes=draw(st.integers(0, 40)),
            compute_s=1.0,
            consumer=draw(st.integers(0, len(layers) - 1)),
        )
        for b in range(draw(st.integers(0, 3)))
    )
    servers = tuple(draw(st.integers(0, n - 1)) for _ in blocks)
    w = Workload(layers=tuple(layers), blocks=blocks, batch_size=n, server_memory_bytes=1e9)
    return n, w, Strategy(tuple(degrees), tuple(starts), servers)


@settings(max_examples=150, deadline=None)
@given(random_case())
def test_invariants(case):
    n, w, s = case
    assert validate_strategy(w, n, s) == []
    groups, mp, compute = strategy_demand(w, n, s)
    assert np.allclose(mp, mp.T) and np.all(np.diag(mp) == 0) and np.all(mp >= 0)
    assert compute.sum() == pytest.approx(sum(float(x.compute_s) for x in w.layers) + len(w.blocks))
    expected_ar = sum(float(x.param_bytes) for x, k in zip(w.layers, s.layer_degree) if k >= 2)
    assert sum(g.bytes for g in groups) == pytest.approx(expected_ar)
    assert len({g.members for g in groups}) == len(groups)
    bound = 2 * sum(float(x.activation_bytes) for x in w.layers[:-1]) + 2 * sum(float(b.lookup_bytes) for b in w.blocks)
    assert mp.sum() <= bound + 1e-9


def test_stage_strategies_cut_layers_into_contiguous_stages():
    from topoopt_ilp.core.strategy import stage_strategies

    layers = tuple(
        Layer(name=f"l{i}", compute_s=1e-3, param_bytes=1e6, activation_bytes=1e6, configs=(1, 2, 4, 8))
        for i in range(3)
    ) + (Layer(name="l3", compute_s=1e-3, param_bytes=1e6, activation_bytes=1e6, configs=(1, 2)),)
    w = Workload(layers=layers, batch_size=64, server_memory_bytes=1e12)
    got = [(s.layer_degree, s.layer_start) for s in stage_strategies(w, 8)]
    assert got == [
        ((1, 1, 1, 1), (0, 1, 2, 3)),  # k = 1: 4 stages of one server
        ((2, 2, 2, 2), (0, 1, 2, 3)),  # k = 2: 4 stages, each on its own 2-coset
        ((4, 4, 4, 2), (0, 0, 1, 1)),
    ]  # k = 4: 2 stages; l3 at its largest degree <= 4
    # k = 8 leaves one stage: no pipeline, so no candidate
