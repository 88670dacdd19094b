"""TopoOpt's heuristic applied to an instance: its start placement and its TopologyFinder design.

Core (docs/architecture.md): the method layer (:mod:`topoopt_ilp.methods`, ``--method heuristic``) and the model
layer (the models' default start and topology when their caller hands them none) both call these, so
the two never drift apart and models never import the method layer. :mod:`topoopt_ilp.heuristic` is
imported inside the functions, so the CLI's start-up does not pay for it.
"""

from __future__ import annotations

import time

import numpy as np

from topoopt_ilp import heuristic as h
from topoopt_ilp.core.instance import Instance
from topoopt_ilp.core.routes import Routing
from topoopt_ilp.core.solution import Solution, Topology, matrix_links
from topoopt_ilp.core.strategy import data_parallel, strategy_to_dict, validate_strategy
from topoopt_ilp.core.traffic import effective_demand
from topoopt_ilp.errors import InputError, StartInfeasibleError

__all__ = [
    "fitting_start_placement",
    "heuristic_circulant",
    "heuristic_design",
    "heuristic_for_placement",
    "start_placement",
]


def start_placement(instance: Instance) -> dict | None:
    """TopoOpt's initial strategy for a workload (every layer data-parallel at its largest degree,
    blocks round-robin); None for a demand instance."""
    if instance.workload is None:
        return None

    return strategy_to_dict(data_parallel(instance.workload, instance.n))


def fitting_start_placement(instance: Instance) -> dict | None:
    """:func:`start_placement`, or, when it breaks server memory (blocks that no simple rule packs),
    a :class:`~topoopt_ilp.errors.StartInfeasibleError` (exit 1) that says so: the instance may still
    have a feasible placement, which only the exact method can decide."""
    if instance.workload is None:
        return None

    strategy = data_parallel(instance.workload, instance.n)
    bad = [v for v in validate_strategy(instance.workload, instance.n, strategy) if "memory" in v]
    if bad:
        raise StartInfeasibleError(
            f"TopoOpt's start (every layer data-parallel, blocks round robin, else largest first "
            f"on the server with the most memory left) does not fit server memory ({bad[0]}); "
            f"--method exact decides whether any placement fits"
        )
    return strategy_to_dict(strategy)


def heuristic_for_placement(
    instance: Instance, placement: dict | None, *, select: str = "geometric", mode: str = "paper", seed: int = 0
) -> Solution:
    """TopologyFinder for the traffic of ``placement`` (a workload's strategy; None for a demand) on a
    general topology."""
    started = time.perf_counter()
    n, d, directed = instance.n, instance.d, instance.cluster.directed
    demand, _ = effective_demand(instance, placement)
    if mode == "paper" and demand.all_to_all and not demand.mp:  # authors' code: MP traffic, matched
        if not demand.allreduce:
            design = h.all_to_all_circulant(n, instance.d, directed=directed, seed=seed)
            if design is not None:
                return _all_to_all_solution(instance, placement, design, started, select=select, mode=mode)
        else:
            mixed = _rings_and_all_to_all(instance, placement, demand, started, select=select, seed=seed)
            if mixed is not None:
                return mixed
    groups = [(np.asarray(g.members), g.bytes) for g in demand.allreduce]
    multi = instance.cluster.multi_links
    try:
        res = h.topology_finder(
            n,
            d,
            groups,
            demand.mp_matrix(n) if demand.all_to_all else demand.mp_pairs_matrix(n),
            directed=directed,
            select=select,
            mode=mode,
            seed=seed,
            multi_links=multi,
            regular=instance.cluster.regular,
        )
    except ValueError as exc:  # what the instance asks for is beyond the heuristic (its message says why)
        if not any(why in str(exc) for why in ("multi_links", "without a link")):
            raise
        raise InputError(f"heuristic: {exc}") from None
    circulant_only = res.d_mp == 0 and len(res.jumps) == 1
    jumps = next(iter(res.jumps.values())) if circulant_only else None
    if jumps is not None and res.mp_matrix.any():
        jumps = None  # links beyond the jumps' circulant (free ports linked, a parallel-link repair)
    return Solution(
        status="feasible",
        method="heuristic",
        topology=Topology(res.X, jumps),
        routing=res.routing,
        placement=placement,
        wall_time_s=time.perf_counter() - started,
        details=_finder_details(res, select, mode, multi, mp_links=matrix_links(res.mp_matrix, directed)),
    )


def _finder_details(res, select: str, mode: str, multi_links: bool, **more) -> dict:
    """What a design built on TopologyFinder's result reports: its choices and split, its jumps and
    notes, ``more``, and the parallel-link repair when the cluster allows no parallel links."""
    details = {
        "select": select,
        "mode": mode,
        "split": res.split,
        "d_allreduce": res.d_allreduce,
        "d_mp": res.d_mp,
        "jumps_by_group_size": {str(k): list(v) for k, v in res.jumps.items()},
        "virtual_jumps": {str(k): list(v) for k, v in res.virtual_jumps.items()},
        "group_kind": list(res.group_kind),
        "notes": list(res.notes),
        **more,
    }
    if not multi_links:
        details["multi_links"] = {
            "rewired_swaps": res.rewired,
            "links_rewired": 2 * res.rewired,
            "routing_jumps": None if res.routing_jumps is None else list(res.routing_jumps),
        }
    return details


def _rings_and_all_to_all(instance: Instance, placement, demand, started: float, *, select: str, seed: int):
    """AllReduce groups plus uniform all-to-all, in paper mode: TopologyFinder's degree split, its
    rings on the ``d_A`` AllReduce ports, and the ``d_MP`` ports spent on circulant jumps chosen for
    all-to-all beside the rings' jumps (:func:`~topoopt_ilp.heuristic.all_to_all_circulant` with
    ``fixed``); every offset is routed over all the jumps, so there is no explicit path and the file
    grows with n x routes (TopologyFinder's matching gave n^2 paths: 869,000 at 1,024 servers). None
    when the split leaves no port to either side, or no such jumps exist (the caller then runs
    TopologyFinder). docs/methods/heuristic.md#allreduce-plus-uniform-all-to-all."""
    n, d, directed = instance.n, instance.d, instance.cluster.directed
    groups = [(np.asarray(g.members), g.bytes) for g in demand.allreduce]
    d_a, d_mp = h.degree_split(d, h.allreduce_bytes_total(groups), demand.all_to_all * n * (n - 1), directed=directed)
    if d_a == 0 or d_mp == 0:
        return None
    multi = instance.cluster.multi_links
    res = h.topology_finder(
        n,
        d_a,
        groups,
        None,
        directed=directed,
        select=select,
        seed=seed,
        multi_links=multi,
        regular=instance.cluster.regular,
    )
    if res.d_mp:  # an odd port count: TopologyFinder matched the last port
        return None
    ring_jumps = (
        res.routing_jumps if res.routing_jumps is not None else tuple(j for js in res.jumps.values() for j in js)
    )
    design = h.all_to_all_circulant(n, d_mp, directed=directed, seed=seed, fixed=ring_jumps)
    if design is None:
        return None
    # The added jumps' links go into TopologyFinder's matrix in place: nothing else holds it, and a
    # sum would be one more n x n array (2 GiB at 16,384 servers, written in full).
    links = res.X
    links.setflags(write=True)
    np.add.at(links.reshape(-1), h.circulant_arcs(n, design.jumps, directed), 1)
    links.setflags(write=False)  # a Topology then keeps it as it is, not a copy
    # the added jumps are new classes: only TopologyFinder's part can have been repaired (multi_links)
    details = _finder_details(
        res,
        select,
        "paper",
        multi,
        d_mp=d_mp,
        design="AllReduce rings on d_allreduce ports, and all-to-all jumps on d_mp ports",
        all_to_all_jumps=list(design.jumps),
        jump_sets_scored=design.sets_scored,
    )
    routing = Routing(rings=res.routing.rings, paths=res.routing.paths, offset_routes=design.routes)
    return Solution(
        status="feasible",
        method="heuristic",
        topology=Topology(links),
        routing=routing,
        placement=placement,
        wall_time_s=time.perf_counter() - started,
        details=details,
    )


def _all_to_all_solution(instance: Instance, placement, design, started: float, *, select: str, mode: str) -> Solution:
    """Uniform all-to-all on the circulant of :func:`~topoopt_ilp.heuristic.all_to_all_circulant`:
    every offset on its CoinChangeMod routes, no explicit path (docs/methods/heuristic.md)."""
    n, directed = instance.n, instance.cluster.directed
    links = h.circulant_matrix(n, design.jumps, directed)
    links.setflags(write=False)  # a Topology then keeps it as it is, not a copy (2 GiB at n = 16,384)
    details = {
        "select": select,
        "mode": mode,
        "design": "all-to-all circulant (jumps of least busiest-coin load among sampled coprime sets)",
        "jumps": list(design.jumps),
        "jump_sets_scored": design.sets_scored,
        "busiest_coin_load": design.max_coin_load,
    }
    if not instance.cluster.multi_links:  # distinct jumps below n/2: no parallel link to rewire
        details["multi_links"] = {"rewired_swaps": 0, "links_rewired": 0, "routing_jumps": None}
    return Solution(
        status="feasible",
        method="heuristic",
        topology=Topology(links, design.jumps),
        routing=Routing(offset_routes=design.routes),
        placement=placement,
        wall_time_s=time.perf_counter() - started,
        details=details,
    )


def heuristic_design(instance: Instance, *, select: str = "geometric", mode: str = "paper", seed: int = 0) -> Solution:
    """TopoOpt's design for an instance whose topology is free: the jump-set heuristic for a circulant
    family, else TopologyFinder for the data-parallel start (raises StartInfeasibleError when that
    start breaks server memory)."""
    if instance.topology_family != "any":
        return heuristic_circulant(instance, start_placement(instance), select=select, mode=mode, seed=seed)
    return heuristic_for_placement(instance, fitting_start_placement(instance), select=select, mode=mode, seed=seed)


def heuristic_circulant(
    instance: Instance, placement: dict | None, *, select: str = "geometric", mode: str = "paper", seed: int = 0
) -> Solution:
    """SelectPermutations' jump set for an instance of a circulant family (its topology must be a pure
    jump set, whatever the traffic), CoinChangeMod routes and TopologyFinder's rings for the traffic
    of ``placement``."""
    started = time.perf_counter()
    n, d, directed = instance.n, instance.d, instance.cluster.directed
    if instance.topology_family == "coprime_circulant":
        candidates = h.totient_perms(n, n)
    else:
        candidates = np.arange(1, n)
    # Undirected: each jump uses 2 ports, except n/2 which uses 1; an odd degree needs the n/2 jump
    # (without it, a topology that need not be regular leaves one port of each server unused).
    fixed: tuple[int, ...] = ()
    m = d
    if not directed:
        half_jump = n % 2 == 0 and (instance.topology_family == "circulant" or n == 2)
        if d % 2 and (half_jump or instance.cluster.regular):
            if not half_jump:
                raise InputError(
                    f"an undirected {instance.topology_family} topology of odd degree {d} needs the jump n/2, "
                    f"which {'does not exist' if n % 2 else 'is not coprime with n'} for n = {n}"
                )
            fixed = (n // 2,)
        m = d // 2
    if m > 0:
        pool = [int(c) for c in candidates if c not in fixed and (directed or 2 * c != n)]
        rule = select if callable(select) else h.SELECT_RULES[select]
        chosen = h.select_permutations(pool, m, n=n, rule=rule, mode="paper", directed=directed, fixed=fixed, seed=seed)
    else:
        chosen = ()
    jumps = tuple(sorted(set(chosen))) + fixed
    if len(jumps) != m + len(fixed):
        raise InputError(
            f"not enough distinct jumps for degree {d} in the {instance.topology_family} family on {n} servers"
        )
    x = h.circulant_matrix(n, jumps, directed)
    dist, offset_routes = h.coin_change_mod(n, jumps, directed=directed)
    rings = _rings_on_jumps(h, effective_demand(instance, placement)[0], n, jumps, dist, directed)
    return Solution(
        status="feasible",
        method="heuristic",
        topology=Topology(x, jumps),
        placement=placement,
        routing=Routing(rings=rings, offset_routes=offset_routes),
        wall_time_s=time.perf_counter() - started,
        details={
            "select": select if isinstance(select, str) else getattr(select, "__name__", "custom"),
            "family": instance.topology_family,
            "jumps": list(jumps),
            "mode": "paper (a jump set cannot repeat a jump, so the authors' duplicate quirk does not apply)",
        },
    )


def _rings_on_jumps(h, demand, n: int, jumps: tuple[int, ...], dist: np.ndarray, directed: bool):
    """TopologyFinder's AllReduce rings on a given jump set: a coset group of size k rings on the
    jumps that step within its coset (TotientPerms' candidates for k; both directions undirected),
    else on multi-hop ones; other groups in member order (:func:`~.heuristic.group_rings`). Without
    them the evaluator would ring each group once, in member order, over one link direction."""
    kinds, cosets, members = h.classify_groups([(g.members, g.bytes) for g in demand.allreduce], n)
    by_size: dict[int, tuple[int, ...]] = {}
    for c in cosets:
        if c and c[0] not in by_size:
            cands = {int(j) for j in h.totient_perms(n, c[0])}
            own = tuple(j for j in jumps if j in cands or (not directed and (n - j) % n in cands))
            if own:
                by_size[c[0]] = own
    return h.group_rings(n, kinds, cosets, members, by_size, dist, directed, [])[0]
