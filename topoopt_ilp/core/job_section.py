"""An instance's ``job`` section: a parallel-training job (docs/guide/llm-jobs.md, **Job instances**)
compiled into what the design methods and the evaluator consume.

A :class:`JobSpec` names the model (a zoo name or an inline :class:`~topoopt_ilp.jobs.model.TransformerModel`),
how it trains and its parallelisation (``tp x pp x dp (x ep)`` and the micro-batch size, or
``"search"``). :func:`compile_job` turns it, on a cluster of ``n`` servers of ``g`` accelerators,
into a :class:`CompiledJob`:

* **server numbering.** When every server holds ranks of one pipeline stage only
  (``g | tp dp``), the server holding local index ``q`` of stage ``p`` (``n / pp`` servers a stage,
  in Megatron's rank order, :mod:`topoopt_ilp.jobs.job`) is instance server ``p + pp q``. A DP group
  of stage ``p`` then sits on a coset ``{c + (n / k) i}`` of ``Z_n`` (k its servers), so
  TotientPerms rings serve it, and consecutive stages are one jump apart. Otherwise servers keep
  their rank order (``rank // g``). ``server_map`` replaces that numbering by any permutation
  (``server_map[s]``: the instance server of the server holding ranks ``g s .. g s + g - 1``): the
  rank-to-server mapping a design method chose (``methods/job_alternating.py``).
* **AllReduce groups.** Each DP and expert-DP group of ranks, seen from the servers: the ranks of a
  server are consecutive on the ring, so the ring crosses between servers once per server it
  visits, and each crossing carries the member's bytes ``b`` (``dp_member_bytes``). That is the
  ring of an AllReduce over the group's ``k >= 2`` servers of size ``S = b k / (2 (k - 1))``
  (each member sends ``2 (k-1)/k S = b``); ZeRO's ReduceScatter + AllGather pair is the same ring
  with its own ``b``. Groups on the same servers are one group (their ``S`` add up: the rings may
  split between them as NCCL's channels do).
* **MP traffic.** The TP, PP and EP bytes between servers (``IterationProfile.inter_server``),
  renumbered, as ``(src, dst, bytes)`` pairs.
* **fixed terms** (seconds per iteration, off the designed network): ``compute_s`` (the slowest
  stage), ``bubble_s`` (1F1B: ``compute_s (pp - 1) / m``), and ``scale_up_s = max_s U_s / (g B_up)``
  with ``U_s`` the bytes that stay inside server ``s`` (every kind) and ``B_up`` the scale-up
  bandwidth per accelerator: the server's fabric, fully used (the groups' rings spread these bytes
  over the server's accelerators).

* **expert load.** ``expert_load`` (a tuple of :class:`GivenLoad` and :class:`ZipfLoad` entries)
  lists scenarios of tokens routed from each EP rank to each expert; ``expert_scenario`` picks the
  one compiled (an index) or ``"mean"``, the element-wise mean of the scenarios' routing shares.
  The EP bytes then follow :mod:`topoopt_ilp.jobs.expert_load` instead of uniform routing (the
  ranking of ``parallelism: "search"`` stays uniform). Without it, routing is uniform.

``parallelism: "search"`` takes every parallelisation that fits ``memory_gb``
(:func:`~topoopt_ilp.jobs.enumerate.feasible_parallelisations`, TP inside a server) and keeps the
one with the least ``compute_s + bubble_s + scale_up_s + T_net``, where ``T_net = max_s max(out_s,
in_s) / (d B)`` is the time the busiest server's inter-server bytes take through its ``d``
interfaces: a lower bound of the communication time on any topology of the cluster. Ties keep the
first in the enumeration's order.
"""

from __future__ import annotations

import functools
from dataclasses import MISSING, dataclass, fields
from typing import Any

import numpy as np

from topoopt_ilp.core.checks import as_bool, as_choice, as_int, as_matrix, as_number, as_str, brief
from topoopt_ilp.errors import InputError, InstanceError
from topoopt_ilp.jobs.enumerate import feasible_parallelisations, peak_memory
from topoopt_ilp.jobs.expert_load import ep_load_traffic, routing_shares, zipf_scenarios
from topoopt_ilp.jobs.iteration import dp_member_bytes, profile
from topoopt_ilp.jobs.job import Parallelism, ParallelJob, Training
from topoopt_ilp.jobs.model import MLA, MoE, TransformerModel
from topoopt_ilp.jobs.zoo import LLM_ZOO

__all__ = [
    "JOB_OVERLAPS",
    "DEFAULT_MEMORY_GB",
    "JobSpec",
    "GivenLoad",
    "ZipfLoad",
    "MAX_SCENARIOS",
    "scenario_count",
    "scenario_shares",
    "CompiledJob",
    "compile_job",
    "server_numbering",
    "ranked_parallelisations",
    "forget_rankings",
    "model_fields",
    "model_from_fields",
]

#: ``none``: iteration = fixed terms + communication; ``full``: the larger of the two.
JOB_OVERLAPS = ("none", "full")
#: HBM of one H100 SXM (datasheet: 80 GB).
DEFAULT_MEMORY_GB = 80.0
MAX_DIMENSION = 10**7  # hidden sizes, vocabularies, heads: far beyond any model, and products stay exact
MAX_LAYERS = 10**5  # a profile sums over the layers in Python: a hostile 10^7 would take minutes
MAX_DEGREE = 10**6
MAX_BATCH = 10**9
MAX_SERVER_ID = 10**7

#: An inline model's fields, with the check of each (the zoo's models use the same dataclass).
_MODEL_INTS = ("layers", "hidden", "ffn", "heads", "vocab", "seq_len")
_MODEL_OPTIONAL_INTS = ("kv_heads", "head_dim")
_MODEL_FLAGS = ("gated_ffn", "bias", "learned_positions", "tied_embeddings")
_MOE_INTS = ("experts", "top_k", "expert_ffn", "shared_experts", "first_dense_layers", "layer_step")
_MLA_INTS = ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
_PARALLEL_INTS = ("tp", "pp", "dp", "ep", "micro_batch")
#: Scenarios an expert-load section may list (each one compiles the job's EP traffic once).
MAX_SCENARIOS = 1000
MAX_ZIPF = 10.0  # p_j ~ j^-10: all but the first expert already below 0.1 %


def model_fields() -> dict[str, tuple[str, ...]]:
    """The keys of an inline model, its ``moe`` and its ``mla`` (for the file reader)."""
    return {
        "model": ("name", *_MODEL_INTS, *_MODEL_OPTIONAL_INTS, *_MODEL_FLAGS, "moe", "mla"),
        "moe": _MOE_INTS,
        "mla": _MLA_INTS,
    }


def _high(name: str) -> int:
    return MAX_LAYERS if name in ("layers", "first_dense_layers", "layer_step") else MAX_DIMENSION


def _check_model_values(value: Any) -> None:
    """The ranges of a model's numbers, as instance fields (``job.model.layers``): ``value`` a
    TransformerModel or the dict of an inline model (checked before the model's own checks, which
    would echo a 400-digit integer)."""

    def get(obj: Any, name: str) -> Any:
        return obj.get(name) if isinstance(obj, dict) else getattr(obj, name)

    as_str(get(value, "name"), "job.model.name")
    for name in (*_MODEL_INTS, *_MODEL_OPTIONAL_INTS):
        if name in _MODEL_INTS or get(value, name) is not None:
            as_int(get(value, name), f"job.model.{name}", low=1, high=_high(name))
    for name in _MODEL_FLAGS:
        if not isinstance(value, dict) or name in value:
            as_bool(get(value, name), f"job.model.{name}")
    for part, names, zero in (
        ("moe", _MOE_INTS, ("shared_experts", "first_dense_layers")),
        ("mla", _MLA_INTS, ("q_lora_rank",)),
    ):
        section = get(value, part)
        for name in names if section is not None else ():
            if not isinstance(section, dict) or name in section:
                low = 0 if name in zero else 1
                as_int(get(section, name), f"job.model.{part}.{name}", low=low, high=_high(name))


def _checked_model(value: Any) -> TransformerModel:
    """A zoo name, or a TransformerModel whose fields pass the instance checks (named ``job.model.*``)."""
    if isinstance(value, str):
        if value not in LLM_ZOO:
            raise InstanceError(f"unknown model {brief(value)}; known: {', '.join(LLM_ZOO)}", field="job.model")
        return LLM_ZOO[value]
    if not isinstance(value, TransformerModel):
        raise InstanceError(f"expected a zoo model name or a model, got {type(value).__name__}", field="job.model")
    _check_model_values(value)
    return value


@dataclass(frozen=True)
class GivenLoad:
    """One expert-load scenario as given: ``matrix`` (``ep x E`` tokens routed from each EP rank to
    each expert, for every MoE layer) or ``layers`` (one such matrix per MoE layer, in layer order)."""

    matrix: Any = None
    layers: Any = None


@dataclass(frozen=True)
class ZipfLoad:
    """``scenarios`` generated scenarios: Zipf popularity of skew ``zipf`` permuted over the experts
    per scenario (:func:`~topoopt_ilp.jobs.expert_load.zipf_scenarios`), from ``seed``."""

    zipf: float
    scenarios: int
    seed: int = 0


def _checked_load(entry: Any, path: str, model: TransformerModel, ep: int | None) -> Any:
    """The entry with its numbers checked (matrices as tuples of floats, so that a spec hashes)."""
    experts = model.moe.experts
    if isinstance(entry, ZipfLoad):
        skew = as_number(entry.zipf, f"{path}.zipf", nonnegative=True, high=MAX_ZIPF)
        count = as_int(entry.scenarios, f"{path}.scenarios", low=1, high=MAX_SCENARIOS)
        return ZipfLoad(skew, count, as_int(entry.seed, f"{path}.seed", low=0, high=2**32 - 1))
    if not isinstance(entry, GivenLoad):
        raise InstanceError(f"expected a given or a Zipf scenario, got {type(entry).__name__}", field=path)
    if (entry.matrix is None) == (entry.layers is None):
        raise InstanceError("give exactly one of 'matrix' and 'layers'", field=path)
    if entry.matrix is not None:
        matrices, names = [entry.matrix], [f"{path}.matrix"]
    else:
        if not isinstance(entry.layers, (list, tuple)) or len(entry.layers) != model.moe_layers:
            got = len(entry.layers) if isinstance(entry.layers, (list, tuple)) else type(entry.layers).__name__
            raise InstanceError(
                f"expected one matrix per MoE layer ({model.moe_layers}), got {got}", field=f"{path}.layers"
            )
        matrices, names = list(entry.layers), [f"{path}.layers[{k}]" for k in range(len(entry.layers))]
    rows = ep
    checked = []
    for matrix, name in zip(matrices, names):
        values = as_matrix(matrix, name, rows=rows, columns=experts)
        rows = len(values)
        if experts % rows:
            raise InstanceError(f"{rows} EP ranks do not divide the {experts} experts", field=name)
        if not any(any(row) for row in values):
            raise InstanceError("routes no tokens (every entry is 0)", field=name)
        checked.append(values)
    return GivenLoad(matrix=checked[0]) if entry.matrix is not None else GivenLoad(layers=tuple(checked))


def scenario_count(spec: JobSpec) -> int:
    """How many scenarios ``spec.expert_load`` lists (a Zipf entry counts its ``scenarios``)."""
    return sum(e.scenarios if isinstance(e, ZipfLoad) else 1 for e in spec.expert_load)


def scenario_shares(spec: JobSpec, job: ParallelJob) -> list[list[np.ndarray]]:
    """Per scenario, the routing shares ``D_l`` (``ep x ep``) of every MoE layer of ``job``'s model
    (:func:`~topoopt_ilp.jobs.expert_load.routing_shares`); raises when a given matrix has other
    than ``ep`` rows (the parallelism a search chose)."""
    model, ep = job.model, job.parallelism.ep
    out = []
    for k, entry in enumerate(spec.expert_load):
        if isinstance(entry, ZipfLoad):
            loads = zipf_scenarios(ep, model.moe.experts, entry.zipf, entry.scenarios, entry.seed)
            out += [[routing_shares(w)] * model.moe_layers for w in loads]
            continue
        layers = [entry.matrix] * model.moe_layers if entry.matrix is not None else list(entry.layers)
        if len(layers[0]) != ep:
            field = f"job.expert_load[{k}].{'matrix' if entry.matrix is not None else 'layers[0]'}"
            raise InstanceError(f"has {len(layers[0])} rows, the job's ep is {ep}", field=field)
        out.append([routing_shares(np.asarray(w)) for w in layers])
    return out


#: What a job section leaves out, :class:`~topoopt_ilp.jobs.job.Training` decides: its defaults.
_TRAINING_DEFAULTS = {f.name: f.default for f in fields(Training) if f.default is not MISSING}


@dataclass(frozen=True, kw_only=True)
class JobSpec:
    """The ``job`` section as data (docs/guide/instance-format.md). ``model``: a zoo name or a
    :class:`TransformerModel`; ``parallelism``: a :class:`Parallelism` or ``"search"``;
    ``device_tflops`` peak dense TFLOP/s of one accelerator, ``efficiency`` the share of it the
    FLOPs run at; ``memory_gb`` memory per accelerator; ``expert_load`` the MoE load scenarios
    (:class:`GivenLoad`, :class:`ZipfLoad`) and ``expert_scenario`` the one compiled (an index) or
    ``"mean"`` (module docstring); ``server_map`` the rank-to-server mapping (None: the default
    numbering, :func:`server_numbering`)."""

    model: Any
    global_batch: int
    parallelism: Any = "search"
    precision_bytes: int = _TRAINING_DEFAULTS["precision_bytes"]
    grad_bytes: int = _TRAINING_DEFAULTS["grad_bytes"]
    optimizer_bytes: int = _TRAINING_DEFAULTS["optimizer_bytes"]
    zero_stage: int = _TRAINING_DEFAULTS["zero_stage"]
    recompute: bool = _TRAINING_DEFAULTS["recompute"]
    flash_attention: bool = _TRAINING_DEFAULTS["flash_attention"]
    device_tflops: float = _TRAINING_DEFAULTS["device_flops"] / 1e12
    efficiency: float = _TRAINING_DEFAULTS["efficiency"]
    memory_gb: float = DEFAULT_MEMORY_GB
    overlap: str = "none"
    expert_load: tuple = ()
    expert_scenario: Any = "mean"
    server_map: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        _checked_model(self.model)
        as_int(self.global_batch, "job.global_batch", low=1, high=MAX_BATCH)
        as_int(self.precision_bytes, "job.precision_bytes", low=1, high=8)
        as_int(self.grad_bytes, "job.grad_bytes", low=1, high=8)
        as_int(self.optimizer_bytes, "job.optimizer_bytes", low=0, high=64)
        as_int(self.zero_stage, "job.zero_stage", low=0, high=3)
        as_bool(self.recompute, "job.recompute")
        as_bool(self.flash_attention, "job.flash_attention")
        as_number(self.device_tflops, "job.device_tflops", positive=True, high=1e8)
        if as_number(self.efficiency, "job.efficiency", positive=True) > 1:
            raise InstanceError(f"must be at most 1, got {self.efficiency:g}", field="job.efficiency")
        as_number(self.memory_gb, "job.memory_gb", positive=True, high=1e9)
        as_choice(self.overlap, "job.overlap", JOB_OVERLAPS)
        if isinstance(self.parallelism, str):
            as_choice(self.parallelism, "job.parallelism", ("search",))
        elif isinstance(self.parallelism, Parallelism):
            for name in _PARALLEL_INTS:
                as_int(getattr(self.parallelism, name), f"job.parallelism.{name}", low=1, high=MAX_DEGREE)
        else:
            raise InstanceError(
                f'expected {{"tp", "pp", "dp", ...}} or "search", got {type(self.parallelism).__name__}',
                field="job.parallelism",
            )
        self._check_expert_load()
        if self.server_map is not None:
            if not isinstance(self.server_map, (list, tuple)):
                raise InstanceError(
                    f"expected a list of server ids, got {type(self.server_map).__name__}", field="job.server_map"
                )
            ids = tuple(
                as_int(v, f"job.server_map[{k}]", low=0, high=MAX_SERVER_ID) for k, v in enumerate(self.server_map)
            )
            object.__setattr__(self, "server_map", ids)

    def _check_expert_load(self) -> None:
        if not isinstance(self.expert_load, (list, tuple)):
            raise InstanceError(
                f"expected a list of scenarios, got {type(self.expert_load).__name__}", field="job.expert_load"
            )
        model = self.transformer
        if self.expert_load and model.moe is None:
            raise InstanceError(f"{model.name} has no experts: drop the expert load", field="job.expert_load")
        ep = self.parallelism.ep if isinstance(self.parallelism, Parallelism) else None
        checked = tuple(_checked_load(e, f"job.expert_load[{k}]", model, ep) for k, e in enumerate(self.expert_load))
        object.__setattr__(self, "expert_load", checked)
        if self.expert_scenario != "mean":
            count = scenario_count(self)
            if not self.expert_load:
                raise InstanceError("names a scenario, the job lists none", field="job.expert_scenario")
            if isinstance(self.expert_scenario, str):
                as_choice(self.expert_scenario, "job.expert_scenario", ("mean",))
            as_int(self.expert_scenario, "job.expert_scenario", low=0, high=count - 1)

    @property
    def transformer(self) -> TransformerModel:
        return _checked_model(self.model)


@dataclass(frozen=True)
class CompiledJob:
    """What a job section means on a cluster (module docstring): the chosen job, its demand as
    AllReduce groups ``(members, bytes)`` and MP pairs ``(src, dst, bytes)`` on instance server ids,
    the fixed terms in seconds per iteration, ``server_of_rank[r]`` the instance server of rank r,
    and ``mp_by_kind`` the MP pairs of each kind (``tp``, ``pp``, ``ep``; ``mp`` is their sum)."""

    job: ParallelJob
    allreduce: tuple[tuple[tuple[int, ...], float], ...]
    mp: tuple[tuple[int, int, float], ...]
    compute_s: float
    bubble_s: float
    scale_up_s: float
    overlap: str
    server_of_rank: tuple[int, ...]
    mp_by_kind: tuple[tuple[str, tuple[tuple[int, int, float], ...]], ...] = ()

    @property
    def fixed_time_s(self) -> float:
        """The iteration's time off the designed network: compute + bubble + scale-up."""
        return self.compute_s + self.bubble_s + self.scale_up_s


def _mapped_numbering(spec: JobSpec, job: ParallelJob) -> np.ndarray:
    """``spec.server_map`` checked against the cluster (a permutation of its servers), or the
    default :func:`server_numbering`."""
    if spec.server_map is None:
        return server_numbering(job)
    n = job.servers
    if len(spec.server_map) != n:
        raise InstanceError(f"has {len(spec.server_map)} entries, the cluster {n} servers", field="job.server_map")
    number = np.asarray(spec.server_map, dtype=np.int64)
    if number.max() >= n or len(np.unique(number)) != n:
        seen = np.zeros(n + 1, dtype=bool)
        for k, v in enumerate(spec.server_map):
            if v >= n or seen[v]:
                reason = f"server {v} is not below {n}" if v >= n else f"server {v} appears twice"
                raise InstanceError(f"{reason}: the map is a permutation of the servers", field=f"job.server_map[{k}]")
            seen[v] = True
    return number


def server_numbering(job: ParallelJob) -> np.ndarray:
    """``number[s]``: the instance server id of the server that holds ranks ``g s .. g s + g - 1``."""
    n, g, par = job.servers, job.training.gpus_per_server, job.parallelism
    physical = np.arange(n)
    if (par.tp * par.dp) % g:  # a server holds ranks of two stages: keep the rank order
        return physical
    per_stage = n // par.pp
    return physical // per_stage + par.pp * (physical % per_stage)


def _training(spec: JobSpec, g: int) -> Training:
    return Training(
        global_batch=spec.global_batch,
        precision_bytes=spec.precision_bytes,
        grad_bytes=spec.grad_bytes,
        optimizer_bytes=spec.optimizer_bytes,
        zero_stage=spec.zero_stage,
        recompute=spec.recompute,
        flash_attention=spec.flash_attention,
        gpus_per_server=g,
        device_flops=float(spec.device_tflops) * 1e12,
        efficiency=float(spec.efficiency),
    )


def _scale_up_s(per_server: np.ndarray, g: int, scale_up_gbps: float | None) -> float:
    peak = float(per_server.max()) if per_server.size else 0.0
    if peak == 0:
        return 0.0
    if scale_up_gbps is None:
        raise InstanceError(
            f"the job moves {peak:.4g} bytes per iteration inside a server of {g} accelerators: "
            "give cluster.scale_up_gbps_per_accelerator",
            field="cluster.scale_up_gbps_per_accelerator",
        )
    return peak / (g * scale_up_gbps * 1e9 / 8.0)


def _network_bound_s(prof, degree: int, link_gbps: float) -> float:
    """``max_s max(out_s, in_s) / (d B)``: the busiest server's inter-server bytes through its ports."""
    m = prof.traffic_matrix()
    busiest = max(float(m.sum(axis=1).max()), float(m.sum(axis=0).max()))
    return busiest / (degree * link_gbps * 1e9 / 8.0)


def _estimate_s(prof, g: int, scale_up_gbps: float | None, degree: int, link_gbps: float) -> float:
    up = sum(prof.scale_up[k] for k in prof.scale_up)
    return (
        prof.compute_s + prof.bubble_s + _scale_up_s(up, g, scale_up_gbps) + _network_bound_s(prof, degree, link_gbps)
    )


def _chosen_job(spec: JobSpec, training: Training, cluster: Any) -> ParallelJob:
    model, n = spec.transformer, cluster.servers
    hbm = float(spec.memory_gb) * 1e9
    if isinstance(spec.parallelism, Parallelism):
        job = _as_instance_error(
            lambda: ParallelJob(model=model, training=training, parallelism=spec.parallelism, servers=n)
        )
        need = peak_memory(job)
        if need > hbm:
            raise InstanceError(
                f"{spec.parallelism} needs {need / 1e9:.4g} GB per accelerator, job.memory_gb is {hbm / 1e9:g}",
                field="job.parallelism",
            )
        return job
    chosen = ranked_parallelisations(spec, cluster)[0][1]
    return ParallelJob(model=model, training=training, parallelism=chosen, servers=n)


def ranked_parallelisations(spec: JobSpec, cluster: Any) -> list[tuple[float, Parallelism]]:
    """Every split of ``spec``'s model that fits ``memory_gb`` on ``cluster``, with its estimate
    (compute + bubble + scale-up + the busiest server's bytes through its d ports: module
    docstring), least first; ties in the enumeration's order. Raises
    NoFeasibleParallelisationError (exit 3) when none fits."""
    return list(_ranked(spec, cluster))


def forget_rankings() -> None:
    """Empty the rankings' cache (a benchmark times each method from a cold start)."""
    _ranked.cache_clear()


@functools.lru_cache(maxsize=8)
def _ranked(spec: JobSpec, cluster: Any) -> tuple[tuple[float, Parallelism], ...]:
    """:func:`ranked_parallelisations`, cached: a search instance compiles with it, and a method that
    designs the best-ranked splits asks for it again (the ranking profiles every split that fits)."""
    training = _as_instance_error(lambda: _training(spec, cluster.accelerators_per_server))
    candidates = feasible_parallelisations(spec.transformer, training, cluster.servers, float(spec.memory_gb) * 1e9)
    g, up = cluster.accelerators_per_server, cluster.scale_up_gbps_per_accelerator
    scored = [
        (_estimate_s(profile(job), g, up, cluster.degree, cluster.link_bandwidth_gbps), k)
        for k, job in enumerate(candidates)
    ]
    return tuple((estimate, candidates[k].parallelism) for estimate, k in sorted(scored))


def _as_instance_error(build):
    """The job package's checks name ``job.tp``; the instance's name ``job.parallelism.tp``."""
    try:
        return build()
    except InstanceError:
        raise
    except InputError as exc:
        name = (exc.field or "job").removeprefix("job.")
        field = f"job.parallelism.{name}" if name in _PARALLEL_INTS else f"job.{name}" if exc.field else "job"
        if name == "model" or name.startswith("model."):
            field = f"job.{name}"
        raise InstanceError(exc.reason, field=field) from None


@functools.lru_cache(maxsize=32)
def compile_job(spec: JobSpec, cluster: Any) -> CompiledJob:
    """The job ``spec`` on ``cluster`` (a :class:`~topoopt_ilp.core.instance.Cluster`), as the
    module docstring says. Cached: an instance re-made with ``dataclasses.replace`` compiles once."""
    g = cluster.accelerators_per_server
    training = _as_instance_error(lambda: _training(spec, g))
    job = _chosen_job(spec, training, cluster)
    prof = profile(job)
    number = _mapped_numbering(spec, job)
    server_of_rank = number[np.arange(job.accelerators) // g]

    per_stage = [dp_member_bytes(job, p) for p in range(job.parallelism.pp)]  # (dense, expert) bytes
    groups: dict[tuple[int, ...], float] = {}
    for kind, which in (("dp", 0), ("expert_dp", 1)):
        for ranks in prof.groups[kind]:
            member_bytes = per_stage[job.stage_of(ranks[0])][which]
            servers = tuple(sorted(set(server_of_rank[list(ranks)].tolist())))
            k = len(servers)
            if k < 2 or member_bytes == 0:
                continue
            groups[servers] = groups.get(servers, 0.0) + member_bytes * k / (2.0 * (k - 1))

    n = job.servers
    inter, inside = dict(prof.inter_server), dict(prof.scale_up)
    if spec.expert_load:
        inter["ep"], inside["ep"] = ep_load_traffic(job, _chosen_shares(spec, job))
    mp = np.zeros((n, n))
    by_kind = []
    for kind in ("tp", "pp", "ep"):
        one = np.zeros((n, n))
        one[np.ix_(number, number)] = inter[kind]
        mp += one
        by_kind.append((kind, _pairs(one)))
    pairs = _pairs(mp)

    up = np.zeros(n)
    for kind in inside:
        up += inside[kind]
    return CompiledJob(
        job=job,
        allreduce=tuple(sorted(groups.items())),
        mp=pairs,
        compute_s=float(prof.compute_s),
        bubble_s=float(prof.bubble_s),
        scale_up_s=_scale_up_s(up, g, cluster.scale_up_gbps_per_accelerator),
        overlap=spec.overlap,
        server_of_rank=tuple(int(s) for s in server_of_rank),
        mp_by_kind=tuple(by_kind),
    )


def _pairs(matrix: np.ndarray) -> tuple[tuple[int, int, float], ...]:
    src, dst = np.nonzero(matrix)
    return tuple((int(a), int(b), float(matrix[a, b])) for a, b in zip(src, dst))


def _chosen_shares(spec: JobSpec, job: ParallelJob) -> list[np.ndarray]:
    """The routing shares per MoE layer of ``spec.expert_scenario`` (the mean of all when ``"mean"``)."""
    every = scenario_shares(spec, job)
    if spec.expert_scenario != "mean":
        return every[spec.expert_scenario]
    return [sum(s[l] for s in every) / len(every) for l in range(len(every[0]))]


def model_from_fields(fields: dict[str, Any]) -> TransformerModel:
    """An inline model from its fields (``moe``, ``mla``: dicts of their fields or absent). The
    model's own checks name the field (``job.model.layers``) after the ranges are checked."""
    _check_model_values(fields)

    def build() -> TransformerModel:
        moe = MoE(**fields["moe"]) if fields.get("moe") is not None else None
        mla = MLA(**fields["mla"]) if fields.get("mla") is not None else None
        return TransformerModel(**{k: v for k, v in fields.items() if k not in ("moe", "mla")}, moe=moe, mla=mla)

    return _as_instance_error(build)
