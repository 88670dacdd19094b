"""Small workload instances (n = 6..10) on which the joint MILP can prove optimality.

Shared by ``joint_small.py`` and ``alternating_quality.py``. Two kinds:

* zoo models generated at small n (``topoopt_ilp.files.zoo``): ResNet-50 (6 stages) and the BERT-like
  Transformer (12 layers), with the paper's per-layer sizes;
* three hand-made jobs with the same shapes at a size the MILP can settle: a 4-layer Transformer
  (heavy parameters, pipelining pays), a DLRM-like job (bottom MLP, an interaction layer reading 4
  embedding tables, top MLP) and an MLP whose layers differ tenfold in compute.

All at 100 Gbps per link, 1 us per hop, 160 GB per server, ``overlap: none``.
"""

from __future__ import annotations

from _args import names_from

from topoopt_ilp import files
from topoopt_ilp.core.instance import Instance
from topoopt_ilp.files import zoo

GB = 1e9


def _instance(name: str, n: int, d: int, layers: list[dict], blocks: list[dict] | None = None) -> Instance:
    data = {
        "format": "topoopt-instance",
        "version": 1,
        "name": name,
        "cluster": {"servers": n, "degree": d, "link_bandwidth_gbps": 100.0, "hop_latency_us": 1.0},
        "workload": {
            "batch_size": 64 * n,
            "server_memory_bytes": 160 * GB,
            "layers": layers,
            **({"blocks": blocks} if blocks else {}),
        },
        "objective": "iteration_time",
    }
    return files.parse_instance(data)


def _divisors(n: int) -> list[int]:
    return [k for k in range(1, n + 1) if n % k == 0]


def transformer(n: int, d: int) -> Instance:
    """4 encoder layers of 50 MB parameters, 12 ms of compute each for the whole batch."""
    layers = [
        {"name": f"enc{i}", "compute_s": 0.012, "param_bytes": 5e7, "activation_bytes": 3e7, "configs": _divisors(n)}
        for i in range(4)
    ]
    return _instance(f"transformer4-{n}-d{d}", n, d, layers)


def dlrm(n: int, d: int) -> Instance:
    """Bottom MLP (2), interaction (reads 4 tables), top MLP (2); tables of 2 GB, 16 MB lookups."""
    cfg = _divisors(n)
    layers = [
        {"name": "bot0", "compute_s": 0.004, "param_bytes": 4e6, "activation_bytes": 8e6, "configs": cfg},
        {"name": "bot1", "compute_s": 0.004, "param_bytes": 4e6, "activation_bytes": 8e6, "configs": cfg},
        {"name": "interact", "compute_s": 0.002, "param_bytes": 0.0, "activation_bytes": 2e7, "configs": cfg},
        {"name": "top0", "compute_s": 0.008, "param_bytes": 3e7, "activation_bytes": 8e6, "configs": cfg},
        {"name": "top1", "compute_s": 0.008, "param_bytes": 3e7, "activation_bytes": 1e6, "configs": cfg},
    ]
    blocks = [
        {"name": f"emb{j}", "bytes": 2 * GB, "lookup_bytes": 1.6e7, "compute_s": 0.0005, "consumer": 2}
        for j in range(4)
    ]
    return _instance(f"dlrm-mini-{n}-d{d}", n, d, layers, blocks)


def skewed_mlp(n: int, d: int) -> Instance:
    """Five layers whose compute differs tenfold and whose parameters are inversely sized."""
    spec = [(0.002, 8e7), (0.02, 4e6), (0.004, 6e7), (0.016, 8e6), (0.002, 2e7)]
    layers = [
        {"name": f"l{i}", "compute_s": c, "param_bytes": p, "activation_bytes": 1.2e7, "configs": _divisors(n)}
        for i, (c, p) in enumerate(spec)
    ]
    return _instance(f"skewed-mlp-{n}-d{d}", n, d, layers)


def _zoo(model: str, n: int, d: int) -> Instance:
    return files.parse_instance(zoo.generate(model, n, d, 100.0))


def small_instances() -> dict[str, Instance]:
    """The benchmark set, in order of size."""
    out: dict[str, Instance] = {}
    for make, n, d in (
        (transformer, 6, 2),
        (dlrm, 6, 2),
        (skewed_mlp, 6, 2),
        (transformer, 8, 2),
        (dlrm, 8, 2),
        (skewed_mlp, 8, 3),
        (transformer, 10, 2),
        (skewed_mlp, 10, 2),
    ):
        inst = make(n, d)
        out[inst.name] = inst
    for model, n, d in (("resnet50", 6, 2), ("resnet50", 8, 2), ("bert", 6, 2)):
        inst = _zoo(model, n, d)
        out[inst.name] = inst
    return out


def small_names(text: str) -> list[str]:
    """The argparse type of ``--instances``: a comma list of names of :func:`small_instances` (none: all)."""
    return names_from(list(small_instances()), "instance")(text)
