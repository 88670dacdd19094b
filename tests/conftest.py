"""Shared fixtures: the repository root and its shipped instances."""

from __future__ import annotations

import copy
import json
import os
from collections import Counter, defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
INSTANCES = ROOT / "instances"


@pytest.fixture
def root() -> Path:
    return ROOT


def cli_exit_code(argv) -> int:
    """``topoopt ARGV``'s exit code, also of a usage error (argparse exits)."""
    from topoopt_ilp.cli import main  # start-up time: the CLI only for the tests that run it

    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code


def cli_json(argv, capsys) -> dict:
    """``topoopt ARGV --json``'s output, after a zero exit."""
    from topoopt_ilp.cli import main  # start-up time: the CLI only for the tests that run it

    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def instance_data(name: str) -> dict:
    """A fresh (mutable) copy of a shipped instance's JSON."""
    return copy.deepcopy(json.loads((INSTANCES / f"{name}.json").read_text()))


def minimal(**overrides) -> dict:
    """A small valid instance dict; keyword arguments replace top-level sections."""
    data = {
        "format": "topoopt-instance",
        "version": 1,
        "cluster": {"servers": 8, "degree": 2, "link_bandwidth_gbps": 100, "hop_latency_us": 0.0},
        "demand": {"all_to_all": 1e6},
    }
    data.update(overrides)
    return data


# A tiny MoE job: tp 2, pp 2, dp 4, ep 4 on 8 servers of 2 accelerators, 4 experts, 3 MoE layers
# (the first layer dense), so EP groups cross servers (and the first stage's MoE layers differ in
# number from the second's).
TINY_MOE = {
    "name": "tiny-moe",
    "layers": 4,
    "hidden": 64,
    "ffn": 256,
    "heads": 4,
    "vocab": 100,
    "seq_len": 16,
    "moe": {"experts": 4, "top_k": 2, "expert_ffn": 32, "shared_experts": 1, "first_dense_layers": 1},
}


def tiny_moe_doc(**job) -> dict:
    return {
        "format": "topoopt-instance",
        "version": 1,
        "cluster": {
            "servers": 8,
            "degree": 4,
            "link_bandwidth_gbps": 100,
            "accelerators_per_server": 2,
            "scale_up_gbps_per_accelerator": 800,
        },
        "job": {
            "model": copy.deepcopy(TINY_MOE),
            "global_batch": 8,
            "parallelism": {"tp": 2, "pp": 2, "dp": 4, "ep": 4},
            "device_tflops": 1,
            **job,
        },
    }


def bounded_multigraphs(n: int, d: int, *, regular: bool = False, max_multiplicity: int | None = None):
    """Every labelled loopless multigraph on n vertices with degrees <= d (== d when ``regular``) and at
    most ``max_multiplicity`` links per pair (default d), as an (n, n) link-count matrix: one buffer,
    re-filled for each graph (copy what you keep). A depth-first search over the pairs."""
    import itertools

    import numpy as np

    pairs = list(itertools.combinations(range(n), 2))
    top = d if max_multiplicity is None else max_multiplicity
    deg, x = np.zeros(n, dtype=np.int64), np.zeros((n, n), dtype=np.int64)

    def extend(k):
        if k == len(pairs):
            if not regular or (deg == d).all():
                yield x
            return
        i, j = pairs[k]
        for c in range(min(top, d - deg[i], d - deg[j]) + 1):
            if regular and j == n - 1 and deg[i] + c != d:  # i's last pair: its degree is final
                continue
            x[i, j] = x[j, i] = c
            deg[i] += c
            deg[j] += c
            yield from extend(k + 1)
            deg[i] -= c
            deg[j] -= c
        x[i, j] = x[j, i] = 0

    yield from extend(0)


# CI runs the property tests on a fixed sequence of examples (a red CI should mean a change broke
# something, not that the dice found an old bug); locally they explore new examples every run.
from hypothesis import HealthCheck  # noqa: E402
from hypothesis import settings as _hsettings  # noqa: E402

_hsettings.register_profile("ci", derandomize=True)
if os.environ.get("CI"):
    _hsettings.load_profile("ci")


def placed_solution(inst, X, strategy, rings: str = "shortest"):
    """A solution placing ``strategy`` on topology ``X`` with the placement model's rings, computed
    here independently of the models (networkx hop distances): each AllReduce group m_0..m_{k-1}
    (coset order) split equally over the rings m_j -> m_{j+p} whose stride p, coprime to k, gives the
    least hop total (``rings="coset"``: p = 1 only; below 3 members p = 1)."""
    import math

    import networkx as nx
    import numpy as np

    from topoopt_ilp.core.routes import RingSet, Routing
    from topoopt_ilp.core.solution import Solution, Topology
    from topoopt_ilp.core.strategy import strategy_demand, strategy_to_dict

    X = np.asarray(X)
    dist = dict(nx.all_pairs_shortest_path_length(nx.from_numpy_array((X > 0).astype(int), create_using=nx.DiGraph)))
    groups = strategy_demand(inst.workload, inst.n, strategy)[0]
    listed = []
    for g, group in enumerate(groups):
        m, k = list(group.members), len(group.members)
        if k < 2:
            continue
        hops = {p: sum(dist[m[j]][m[(j + p) % k]] for j in range(k)) for p in range(1, k) if math.gcd(p, k) == 1}
        strides = [1] if rings == "coset" or k < 3 else [p for p in hops if hops[p] == min(hops.values())]
        listed += [(g, [m[(j * p) % k] for j in range(k)], 1.0 / len(strides)) for p in strides]
    routing = Routing(rings=RingSet.from_lists(listed) if listed else RingSet.empty())
    return Solution(
        status="feasible", method="given", topology=Topology(X), placement=strategy_to_dict(strategy), routing=routing
    )


# The fuzz suite (tests/fuzz/) runs a fixed, seeded budget by default (well under a minute); the long
# run explores thousands of cases per reader: ``pytest tests/fuzz --fuzz-long`` or
# ``TOPOOPT_FUZZ_EXAMPLES=5000 pytest tests/fuzz``. Tests marked ``fuzz_long`` run only then.
FUZZ_DEFAULT_EXAMPLES = 40
#: reader -> exit code -> fuzz cases, printed at the end of a run that has any.
FUZZ_TALLY: dict[str, Counter] = defaultdict(Counter)
FUZZ_LONG_EXAMPLES = 2000


def pytest_addoption(parser):
    parser.addoption("--fuzz-long", action="store_true", help="run the fuzz suite's long budget (thousands of cases)")


def pytest_configure(config):
    config.addinivalue_line("markers", "fuzz_long: runs only with --fuzz-long or TOPOOPT_FUZZ_EXAMPLES set")
    long_run = config.getoption("--fuzz-long") or bool(os.environ.get("TOPOOPT_FUZZ_EXAMPLES"))
    examples = int(
        os.environ.get("TOPOOPT_FUZZ_EXAMPLES") or (FUZZ_LONG_EXAMPLES if long_run else FUZZ_DEFAULT_EXAMPLES)
    )
    config.fuzz_long, config.fuzz_examples = long_run, examples
    # The default run is reproducible (one seed, the same cases each time); the long run explores.
    # capsys and tmp_path_factory are shared by a test's examples on purpose: each example reads
    # capsys out and writes to a folder of its own.
    _hsettings.register_profile(
        "fuzz",
        max_examples=examples,
        derandomize=not long_run,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
    )


def pytest_collection_modifyitems(config, items):
    if config.fuzz_long:
        return
    skip = pytest.mark.skip(reason="long fuzz run only: --fuzz-long or TOPOOPT_FUZZ_EXAMPLES")
    for item in items:
        if "fuzz_long" in item.keywords:
            item.add_marker(skip)


def pytest_terminal_summary(terminalreporter):
    if not FUZZ_TALLY:
        return
    terminalreporter.section("fuzz cases per reader, by exit code")
    total: Counter = Counter()
    for reader in sorted(FUZZ_TALLY):
        counts = FUZZ_TALLY[reader]
        total.update(counts)
        shown = ", ".join(f"exit {code}: {n}" for code, n in sorted(counts.items()))
        terminalreporter.write_line(f"{reader:<28} {sum(counts.values()):>7} cases   {shown}")
    shown = ", ".join(f"exit {code}: {n}" for code, n in sorted(total.items()))
    terminalreporter.write_line(f"{'all':<28} {sum(total.values()):>7} cases   {shown}")
