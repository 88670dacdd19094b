"""The canonical problem instance (docs/guide/instance-format.md) as frozen, validated dataclasses.

An :class:`Instance` is valid as soon as it exists: every dataclass checks its own fields in
``__post_init__`` and the :class:`Instance` checks what needs the whole (member ids against the
number of servers, a fixed topology against the degree). Errors are :class:`InstanceError` with the
field path of the offending value (``demand.allreduce[2].members[5]``), so a file loader only has to
add the file name. Instances are data only: building one executes nothing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np
import scipy.sparse as sp

from topoopt_ilp.core.checks import MAX_BYTES, as_bool, as_choice, as_int, as_number, as_str, type_name
from topoopt_ilp.core.graph import circulant
from topoopt_ilp.core.job_section import CompiledJob, JobSpec, compile_job
from topoopt_ilp.core.solution import Topology
from topoopt_ilp.core.workload import Workload, check_workload
from topoopt_ilp.errors import InstanceError
from topoopt_ilp.jobs.job import Parallelism
from topoopt_ilp.solvers import BACKENDS

__all__ = [
    "Cluster",
    "AllReduceGroup",
    "Demand",
    "FixedTopology",
    "JobSpec",
    "SolverDefaults",
    "CostModel",
    "Instance",
    "OBJECTIVES",
    "FAMILIES",
    "MAX_SERVERS",
    "job_choice",
    "with_job_choice",
]

OBJECTIVES = ("iteration_time", "comm_time", "throughput", "diameter", "aspl")
FAMILIES = ("any", "circulant", "coprime_circulant")
LINK_KINDS = ("undirected", "directed")
DIRECT_FABRICS = ("patch_panel", "ocs")  # what joins the direct-connect interfaces (cost model)
# A design keeps n x n link-count matrices (2 GiB each at this size): a 16,384-server design solves
# and verifies in about 9 GiB (docs/notes/heuristic-scale.md); twice that no longer fits 24 GiB.
MAX_SERVERS = 16384
MAX_DEGREE = 1024
#: Solver threads a file or the command line may ask for (CP-SAT refuses its model above 10,000 workers).
MAX_THREADS = 1024
#: Upper limits of physical quantities: far beyond any real cluster, and low enough that products of
#: them stay finite in float64 (1e308 Gbps made the evaluator's loads overflow into NaN).
MAX_LINK_GBPS = 1e6
MAX_LATENCY_US = 1e9
#: Accelerators one server may hold (a scale-up domain: 8 in an HGX server, 72 in an NVL72 rack).
MAX_ACCELERATORS = 1024

LinkKind = Literal["undirected", "directed"]


def _as_tuple(value: Any, depth: int = 1) -> Any:
    """``value`` as a tuple when code passed a list (or a range, or a NumPy array): the dataclasses
    are frozen, and a list inside one could be mutated afterwards and cannot be hashed. ``depth`` 2
    converts the items too (``[(i, j, c), ...]``). Anything else is left for the checks to refuse."""
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if not isinstance(value, (list, tuple, range)):
        return value
    if depth > 1:
        return tuple(_as_tuple(v, depth - 1) for v in value)
    return tuple(value)


def _normalise(obj: Any, depths: dict[str, int]) -> None:
    for name, depth in depths.items():
        value = getattr(obj, name)
        converted = _as_tuple(value, depth)
        if converted is not value:
            object.__setattr__(obj, name, converted)


# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Cluster:
    """``servers`` servers with ``degree`` interfaces of ``link_bandwidth_gbps`` each.

    A server holds ``accelerators_per_server`` accelerators (g) joined by a scale-up fabric of
    ``scale_up_gbps_per_accelerator`` each (NVLink-class; None: no such fabric). Only a ``job``
    section uses them (its intra-server bytes are charged there); g = 1 without a fabric is a server
    as every other section sees it.

    ``links``: ``undirected`` (a link takes one interface at each end, full duplex) or ``directed``
    (separate TX/RX ports: out- and in-degree ``degree``). ``regular``: every interface must be used.
    ``multi_links``: parallel links between one pair are allowed (TopoOpt's topologies are multigraphs).
    """

    servers: int
    degree: int
    link_bandwidth_gbps: float
    hop_latency_us: float = 1.0
    links: LinkKind = "undirected"
    regular: bool = True
    multi_links: bool = True
    accelerators_per_server: int = 1
    scale_up_gbps_per_accelerator: float | None = None

    def __post_init__(self) -> None:
        n = as_int(self.servers, "cluster.servers", low=2, high=MAX_SERVERS)
        as_int(self.accelerators_per_server, "cluster.accelerators_per_server", low=1, high=MAX_ACCELERATORS)
        if self.scale_up_gbps_per_accelerator is not None:
            as_number(
                self.scale_up_gbps_per_accelerator,
                "cluster.scale_up_gbps_per_accelerator",
                positive=True,
                high=MAX_LINK_GBPS,
            )
        d = as_int(self.degree, "cluster.degree", low=1, high=MAX_DEGREE)
        as_number(self.link_bandwidth_gbps, "cluster.link_bandwidth_gbps", positive=True, high=MAX_LINK_GBPS)
        as_number(self.hop_latency_us, "cluster.hop_latency_us", nonnegative=True, high=MAX_LATENCY_US)
        as_choice(self.links, "cluster.links", LINK_KINDS)
        as_bool(self.regular, "cluster.regular")
        as_bool(self.multi_links, "cluster.multi_links")
        if not self.multi_links and d > n - 1:
            raise InstanceError(
                f"degree {d} needs parallel links on {n} servers (at most {n - 1} distinct neighbours); "
                "set cluster.multi_links to true or lower the degree",
                field="cluster.degree",
            )
        if self.links == "undirected" and self.regular and (n * d) % 2:
            raise InstanceError(
                f"no {d}-regular undirected topology on {n} servers exists (servers*degree = {n * d} is odd); "
                "set cluster.regular to false, use directed links, or change the degree",
                field="cluster.degree",
            )

    @property
    def directed(self) -> bool:
        return self.links == "directed"

    @property
    def link_bytes_per_s(self) -> float:
        """Capacity of one link in one direction, bytes per second."""
        return self.link_bandwidth_gbps * 1e9 / 8.0

    @property
    def hop_latency_s(self) -> float:
        return self.hop_latency_us * 1e-6


@dataclass(frozen=True)
class AllReduceGroup:
    """A ring AllReduce of ``bytes`` bytes per member over ``members`` (server ids)."""

    members: tuple[int, ...]
    bytes: float

    def __post_init__(self) -> None:
        # Values are checked by the Demand (which knows the group's index and the number of servers).
        _normalise(self, {"members": 1})

    @property
    def size(self) -> int:
        return len(self.members)

    def bytes_per_member(self) -> float:
        """Bytes each member sends to its ring successor: 2(k-1)/k * S (docs/guide/evaluator.md)."""
        k = self.size
        return 2.0 * (k - 1) / k * self.bytes


@dataclass(frozen=True)
class Demand:
    """Traffic of one training iteration: AllReduce groups plus model-parallel bytes.

    ``mp`` lists ``(src, dst, bytes)``; repeated pairs add up. ``all_to_all`` adds that many bytes
    for every ordered pair of distinct servers.
    """

    allreduce: tuple[AllReduceGroup, ...] = ()
    mp: tuple[tuple[int, int, float], ...] = ()
    all_to_all: float = 0.0

    def __post_init__(self) -> None:
        _normalise(self, {"allreduce": 1, "mp": 2})  # values are checked by the Instance

    def mp_matrix(self, n: int) -> np.ndarray:
        """The model-parallel traffic (including ``all_to_all``) as a dense n x n byte matrix."""
        m = np.zeros((n, n))
        if self.mp:
            arr = np.asarray(self.mp, dtype=float)
            flat = arr[:, 0].astype(np.int64) * n + arr[:, 1].astype(np.int64)
            np.add.at(m.reshape(-1), flat, arr[:, 2])  # flat: np.add.at with a pair of index arrays is slower
        if self.all_to_all:
            m += self.all_to_all
            np.fill_diagonal(m, 0.0)
        return m

    def mp_pairs_matrix(self, n: int) -> sp.csr_matrix:
        """The model-parallel pairs alone (not ``all_to_all``) as a sparse n x n byte matrix, a pair
        listed twice summed: what a large instance's design reads without an n x n array."""
        arr = np.asarray(self.mp, dtype=float).reshape(-1, 3)
        matrix = sp.coo_matrix((arr[:, 2], (arr[:, 0].astype(np.int64), arr[:, 1].astype(np.int64))), shape=(n, n))
        return matrix.tocsr()

    @property
    def is_empty(self) -> bool:
        return not self.allreduce and not self.mp and not self.all_to_all


@dataclass(frozen=True)
class FixedTopology:
    """A given topology: explicit ``links`` ``(i, j, count)`` or a circulant jump set ``jumps``.
    ``rates``: beside ``links``, each link's own ``(gbps, latency_us)`` (None in either place, or no
    ``rates``: the cluster's ``link_bandwidth_gbps``, ``hop_latency_us``); collective schedules
    honour them (docs/guide/collectives.md), the design methods use the cluster's."""

    links: tuple[tuple[int, int, int], ...] | None = None
    jumps: tuple[int, ...] | None = None
    rates: tuple[tuple[float | None, float | None], ...] | None = None

    def __post_init__(self) -> None:
        _normalise(self, {"links": 2, "jumps": 1, "rates": 2})  # values are checked by the Instance

    def arc_rates(self, cluster: Cluster) -> tuple[tuple[int, int, float, float], ...]:
        """``(u, v, alpha_s, bandwidth_Bps)`` of every direction whose link has its own rate (both
        directions of an undirected link), for :class:`topoopt_ilp.core.collective.LinkModel`."""
        if self.rates is None or self.links is None:
            return ()
        out = {}
        for (i, j, _count), (gbps, latency_us) in zip(self.links, self.rates):
            if gbps is None and latency_us is None:
                continue
            alpha = (cluster.hop_latency_us if latency_us is None else latency_us) * 1e-6
            bandwidth = (cluster.link_bandwidth_gbps if gbps is None else gbps) * 1e9 / 8.0
            for u, v in ((i, j),) if cluster.directed else ((i, j), (j, i)):
                out[(int(u), int(v))] = (alpha, bandwidth)
        return tuple((u, v, a, b) for (u, v), (a, b) in sorted(out.items()))


@dataclass(frozen=True)
class SolverDefaults:
    """Defaults for ``topoopt solve`` taken from the instance; command-line options override them."""

    backend: str | None = None
    time_limit_s: float | None = None
    gap: float | None = None
    threads: int | None = None


PriceTable = tuple[tuple[float, float], ...]  # (port rate in Gbps, USD per port), rates increasing


@dataclass(frozen=True)
class CostModel:
    """Per-port prices the instance sets for the cost model (``topoopt_ilp.evaluation.cost``); None keeps the
    documented default. Rate-dependent prices are tables ``((rate_gbps, usd), ...)`` with increasing
    rates and non-decreasing prices: a faster port never costs less, which keeps "equal cost" unique."""

    transceiver_usd: PriceTable | None = None
    nic_port_usd: PriceTable | None = None
    switch_port_usd: PriceTable | None = None
    patch_panel_port_usd: float | None = None
    ocs_port_usd: float | None = None
    fabric: str | None = None  # patch_panel | ocs

    def __post_init__(self) -> None:
        _normalise(self, {"transceiver_usd": 2, "nic_port_usd": 2, "switch_port_usd": 2})


@dataclass(frozen=True)
class Instance:
    """One problem: a cluster, its demand (or workload, or job), the objective and the topology family.

    A ``job`` (:class:`JobSpec`) is compiled on the cluster (:mod:`topoopt_ilp.core.job_section`):
    ``demand`` becomes its inter-server traffic and ``compiled_job`` holds the job and its fixed
    time terms, so every method designs for the demand as for any other, and the evaluator adds the
    fixed terms to the iteration time."""

    cluster: Cluster
    demand: Demand | None = None
    workload: Any = None  # a topoopt_ilp.core.workload.Workload
    objective: str = "iteration_time"
    topology_family: str = "any"
    fixed_topology: FixedTopology | None = None
    solver: SolverDefaults = field(default_factory=SolverDefaults)
    name: str = ""
    description: str = ""
    cost: CostModel | None = None
    job: JobSpec | None = None
    compiled_job: CompiledJob | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.cluster, Cluster):
            raise InstanceError(f"expected a Cluster, got {type(self.cluster).__name__}", field="cluster")
        if self.job is not None:
            self._compile_job()
        for name, kind in (("demand", Demand), ("fixed_topology", FixedTopology)):
            value = getattr(self, name)
            if value is not None and not isinstance(value, kind):
                raise InstanceError(f"expected a {kind.__name__} or None, got {type(value).__name__}", field=name)
        if not isinstance(self.solver, SolverDefaults):
            raise InstanceError(f"expected a SolverDefaults, got {type(self.solver).__name__}", field="solver")
        if self.cost is not None and not isinstance(self.cost, CostModel):
            raise InstanceError(f"expected a CostModel or None, got {type(self.cost).__name__}", field="cost")
        as_str(self.name, "name")  # as the file parser does: save_instance writes them, load_instance reads them back
        as_str(self.description, "description")
        as_choice(self.objective, "objective", OBJECTIVES)
        as_choice(self.topology_family, "topology_family", FAMILIES)
        if (self.demand is None) == (self.workload is None):
            raise InstanceError(
                "an instance needs exactly one of 'demand', 'workload' and 'job'"
                + (" (it has demand and workload)" if self.demand is not None else " (it has none)")
            )
        if self.workload is not None:
            if not isinstance(self.workload, Workload):
                raise InstanceError(
                    f"expected a Workload or None, got {type(self.workload).__name__}", field="workload"
                )
            check_workload(self.workload, self.cluster.servers)
        if self.demand is not None:
            _check_demand(self.demand, self.cluster.servers)
        if self.fixed_topology is not None:
            _check_fixed_topology(self.fixed_topology, self.cluster, self.topology_family)
        elif self.topology_family != "any" and self.cluster.regular:
            _check_family_degree(self.cluster, self.topology_family)
        _check_solver(self.solver)
        if self.cost is not None:
            _check_cost(self.cost)

    def _compile_job(self) -> None:
        """``demand`` from the job (a demand given with it must be that one: ``dataclasses.replace``)."""
        if not isinstance(self.job, JobSpec):
            raise InstanceError(f"expected a JobSpec or None, got {type(self.job).__name__}", field="job")
        if self.workload is not None:
            raise InstanceError("an instance needs exactly one of 'demand', 'workload' and 'job' (it has two)")
        compiled = compile_job(self.job, self.cluster)
        demand = Demand(allreduce=tuple(AllReduceGroup(m, b) for m, b in compiled.allreduce), mp=compiled.mp)
        if demand.is_empty:
            raise InstanceError(
                f"{compiled.job.parallelism} moves no bytes between servers: nothing to design", field="job"
            )
        if self.demand is not None and self.demand != demand:
            raise InstanceError("an instance needs exactly one of 'demand', 'workload' and 'job' (it has two)")
        object.__setattr__(self, "demand", demand)
        object.__setattr__(self, "compiled_job", compiled)

    # Convenience views -------------------------------------------------------------------------
    @property
    def n(self) -> int:
        return self.cluster.servers

    @property
    def d(self) -> int:
        return self.cluster.degree

    def fixed_topology_matrix(self) -> np.ndarray | None:
        """The fixed topology as an n x n link-count matrix, or None when the instance has none."""
        if self.fixed_topology is None:
            return None
        return _fixed_matrix(self.fixed_topology, self.cluster)


# ----------------------------------------------------------------------------------------------
def degree_one_problem(demand: Demand, cluster: Cluster) -> str | None:
    """Why no direct-connect topology carries ``demand``, or None: undirected links at degree 1 join
    servers in pairs, so a demand that connects three or more servers (all-to-all, an AllReduce
    group, a chain of MP pairs) cannot be carried. (A valid instance all the same: a switched
    network with one port per server, ``topoopt evaluate --architecture``, carries it.)"""
    n = cluster.servers
    if cluster.directed or cluster.degree != 1 or n <= 2:
        return None
    why = None
    if demand.all_to_all:
        why = f"all-to-all traffic connects all {n} servers"
    else:
        big = next((g for g, grp in enumerate(demand.allreduce) if len(grp.members) > 2), None)
        if big is not None:
            why = f"AllReduce group {big} connects {len(demand.allreduce[big].members)} servers"
        else:  # AllReduce groups of two and MP pairs: the components of the pairs they join
            from scipy.sparse import coo_matrix
            from scipy.sparse.csgraph import connected_components

            pairs = [(int(g.members[0]), int(g.members[1])) for g in demand.allreduce] + [
                (int(a), int(b)) for a, b, _ in demand.mp
            ]
            rows, cols = (list(x) for x in zip(*pairs)) if pairs else ([], [])
            labels = connected_components(coo_matrix(([1] * len(rows), (rows, cols)), shape=(n, n)), directed=False)[1]
            sizes = np.bincount(labels)
            if sizes.max() > 2:
                why = f"the demand's pairs chain {int(sizes.max())} servers together"
    if why:
        return (
            f"degree 1 with undirected links joins servers in pairs, but {why}: no topology carries it "
            f"(use degree >= 2 or directed links)"
        )
    return None


def degree_one_refusal(instance: Instance) -> str | None:
    """Why the design methods refuse ``instance`` at undirected degree 1 (links join servers in
    pairs), or None: a demand that connects three or more servers (:func:`degree_one_problem`), or a
    workload on more than two servers (every method starts from, or passes through, a data-parallel
    placement over all of them). A fixed topology has nothing to design: None."""
    c = instance.cluster
    if instance.fixed_topology is not None or c.directed or c.degree != 1:
        return None
    if instance.demand is not None:
        return degree_one_problem(instance.demand, c)
    if instance.workload is not None and c.servers > 2:
        return (
            f"degree 1 with undirected links joins servers in pairs; the workload methods place layers across "
            f"all {c.servers} servers, which no such topology connects (use degree >= 2 or directed links)"
        )
    return None


def _check_demand(demand: Demand, n: int) -> None:
    for name in ("allreduce", "mp"):
        value = getattr(demand, name)
        if not isinstance(value, tuple):
            raise InstanceError(f"expected a list, got {type_name(value)}", field=f"demand.{name}")
    for g, group in enumerate(demand.allreduce):
        path = f"demand.allreduce[{g}]"
        if not isinstance(group, AllReduceGroup):
            raise InstanceError(f"expected an AllReduceGroup, got {type(group).__name__}", field=path)
        as_number(group.bytes, f"{path}.bytes", positive=True, high=MAX_BYTES)
        if not isinstance(group.members, tuple):
            raise InstanceError(
                f"expected a list of server ids, got {type_name(group.members)}", field=f"{path}.members"
            )
        if len(group.members) < 2:
            raise InstanceError(
                f"an AllReduce needs at least 2 members, got {len(group.members)}", field=f"{path}.members"
            )
        seen: set[int] = set()
        for m, member in enumerate(group.members):
            mpath = f"{path}.members[{m}]"
            v = as_int(member, mpath, low=0, high=n - 1)
            if v in seen:
                raise InstanceError(f"server {v} is listed twice", field=mpath)
            seen.add(v)
    for p, pair in enumerate(demand.mp):
        path = f"demand.mp.pairs[{p}]"
        if not isinstance(pair, tuple) or len(pair) != 3:
            raise InstanceError("expected [src, dst, bytes]", field=path)
        s = as_int(pair[0], f"{path}[0]", low=0, high=n - 1)
        t = as_int(pair[1], f"{path}[1]", low=0, high=n - 1)
        if s == t:
            raise InstanceError(f"source and destination are both server {s}", field=path)
        as_number(pair[2], f"{path}[2]", positive=True, high=MAX_BYTES)
    as_number(demand.all_to_all, "demand.all_to_all", nonnegative=True, high=MAX_BYTES)
    if demand.is_empty:
        raise InstanceError("the demand is empty: give allreduce groups, mp traffic or all_to_all", field="demand")


def _check_family_degree(c: Cluster, family: str) -> None:
    """A regular topology of a circulant family uses every port: some set of distinct jumps must
    take exactly d ports (undirected: a jump j != n/2 takes 2, n/2 takes 1; directed: 1 each)."""
    n, d = c.servers, c.degree
    top = n if c.directed else n // 2 + 1
    jumps = [j for j in range(1, top) if family == "circulant" or math.gcd(j, n) == 1]
    if c.directed:
        if d <= len(jumps):
            return
        why = f"the family has only {len(jumps)} jump(s)"
    else:
        half = any(2 * j == n for j in jumps)
        twos = len(jumps) - half
        if (d % 2 == 0 and d // 2 <= twos) or (d % 2 == 1 and half and (d - 1) // 2 <= twos):
            return
        if d % 2 == 1 and not half:
            why = "an odd degree needs the jump n/2, which " + (
                "does not exist for odd n" if n % 2 else f"is not coprime with n = {n}"
            )
        else:
            why = f"the family has only {len(jumps)} jump class(es) ({2 * twos + half} ports)"
    raise InstanceError(
        f"no {family} jump set on {n} servers has degree exactly {d}: {why}; "
        "use topology_family any or change the degree",
        field="cluster.degree",
    )


def _check_fixed_topology(fixed: FixedTopology, cluster: Cluster, family: str) -> None:
    if (fixed.links is None) == (fixed.jumps is None):
        raise InstanceError("give exactly one of 'links' and 'jumps'", field="fixed_topology")
    n = cluster.servers
    for name in ("links", "jumps"):
        value = getattr(fixed, name)
        if value is not None and not isinstance(value, tuple):
            raise InstanceError(f"expected a list, got {type_name(value)}", field=f"fixed_topology.{name}")
    if fixed.jumps is not None:
        seen: set[int] = set()
        for k, j in enumerate(fixed.jumps):
            path = f"fixed_topology.jumps[{k}]"
            j = as_int(j, path, low=1, high=n - 1)
            key = j if cluster.directed else min(j, n - j)
            if key in seen:
                raise InstanceError(
                    f"jump {j} repeats an earlier jump"
                    + ("" if cluster.directed else f" (jumps {j} and {n - j} are the same undirected jump)"),
                    field=path,
                )
            seen.add(key)
            if family == "coprime_circulant" and math.gcd(j, n) != 1:
                raise InstanceError(
                    f"jump {j} is not coprime with {n} servers (topology_family is coprime_circulant)", field=path
                )
    else:
        if family != "any":
            raise InstanceError(f"topology_family {family} needs 'jumps', not 'links'", field="fixed_topology")
        for k, link in enumerate(fixed.links):
            path = f"fixed_topology.links[{k}]"
            if not isinstance(link, tuple) or len(link) != 3:
                raise InstanceError("expected [i, j, count]", field=path)
            i = as_int(link[0], f"{path}[0]", low=0, high=n - 1)
            j = as_int(link[1], f"{path}[1]", low=0, high=n - 1)
            as_int(link[2], f"{path}[2]", low=1, high=MAX_DEGREE)
            if i == j:
                raise InstanceError(f"a link from server {i} to itself", field=path)
        _check_link_rates(fixed, cluster)
    if fixed.jumps is not None and fixed.rates is not None:
        raise InstanceError("rates go with 'links', not 'jumps'", field="fixed_topology")
    _check_fixed_degrees(fixed, cluster)


def _check_link_rates(fixed: FixedTopology, cluster: Cluster) -> None:
    """Each link's own (gbps, latency_us), and one rate per pair: parallel links share it."""
    if fixed.rates is None:
        return
    if not isinstance(fixed.rates, tuple) or len(fixed.rates) != len(fixed.links):
        raise InstanceError("expected one (gbps, latency_us) per link", field="fixed_topology.rates")
    seen: dict[tuple[int, int], tuple[float | None, float | None]] = {}
    for k, (link, rate) in enumerate(zip(fixed.links, fixed.rates)):
        path = f"fixed_topology.links[{k}]"
        if not isinstance(rate, tuple) or len(rate) != 2:
            raise InstanceError("expected (gbps, latency_us)", field=path)
        gbps, latency = rate
        if gbps is not None:
            as_number(gbps, f"{path}[3]", positive=True, high=MAX_LINK_GBPS)
        if latency is not None:
            as_number(latency, f"{path}[4]", nonnegative=True, high=MAX_LATENCY_US)
        pair = (int(link[0]), int(link[1]))
        if not cluster.directed:
            pair = (min(pair), max(pair))
        if seen.setdefault(pair, rate) != rate:
            raise InstanceError(
                f"the links between {pair[0]} and {pair[1]} have different rates: parallel links share one",
                field=path,
            )


def _fixed_matrix(fixed: FixedTopology, cluster: Cluster) -> np.ndarray:
    """Called only after the jumps or links were checked (no repeated jumps, ids in range)."""
    if fixed.jumps is not None:
        return circulant(cluster.servers, fixed.jumps, cluster.directed)
    return Topology.from_links(cluster.servers, fixed.links, cluster.directed).matrix.copy()


def _check_fixed_degrees(fixed: FixedTopology, cluster: Cluster) -> None:
    """:func:`_check_degrees` of the fixed topology without its dense n x n matrix (an instance may
    have 8192 servers: the matrix would be 512 MB, built for a check that needs only the links)."""
    n = cluster.servers
    if fixed.jumps is not None:
        # Every server has the same degree; checked jumps never repeat, so no pair has 2 links.
        per = sum(1 if cluster.directed or 2 * int(j) == n else 2 for j in fixed.jumps)
        used = np.full(n, per, dtype=np.int64)
        _check_degrees(used, used, cluster, "fixed_topology")
        return
    arr = np.array([[int(v) for v in link] for link in fixed.links], dtype=np.int64).reshape(-1, 3)
    tail, head, count = arr[:, 0], arr[:, 1], arr[:, 2]
    if not cluster.directed:  # both directions, as in the matrix
        tail, head, count = np.concatenate([tail, head]), np.concatenate([head, tail]), np.concatenate([count, count])
    out = np.bincount(tail, weights=count, minlength=n).astype(np.int64)
    into = np.bincount(head, weights=count, minlength=n).astype(np.int64)
    keys, inverse = np.unique(tail * n + head, return_inverse=True)
    per_pair = np.bincount(inverse.ravel(), weights=count, minlength=keys.size).astype(np.int64)
    _check_degrees(out, into, cluster, "fixed_topology", keys=keys, per_pair=per_pair)


def _check_degrees(
    out: np.ndarray,
    into: np.ndarray,
    cluster: Cluster,
    path: str,
    *,
    keys: np.ndarray | None = None,
    per_pair: np.ndarray | None = None,
) -> None:
    """Ports used per server against the degree: out-degree always, in-degree for directed links;
    then (``keys``: the pairs ``i * n + j`` with links, sorted; ``per_pair``: their link counts)
    parallel links against ``cluster.multi_links``."""
    d = cluster.degree
    sums = [("out", out)] + ([("in", into)] if cluster.directed else [])
    for kind, used in sums:
        label = f"{kind}-degree " if cluster.directed else ""
        bad = np.flatnonzero(used > d) if not cluster.regular else np.flatnonzero(used != d)
        if bad.size:
            v = int(bad[0])
            rule = f"at most {d}" if not cluster.regular else f"exactly {d} (cluster.regular)"
            raise InstanceError(f"server {v} has {label}{int(used[v])} links, needs {rule}", field=path)
    if not cluster.multi_links and per_pair is not None and keys is not None and (per_pair > 1).any():
        first = int(np.flatnonzero(per_pair > 1)[0])  # the first in row-major order, as np.argwhere gives
        i, j = divmod(int(keys[first]), cluster.servers)
        raise InstanceError(
            f"{int(per_pair[first])} parallel links between {i} and {j} but cluster.multi_links is false", field=path
        )


def _check_solver(solver: SolverDefaults) -> None:
    if solver.backend is not None:
        # Known names, whether or not installed (an unavailable backend fails when it solves).

        as_choice(solver.backend, "solver.backend", tuple(sorted(BACKENDS)))
    if solver.time_limit_s is not None:
        as_number(solver.time_limit_s, "solver.time_limit_s", nonnegative=True)
    if solver.gap is not None:
        as_number(solver.gap, "solver.gap", nonnegative=True)
    if solver.threads is not None:
        as_int(solver.threads, "solver.threads", low=1, high=MAX_THREADS)


def _check_price_table(table: Any, path: str) -> None:
    if not isinstance(table, tuple) or not table:
        raise InstanceError("expected a non-empty table of {rate_gbps: usd}", field=path)
    last_rate, last_usd = 0.0, 0.0
    for k, entry in enumerate(table):
        if not isinstance(entry, tuple) or len(entry) != 2:
            raise InstanceError("expected a (rate_gbps, usd) pair", field=f"{path}[{k}]")
        r = as_number(entry[0], f"{path}[{k}]", positive=True)
        u = as_number(entry[1], f'{path}["{r:g}"]', nonnegative=True)  # named by its rate, as in the file
        if r <= last_rate:
            raise InstanceError(f"rates must increase, got {r:g} Gbps after {last_rate:g}", field=path)
        if u < last_usd:
            # a cheaper faster port would make the cost of a Fat-tree fall with its bandwidth
            raise InstanceError(
                f"a {r:g} Gbps port costs {u:g} USD, less than the {last_usd:g} USD of a "
                f"{last_rate:g} Gbps one; prices must not fall with the rate",
                field=path,
            )
        last_rate, last_usd = r, u


def _check_cost(cost: CostModel) -> None:
    if not isinstance(cost, CostModel):
        raise InstanceError("expected a CostModel", field="cost")
    for name in ("transceiver_usd", "nic_port_usd", "switch_port_usd"):
        value = getattr(cost, name)
        if value is not None:
            _check_price_table(value, f"cost.{name}")
    for name in ("patch_panel_port_usd", "ocs_port_usd"):
        value = getattr(cost, name)
        if value is not None:
            as_number(value, f"cost.{name}", nonnegative=True)
    if cost.fabric is not None:
        as_choice(cost.fabric, "cost.fabric", DIRECT_FABRICS)


PARALLELISM_FIELDS = ("tp", "pp", "dp", "ep", "micro_batch")


def job_choice(parallelism: Parallelism, server_map: Any = None) -> dict[str, Any]:
    """A solution's record of a job's split and mapping (``Solution.job``)."""
    out: dict[str, Any] = {"parallelism": {k: int(getattr(parallelism, k)) for k in PARALLELISM_FIELDS}}
    if server_map is not None:
        out["server_map"] = [int(s) for s in server_map]
    return out


def with_job_choice(instance: Instance, choice: Mapping[str, Any] | None) -> Instance:
    """``instance`` with its job's split and rank-to-server mapping replaced by a solution's
    ``choice`` (:func:`job_choice`); ``instance`` itself when ``choice`` is None. The split must fit
    the job's memory and the map be a permutation of the servers (an :class:`InstanceError` naming
    ``job.parallelism.tp`` or ``job.server_map[k]`` otherwise)."""
    if choice is None:
        return instance
    if instance.job is None:
        raise InstanceError("the solution records a job's split, the instance has no job section", field="job")
    par = choice.get("parallelism")
    if not isinstance(par, Mapping) or not {"tp", "pp", "dp"} <= set(par) or not set(par) <= set(PARALLELISM_FIELDS):
        raise InstanceError("expected {tp, pp, dp[, ep, micro_batch]}", field="job.parallelism")
    for name, value in par.items():
        as_int(value, f"job.parallelism.{name}", low=1, high=MAX_SERVERS * MAX_ACCELERATORS)
    server_map = choice.get("server_map")
    spec = replace(
        instance.job,
        parallelism=Parallelism(**{k: int(v) for k, v in par.items()}),
        server_map=None if server_map is None else tuple(server_map),
    )
    if spec == instance.job:
        return instance
    return replace(instance, job=spec, demand=None)
