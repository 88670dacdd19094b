"""parse_workload / workload_to_dict: the documented format, its defaults, and one error per rule."""

from __future__ import annotations

import copy
import json
import textwrap

import pytest

from topoopt_ilp.core import workload as wl
from topoopt_ilp.core.workload import DEFAULT_DEVICE_FLOPS, Block, Layer, Workload, check_workload, coset
from topoopt_ilp.errors import InstanceError
from topoopt_ilp.files.instance_file import parse_workload, workload_to_dict


def docstring_example() -> dict:
    """The example of the module docstring, parsed as JSON (so the documentation cannot rot)."""
    doc = wl.__doc__
    start = doc.index('    "workload": {')
    end = doc.index("\n\n", start)
    text = textwrap.dedent(doc[start:end])
    return json.loads("{" + text + "}")["workload"]


def small() -> dict:
    return {
        "batch_size": 8,
        "server_memory_bytes": 1000.0,
        "layers": [
            {"name": "a", "compute_s": 1.0, "param_bytes": 100, "activation_bytes": 40, "configs": [2, 4]},
            {
                "name": "b",
                "flops": 2e12,
                "param_bytes": 10,
                "activation_bytes": 8,
                "configs": [1, 2],
                "memory_bytes": 50,
                "measured": {"2": 0.5},
            },
        ],
        "blocks": [{"name": "t", "bytes": 10, "lookup_bytes": 12, "consumer": 1}],
    }


def error(data, n=4) -> InstanceError:
    with pytest.raises(InstanceError) as exc:
        parse_workload(data, n)
    return exc.value


def test_docstring_example_parses_with_its_documented_values():
    w = parse_workload(docstring_example(), 8)
    assert w.batch_size == 1024 and w.server_memory_bytes == 160e9 and w.overlap == "none"
    assert [layer.name for layer in w.layers] == ["bottom0", "top0"]
    top = w.layers[1]
    assert top.memory_bytes == 4 * 4.2e6  # default: 4 x param_bytes
    assert top.configs == (2, 4, 8) and dict(top.measured) == {8: 0.0006}
    assert w.blocks == (Block(name="table0", bytes=5.12e9, lookup_bytes=524288, compute_s=1e-5, consumer=1),)
    # time at degree 8 is the measured one, at 4 the derived compute_s / k
    assert w.layer_time(1, 8) == 0.0006 and w.layer_time(1, 4) == pytest.approx(0.001)
    assert w.layer_time(0, 2) == pytest.approx(2.6e10 / 4.992e14 / 2)


def test_defaults_and_flops_to_seconds():
    w = parse_workload(small(), 4)
    assert DEFAULT_DEVICE_FLOPS == pytest.approx(4 * 312e12 * 0.4) == w.device_flops
    a, b = w.layers
    assert a.memory_bytes == 400.0 and b.memory_bytes == 50
    assert w.layer_compute_s(1) == pytest.approx(2e12 / 4.992e14)
    assert w.layer_time(1, 1) == pytest.approx(2e12 / 4.992e14)
    assert w.layer_time(1, 2) == 0.5  # measured overrides
    assert w.layer_time(0, 4) == 0.25
    assert w.blocks[0].compute_s == 0.0 and w.blocks[0].consumer == 1
    assert a.replica_memory(2) == 400 + 40 / 2


def test_round_trip_is_exact():
    for data, n in ((small(), 4), (docstring_example(), 8)):
        w = parse_workload(data, n)
        d = workload_to_dict(w)
        again = parse_workload(json.loads(json.dumps(d)), n)
        assert again == w
        assert workload_to_dict(again) == d


def test_measured_only_layer_needs_every_config():
    data = small()
    del data["layers"][1]["flops"]
    data["layers"][1]["measured"] = {"1": 0.9, "2": 0.5}
    w = parse_workload(data, 4)
    assert w.layer_compute_s(1) is None and w.layer_time(1, 1) == 0.9
    data["layers"][1]["measured"] = {"2": 0.5}
    e = error(data)
    assert e.field == "workload.layers[1]" and "compute_s or flops" in e.reason


def test_coset():
    assert coset(12, 4, 2) == (2, 5, 8, 11)
    assert coset(6, 1, 5) == (5,)
    assert coset(8, 8, 0) == tuple(range(8))


def _set(path, value):
    def f(d):
        obj = d
        for key in path[:-1]:
            obj = obj[key]
        obj[path[-1]] = value

    return f


def _del(path):
    def f(d):
        obj = d
        for key in path[:-1]:
            obj = obj[key]
        del obj[path[-1]]

    return f


CASES = [
    (_set(["extra"], 1), "workload", "unknown key 'extra'"),
    (_set(["layers", 0, "colour"], 1), "workload.layers[0]", "unknown key 'colour'"),
    (_set(["blocks", 0, "rows"], 1), "workload.blocks[0]", "unknown key 'rows'"),
    (_del(["batch_size"]), "workload", "missing required key 'batch_size'"),
    (_del(["layers", 0, "configs"]), "workload.layers[0]", "missing required key 'configs'"),
    (_set(["layers"], {}), "workload.layers", "expected a list"),
    (_set(["layers"], []), "workload.layers", "at least one layer"),
    (_set(["batch_size"], 8.0), "workload.batch_size", "expected an integer"),
    (_set(["batch_size"], True), "workload.batch_size", "expected an integer"),
    (_set(["batch_size"], 0), "workload.batch_size", "must be >= 1"),
    (_set(["server_memory_bytes"], 0), "workload.server_memory_bytes", "must be > 0"),
    (_set(["device_flops"], -1.0), "workload.device_flops", "must be > 0"),
    (_set(["overlap"], "partial"), "workload.overlap", "must be one of none, full"),
    (_set(["layers", 0, "param_bytes"], float("nan")), "workload.layers[0].param_bytes", "finite"),
    (_set(["layers", 0, "activation_bytes"], -1), "workload.layers[0].activation_bytes", "must be >= 0"),
    (_set(["layers", 0, "memory_bytes"], "big"), "workload.layers[0].memory_bytes", "expected a number, got a string"),
    (_set(["layers", 0, "compute_s"], float("inf")), "workload.layers[0].compute_s", "finite"),
    (_set(["layers", 0, "name"], ""), "workload.layers[0].name", "non-empty string"),
    (_set(["layers", 1, "name"], "a"), "workload.layers[1].name", "already used by workload.layers[0].name"),
    (_set(["blocks", 0, "name"], "b"), "workload.blocks[0].name", "already used by workload.layers[1].name"),
    (_set(["layers", 0, "configs"], [2, 3]), "workload.layers[0].configs[1]", "degree 3 does not divide the 4 servers"),
    (_set(["layers", 0, "configs"], [4, 4]), "workload.layers[0].configs[1]", "listed twice"),
    (_set(["layers", 0, "configs"], []), "workload.layers[0].configs", "at least one"),
    (_set(["layers", 0, "configs"], [0]), "workload.layers[0].configs[0]", "must be >= 1"),
    (_set(["batch_size"], 3), "workload.layers[0].configs[1]", "degree 4 exceeds the batch size 3"),
    (_set(["layers", 0, "flops"], 5.0), "workload.layers[0]", "either compute_s or flops, not both"),
    (
        _set(["layers", 1, "measured"], {"4": 1.0}),
        "workload.layers[1].measured.4",
        "not among the layer's configs [1, 2]",
    ),
    (_set(["layers", 1, "measured"], {"two": 1.0}), "workload.layers[1].measured", "'two' is not a degree"),
    (_set(["layers", 1, "measured"], {"2": -1.0}), "workload.layers[1].measured.2", "must be >= 0"),
    (_set(["layers", 1, "measured"], [1.0]), "workload.layers[1].measured", "expected an object"),
    (_set(["blocks", 0, "lookup_bytes"], -5), "workload.blocks[0].lookup_bytes", "must be >= 0"),
    (_set(["blocks", 0, "consumer"], 2), "workload.blocks[0].consumer", "must be <= 1"),
    (_set(["blocks", 0, "consumer"], "b"), "workload.blocks[0].consumer", "expected an integer"),
    (_set(["blocks", 0, "bytes"], 1001), "workload.blocks[0].bytes", "larger than any server's memory"),
]


@pytest.mark.parametrize("mutate, field, reason", CASES, ids=[c[2][:40] for c in CASES])
def test_each_violation_is_one_error_with_its_path(mutate, field, reason):
    data = copy.deepcopy(small())
    mutate(data)
    e = error(data)
    assert e.field == field
    assert reason in e.reason


def test_memory_feasibility_conditions():
    # capacity 1000 per server, n = 4.
    # 1. layers forced onto every server (only config n) exceed the capacity
    data = small()
    data["layers"][0].update(configs=[4], memory_bytes=990, activation_bytes=80)  # 990 + 80/4 = 1010
    e = error(data)
    assert e.field == "workload.layers[0]" and "must run on every server" in e.reason and "1010" in e.reason
    # 2. a block fits in a server but not next to the forced layers (990 + 20 = 1010 -> fixed 1000 minus...)
    data = small()
    data["layers"][0].update(configs=[4], memory_bytes=900, activation_bytes=80)  # fixed 920 per server
    data["blocks"][0]["bytes"] = 100
    e = error(data)
    assert e.field == "workload.blocks[0].bytes" and "does not fit next to the 920 bytes" in e.reason
    # 3. a layer none of whose configs fits: 950 + 200/k > 1000 for k in (1, 2) (k=4 is not allowed)
    data = small()
    data["layers"][1].update(memory_bytes=950, activation_bytes=200)
    e = error(data)
    assert e.field == "workload.layers[1]" and "no config fits" in e.reason and "1050" in e.reason
    # 3'. with degree 4 allowed the layer fits alone (950 + 200/4 = 1000), but then it occupies
    #     4*950 + 200 = 4000 bytes cluster-wide; with layer a at its frugal k=2 (2*400 + 40 = 840)
    #     and the 10-byte block the total 4850 exceeds 4 x 1000 (condition 4)
    data["layers"][1].update(configs=[1, 2, 4], measured={})
    e = error(data)
    assert e.field == "workload" and "no feasible placement" in e.reason and "4850" in e.reason


def test_aggregate_memory_condition_is_exact_at_the_boundary():
    # 4 servers x 1000 bytes; per layer min over configs of k*memory + activation.
    def make(table_bytes):
        return {
            "batch_size": 4,
            "server_memory_bytes": 1000,
            "layers": [
                {
                    "name": "x",
                    "compute_s": 1,
                    "param_bytes": 0,
                    "memory_bytes": 600,
                    "activation_bytes": 400,
                    "configs": [1, 2],
                },  # min(1*600+400, 2*600+400) = 1000
            ],
            "blocks": [{"name": f"t{i}", "bytes": table_bytes, "lookup_bytes": 0} for i in range(4)],
        }

    parse_workload(make(750), 4)  # 1000 + 4*750 = 4000 = 4 x 1000: allowed
    e = error(make(751))
    assert e.field == "workload" and "no feasible placement" in e.reason and "4004" in e.reason


def test_pigeonhole_memory_condition():
    """Condition 5: a server holds at most q blocks of more than C/(q+1). Five tables of 600 bytes on
    4 servers of 1000 pass the aggregate (3000 + layers <= 4000) but no two share a server; the
    model had to prove it (exit 3) where the file can be refused before solving (exit 2)."""

    def make(sizes):
        data = small()
        data["blocks"] = [{"name": f"t{i}", "bytes": b, "lookup_bytes": 0} for i, b in enumerate(sizes)]
        return data

    parse_workload(make([600] * 4), 4)  # one each: fits
    e = error(make([600] * 5))
    assert e.field == "workload.blocks" and "5 blocks of more than 500 bytes" in e.reason and "at most 1" in e.reason
    parse_workload(make([370] * 8), 4)  # level 2: two per server
    e = error(make([340] * 9))
    assert "9 blocks of more than 333.3 bytes" in e.reason and "at most 2" in e.reason
    parse_workload(make([500] * 5), 4)  # exactly C/2 is allowed: two share a server


def test_workload_built_in_code_is_checked_alike():
    layer = Layer(name="a", compute_s=1.0, param_bytes=8, activation_bytes=4, configs=[3])
    w = Workload(layers=[layer], batch_size=4, server_memory_bytes=100)
    assert isinstance(w.layers, tuple) and layer.configs == (3,)
    with pytest.raises(InstanceError) as exc:
        check_workload(w, 4)
    assert exc.value.field == "workload.layers[0].configs[0]"
    check_workload(w, 6)
    # measured dicts are frozen into read-only mappings
    m = Layer(name="m", compute_s=1.0, param_bytes=0, activation_bytes=0, configs=(1,), measured={1: 0.5})
    with pytest.raises(TypeError):
        m.measured[1] = 2.0


# ----------------------------------------------------------------------------------------------
# Hostile input: any JSON value in any place gives a Workload or one InstanceError, never a crash.
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**20), 10**20) | st.floats(allow_nan=True) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)


def _paths(obj, prefix=()):
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _paths(v, prefix + (i,))


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_any_value_anywhere_is_an_instance_error_or_a_workload(data):
    doc = copy.deepcopy(small())
    paths = list(_paths(doc))
    path = data.draw(st.sampled_from(paths[1:]))
    value = data.draw(_json)
    _set(list(path), value)(doc)
    try:
        w = parse_workload(doc, 4)
    except InstanceError as exc:
        assert exc.field and exc.field.startswith("workload")
    else:
        assert parse_workload(workload_to_dict(w), 4) == w
