"""Model zoo: the training jobs TopoOpt evaluated, as workload-mode instance files.

``generate(model, servers, degree, bandwidth_gbps, batch=None)`` returns a full instance dict
(``"format": "topoopt-instance"``, ``cluster``, ``workload``, ``objective: iteration_time``);
:func:`write_zoo` writes the shipped set into ``instances/paper/``. ``topoopt generate MODEL
--servers N --degree D --bandwidth GBPS [--batch B]`` calls :func:`generate`.

Where the numbers come from
---------------------------
Model shapes are TopoOpt's (read from the authors' FlexFlow scripts; docs/guide/workloads.md);
the byte and FLOP counts are computed here from those shapes, with these conventions:

* parameters, gradients and activations are fp32 (4 bytes), as FlexFlow trains; a layer's
  ``memory_bytes`` is 16 bytes per parameter (weights, gradients, two Adam moments);
* training FLOPs = 3 x forward FLOPs (backward ~ 2 x forward); forward FLOPs of a dense/conv layer
  = 2 x multiply-accumulates (so ResNet-50's often-quoted "4.1 GFLOPs" forward, which counts MACs,
  is 8.2 GFLOP here);
* a cluster server is 4 x A100 (TopoOpt's ``--big-gpu 4``): 160 GB memory (4 x 40 GB) and
  ``device_flops`` = 4 x 312 TFLOPS (bf16 dense peak) x 0.4 utilisation = 4.992e14 FLOP/s
  (:data:`topoopt_ilp.core.workload.DEFAULT_DEVICE_FLOPS`);
* a testbed server is 1 x A100 40 GB (assumption: the digest gives no GPU count for the testbed):
  40 GB and 1.248e14 FLOP/s;
* ``batch`` is the *global* batch (samples per iteration). Defaults: the paper's per-GPU "local
  batch" x 4 GPUs x servers for the 128-server models; the testbed's stated batch as a global batch;
* embedding tables are plain weights (DLRM/NCF train them with sparse SGD, no optimizer state); one
  lookup per table per sample (pooling factor 1); a table's ``compute_s`` is 5 x lookup bytes over
  one A100's 1.555 TB/s HBM (gather read+write forward; read gradients, read+write rows backward);
* ``configs`` of every layer: all k dividing ``servers`` with k <= batch whose replica
  (``memory_bytes + activation_bytes/k``) fits in a server.

DLRM's table count vs servers: tables are blocks placed round robin in the initial strategy, so any
server count works (several tables per server when servers < 64, table-less servers otherwise), as
long as the tables fit in memory; :func:`generate` raises ValueError when no placement can fit.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from topoopt_ilp.core.instance import MAX_SERVERS, Cluster
from topoopt_ilp.core.workload import A100_BF16_DENSE_FLOPS, UTILISATION
from topoopt_ilp.errors import InstanceError
from topoopt_ilp.files.instance_file import parse_workload

__all__ = ["MODELS", "SOURCES", "ZOO", "generate", "write_zoo", "zoo_filename"]

FP32 = 4
BYTES_PER_PARAM_TRAINING = 16  # fp32 weights + gradients + Adam first and second moments
TRAIN_FLOPS_FACTOR = 3  # forward + backward (~2x forward)
A100_MEMORY = 40e9
A100_HBM_BYTES_PER_S = 1.555e12
CLUSTER_GPUS = 4
TESTBED_GPUS = 1
TABLE_COMPUTE_PASSES = 5

SOURCES: dict[str, str] = {
    "dlrm": (
        "TopoOpt DLRM (FlexFlow dlrmsim): 64 embedding tables of 10M x 128 fp32 = 5.12e9 bytes each; "
        "bottom MLP 8 x 2048 (13 dense Criteo features in), top MLP 16 x 4096 whose input is the "
        "concatenation of the bottom output and the 64 lookups (2048 + 64*128 = 10240); local batch 128 per GPU. "
        "Per table and sample one lookup of 128*4 = 512 bytes; a dense layer din->dout has din*dout+dout "
        "params and 2*din*dout forward FLOPs per sample."
    ),
    "bert": (
        "TopoOpt BERT-like Transformer (FlexFlow Transformersim): 12 layers, sequence 64, hidden h = 1024, "
        "16 heads; local batch 16 per GPU. Params per layer 12h^2 + 13h = 12,596,224 (~12.6M: QKV+output "
        "4h^2+4h, FFN 8h^2+5h, two LayerNorms 4h); forward FLOPs per sample 2*64*12h^2 + 4*64^2*h "
        "= 1.627e9; activations 64*h*4 = 262,144 bytes per sample."
    ),
    "candle": (
        "TopoOpt CANDLE-Uno (FlexFlow candle_uno): 16 dense feature layers of 16384 then 8 dense layers "
        "of 16384 (one feature tower modelled, input width 16384); local batch 256 per GPU. Per layer "
        "16384^2 + 16384 = 268,451,840 params, 2*16384^2 = 5.37e8 forward FLOPs and 65,536 activation "
        "bytes per sample."
    ),
    "vgg16": (
        "VGG-16 (Simonyan & Zisserman), 224x224x3 input: 13 conv 3x3 layers (64,64,128,128,256x3,512x3,512x3, "
        "2x2 max-pool after each block) and FC 25088->4096->4096->1000; 138,357,544 params, 15.47e9 MACs "
        "= 30.9e9 forward FLOPs per image; local batch 128 per GPU (TopoOpt scripts). A layer's activation "
        "is its output after pooling."
    ),
    "resnet50": (
        "ResNet-50 (He et al., torchvision v1.5 layout) in 6 stages: stem conv 7x7/2 + max-pool, conv2_x..conv5_x "
        "(3, 4, 6, 3 bottlenecks) and FC 2048->1000; 25,557,032 params (BatchNorm scale+shift included), "
        "~4.09e9 MACs = 8.2e9 forward FLOPs per image (the usual '4.1 GFLOPs' counts MACs); local batch "
        "128 per GPU (TopoOpt scripts). A stage's activation is its output tensor."
    ),
    "ncf": (
        "TopoOpt NCF (FlexFlow ncfsim): 32 embedding tables of 1M users/items x 128 fp32 = 5.12e8 bytes each, "
        "MLP 8 x 4096 fed by the 32 concatenated lookups (32*128 = 4096); the factor-64 GMF branch is not "
        "modelled (negligible next to the MLP). Local batch 128 per GPU is an assumption (not in the digest)."
    ),
    "candle-testbed": (
        "TopoOpt testbed CANDLE-Uno (12 servers, 4 x 25 Gbps): 8 dense feature layers of 4096 + 4 dense layers "
        "of 4096, batch 120 (taken as global); per layer 4096^2 + 4096 = 16,781,312 params, 2*4096^2 forward "
        "FLOPs and 16,384 activation bytes per sample."
    ),
    "bert-testbed": (
        "TopoOpt testbed BERT (12 servers, 4 x 25 Gbps): 6 layers, hidden 1024 (sequence 64 and 16 heads "
        "as in the 128-server model), batch 24 (taken as global); per-layer numbers as for 'bert'."
    ),
    "resnet50-testbed": (
        "ResNet-50 on the TopoOpt testbed (12 servers, 4 x 25 Gbps), shapes as for 'resnet50'; "
        "batch 128 per server (the 128-server local batch; the testbed's is not in the digest)."
    ),
    "vgg16-testbed": (
        "VGG-16 on the TopoOpt testbed (12 servers, 4 x 25 Gbps), shapes as for 'vgg16'; "
        "batch 128 per server (the 128-server local batch; the testbed's is not in the digest)."
    ),
}

_HARDWARE = {
    "cluster": (
        f"Server: {CLUSTER_GPUS} x A100 40GB, 160 GB, {CLUSTER_GPUS} x 312 TFLOPS bf16 x {UTILISATION} utilisation. "
        "fp32 params/grads/activations, 16 bytes per parameter for training memory, training FLOPs = 3 x forward."
    ),
    "testbed": (
        f"Server: {TESTBED_GPUS} x A100 40GB (assumed), 40 GB, 312 TFLOPS bf16 x {UTILISATION} utilisation. "
        "fp32 params/grads/activations, 16 bytes per parameter for training memory, training FLOPs = 3 x forward."
    ),
}


# ----------------------------------------------------------------------------------------------
# Layer arithmetic: (name, params, forward FLOPs per sample, activation bytes per sample)
# ----------------------------------------------------------------------------------------------
_Shape = tuple[str, int, int, int]


def _dense(name: str, din: int, dout: int, tokens: int = 1) -> _Shape:
    return name, din * dout + dout, 2 * din * dout * tokens, dout * tokens * FP32


def _transformer(name: str, h: int, seq: int) -> _Shape:
    params = 12 * h * h + 13 * h
    fwd = 2 * seq * 12 * h * h + 4 * seq * seq * h  # matmuls + QK^T and attention x V
    return name, params, fwd, seq * h * FP32


def _vgg16() -> list[_Shape]:
    plan = [(64, 2), (128, 2), (256, 3), (512, 3), (512, 3)]
    out, cin, hw = [], 3, 224
    for blk, (c, reps) in enumerate(plan, start=1):
        for r in range(1, reps + 1):
            params = 9 * cin * c + c
            macs = 9 * cin * c * hw * hw
            last = r == reps
            act_hw = hw // 2 if last else hw  # the block's last conv is followed by 2x2 max-pool
            out.append((f"conv{blk}_{r}", params, 2 * macs, act_hw * act_hw * c * FP32))
            cin = c
        hw //= 2
    out.append(_dense("fc6", 7 * 7 * 512, 4096))
    out.append(_dense("fc7", 4096, 4096))
    out.append(_dense("fc8", 4096, 1000))
    return out


def _resnet50() -> list[_Shape]:
    def conv(cin: int, cout: int, k: int, hw_out: int) -> tuple[int, int]:
        return k * k * cin * cout + 2 * cout, k * k * cin * cout * hw_out * hw_out  # (params incl. BN, MACs)

    p, m = conv(3, 64, 7, 112)
    out: list[_Shape] = [("stem", p, 2 * m, 56 * 56 * 64 * FP32)]  # 7x7/2 conv + BN, then 3x3/2 max-pool
    cin, hw = 64, 56
    for stage, (mid, blocks, stride) in enumerate([(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)], start=2):
        params = macs = 0
        for b in range(blocks):
            s = stride if b == 0 else 1
            hw_out = hw // s
            for pp, mm in (conv(cin, mid, 1, hw), conv(mid, mid, 3, hw_out), conv(mid, 4 * mid, 1, hw_out)):
                params += pp
                macs += mm
            if b == 0:  # projection shortcut
                pp, mm = conv(cin, 4 * mid, 1, hw_out)
                params += pp
                macs += mm
            cin, hw = 4 * mid, hw_out
        out.append((f"conv{stage}_x", params, 2 * macs, hw * hw * cin * FP32))
    out.append(_dense("fc", 2048, 1000))
    return out


# ----------------------------------------------------------------------------------------------
def _divisors(n: int) -> list[int]:
    small = [k for k in range(1, math.isqrt(n) + 1) if n % k == 0]
    return sorted(set(small + [n // k for k in small]))


def _build(
    model: str,
    servers: int,
    degree: int,
    bandwidth_gbps: float,
    batch: int,
    shapes: list[_Shape],
    hardware: str,
    tables: tuple[int, int, int] | None = None,
    consumer: int = 0,
) -> dict:
    """Assemble and check the instance dict. ``tables`` = (count, rows, dim) of embedding blocks."""
    gpus = CLUSTER_GPUS if hardware == "cluster" else TESTBED_GPUS
    capacity = gpus * A100_MEMORY
    device_flops = gpus * A100_BF16_DENSE_FLOPS * UTILISATION
    divisors = [k for k in _divisors(servers) if k <= batch]
    layers = []
    for name, params, fwd, act in shapes:
        memory = BYTES_PER_PARAM_TRAINING * params
        activation = act * batch
        configs = [k for k in divisors if memory + activation / k <= capacity]
        layers.append(
            {
                "name": name,
                "flops": TRAIN_FLOPS_FACTOR * fwd * batch,
                "param_bytes": params * FP32,
                "activation_bytes": activation,
                "memory_bytes": memory,
                "configs": configs,
            }
        )
    blocks = []
    if tables is not None:
        count, rows, dim = tables
        lookup = batch * dim * FP32
        for t in range(count):
            blocks.append(
                {
                    "name": f"table{t}",
                    "bytes": rows * dim * FP32,
                    "lookup_bytes": lookup,
                    "compute_s": float(
                        f"{TABLE_COMPUTE_PASSES * lookup / A100_HBM_BYTES_PER_S:.6g}"
                    ),  # one GPU holds the table
                    "consumer": consumer,
                }
            )
    workload: dict[str, Any] = {
        "batch_size": batch,
        "server_memory_bytes": capacity,
        "device_flops": device_flops,
        "overlap": "none",
        "layers": layers,
    }
    if blocks:
        workload["blocks"] = blocks
    for i, layer in enumerate(layers):
        if not layer["configs"]:
            raise ValueError(
                f"{model} on {servers} servers with batch {batch}: layer {layer['name']} fits in no server's "
                f"memory ({capacity:.3g} bytes) at any degree dividing {servers}"
            )
    try:
        parse_workload(workload, servers)
    except InstanceError as exc:
        raise ValueError(f"{model} on {servers} servers with batch {batch}: {exc}") from None
    params = sum(s[1] for s in shapes)
    summary = (
        f"{model}: {len(layers)} layers ({params / 1e6:.1f}M params)"
        + (f", {len(blocks)} embedding tables of {blocks[0]['bytes'] / 1e9:.3g} GB" if blocks else "")
        + f"; global batch {batch}; {servers} servers, degree {degree}, {bandwidth_gbps:g} Gbps. "
    )
    return {
        "format": "topoopt-instance",
        "version": 1,
        "name": f"{model}-{servers}-d{degree}",
        "description": summary + "Source: " + SOURCES[model] + " " + _HARDWARE[hardware],
        "cluster": {"servers": servers, "degree": degree, "link_bandwidth_gbps": bandwidth_gbps, "hop_latency_us": 1.0},
        "workload": workload,
        "objective": "iteration_time",
    }


def _per_gpu(local: int, gpus: int) -> Callable[[int], int]:
    return lambda servers: local * gpus * servers


def _model(
    model: str,
    shapes: Callable[[], list[_Shape]],
    default_batch: Callable[[int], int],
    hardware: str,
    tables: tuple[int, int, int] | None = None,
    consumer: int = 0,
):
    def generator(servers: int, degree: int, bandwidth_gbps: float, batch: int | None = None) -> dict:
        b = default_batch(servers) if batch is None else batch
        return _build(model, servers, degree, bandwidth_gbps, b, shapes(), hardware, tables, consumer)

    generator.__name__ = f"generate_{model.replace('-', '_')}"
    generator.__doc__ = f"Instance dict of {model}. " + SOURCES[model]
    return generator


def _dlrm() -> list[_Shape]:
    bottom = [_dense("bottom0", 13, 2048)] + [_dense(f"bottom{i}", 2048, 2048) for i in range(1, 8)]
    top = [_dense("top0", 2048 + 64 * 128, 4096)] + [_dense(f"top{i}", 4096, 4096) for i in range(1, 16)]
    return bottom + top


def _candle(feature: int, dense: int, width: int) -> Callable[[], list[_Shape]]:
    return lambda: (
        [_dense(f"feature{i}", width, width) for i in range(feature)]
        + [_dense(f"dense{i}", width, width) for i in range(dense)]
    )


#: Model name -> generator ``(servers, degree, bandwidth_gbps, batch=None) -> instance dict``.
MODELS: dict[str, Callable[..., dict]] = {
    "dlrm": _model("dlrm", _dlrm, _per_gpu(128, CLUSTER_GPUS), "cluster", tables=(64, 10_000_000, 128), consumer=8),
    "bert": _model(
        "bert", lambda: [_transformer(f"layer{i}", 1024, 64) for i in range(12)], _per_gpu(16, CLUSTER_GPUS), "cluster"
    ),
    "candle": _model("candle", _candle(16, 8, 16384), _per_gpu(256, CLUSTER_GPUS), "cluster"),
    "vgg16": _model("vgg16", _vgg16, _per_gpu(128, CLUSTER_GPUS), "cluster"),
    "resnet50": _model("resnet50", _resnet50, _per_gpu(128, CLUSTER_GPUS), "cluster"),
    "ncf": _model(
        "ncf",
        lambda: [_dense(f"mlp{i}", 4096, 4096) for i in range(8)],
        _per_gpu(128, CLUSTER_GPUS),
        "cluster",
        tables=(32, 1_000_000, 128),
        consumer=0,
    ),
    "candle-testbed": _model("candle-testbed", _candle(8, 4, 4096), lambda servers: 120, "testbed"),
    "bert-testbed": _model(
        "bert-testbed", lambda: [_transformer(f"layer{i}", 1024, 64) for i in range(6)], lambda servers: 24, "testbed"
    ),
    "resnet50-testbed": _model("resnet50-testbed", _resnet50, _per_gpu(128, TESTBED_GPUS), "testbed"),
    "vgg16-testbed": _model("vgg16-testbed", _vgg16, _per_gpu(128, TESTBED_GPUS), "testbed"),
}

#: The shipped files: (model, servers, degree, bandwidth Gbps) - TopoOpt's 128-server runs at 100 Gbps
#: with degrees 4 and 8 (and 6 for DLRM, as in its scripts), and the 12-server testbed at 4 x 25 Gbps.
ZOO: tuple[tuple[str, int, int, float], ...] = tuple(
    [(m, 128, d, 100) for m in ("dlrm", "bert", "candle", "vgg16", "resnet50", "ncf") for d in (4, 8)]
    + [("dlrm", 128, 6, 100)]
    + [(m, 12, 4, 25) for m in ("candle-testbed", "bert-testbed", "resnet50-testbed", "vgg16-testbed")]
)


def generate(model: str, servers: int, degree: int, bandwidth_gbps: float, batch: int | None = None) -> dict:
    """A workload-mode instance dict for a zoo model.

    Parameters
    ----------
    model : str
        A key of :data:`MODELS` (case-insensitive; ``_`` and ``-`` alike).
    servers, degree : int
        Cluster size and interfaces per server.
    bandwidth_gbps : float
        Bandwidth of one interface.
    batch : int, optional
        Global batch (samples per iteration); default per model (module docstring).

    Raises
    ------
    ValueError
        Unknown model, a bad cluster (e.g. odd servers x degree), a bad batch, or a model that cannot be
        placed on that many servers (memory).
    """
    key = str(model).lower().replace("_", "-")
    if key not in MODELS:
        raise ValueError(f"unknown model {model!r}; choose one of {', '.join(MODELS)}")
    for label, value in (("servers", servers), ("degree", degree)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{label} must be an integer, got {value!r}")
    if not 2 <= servers <= MAX_SERVERS:
        raise ValueError(f"servers must be between 2 and {MAX_SERVERS}, got {servers}")
    if batch is not None and (isinstance(batch, bool) or not isinstance(batch, int) or batch < 1):
        raise ValueError(f"batch must be a positive integer, got {batch!r}")
    if degree >= 1 and servers * degree % 2:  # the zoo writes regular undirected clusters, which then cannot exist
        raise ValueError(
            f"servers x degree = {servers * degree} is odd: no {degree}-regular undirected topology on "
            f"{servers} servers; change one of them (a written file may then be edited for "
            "regular: false or directed links)"
        )
    try:
        Cluster(servers=servers, degree=degree, link_bandwidth_gbps=bandwidth_gbps, hop_latency_us=1.0)
    except InstanceError as exc:
        raise ValueError(str(exc)) from None
    return MODELS[key](servers, degree, bandwidth_gbps, batch)


def zoo_filename(model: str, servers: int, degree: int) -> str:
    """``dlrm-128-d4.json``, ``candle-testbed-12-d4.json``, ..."""
    return f"{model}-{servers}-d{degree}.json"


def dumps(data: dict) -> str:
    """Compact, readable JSON: top-level sections indented, one layer or block per line."""

    def block(value: Any, indent: str) -> str:
        if isinstance(value, dict) and indent.count(" ") < 2:
            inner = indent + " "
            items = [f"{inner}{json.dumps(k)}: {block(v, inner)}" for k, v in value.items()]
            return "{\n" + ",\n".join(items) + "\n" + indent + "}"
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            inner = indent + " "
            return "[\n" + ",\n".join(inner + json.dumps(v) for v in value) + "\n" + indent + "]"
        return json.dumps(value)

    return block(data, "") + "\n"


def write_zoo(directory: str | os.PathLike = "instances/paper") -> list[Path]:
    """Write every :data:`ZOO` instance into ``directory`` (created if missing); return the paths.

    Each file is written to a temporary name and renamed, so a failure leaves no partial file.
    """
    out_dir = Path(directory)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for model, servers, degree, bw in ZOO:
        path = out_dir / zoo_filename(model, servers, degree)
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(dumps(generate(model, servers, degree, bw)))
        os.replace(tmp, path)
        paths.append(path)
    return paths


if __name__ == "__main__":  # python -m topoopt_ilp.files.zoo [DIRECTORY]
    import sys

    for p in write_zoo(sys.argv[1] if len(sys.argv) > 1 else "instances/paper"):
        print(p)
