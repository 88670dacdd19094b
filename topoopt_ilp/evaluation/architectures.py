"""Switched reference architectures, scored on the same demand as the direct-connect designs.

These are evaluator-level baselines (TopoOpt (Wang et al., NSDI 2023), §5; docs/guide/evaluator.md): no
topology to choose, only a time model.

* ``big_switch`` - one ideal non-blocking switch; every server has the same total bandwidth as in the
  direct-connect cluster (``degree x link bandwidth``). A server's time is the larger of the bytes it
  sends and receives over that bandwidth; every transfer takes 2 hops (server - switch - server).
* ``fat_tree`` - racks of ``rack_size`` consecutive servers under ToR switches whose uplinks carry
  ``rack_size x degree x B / oversubscription`` (full bisection at 1, the 1:2 and 1:4 variants at 2
  and 4). The bandwidth term is the most loaded server port or rack uplink/downlink; a transfer takes
  2 hops inside a rack and 6 between racks (host, ToR, aggregation, core, aggregation, ToR, host).
* ``rail_optimised`` and ``rail_only`` - ``g`` rails, one NIC port per accelerator, accelerator ``i`` of
  every server on rail ``i``; cross-rail transfers are forwarded over the server's scale-up fabric
  first (model and sources in ``rails.py``). ``server_bandwidth_gbps`` is a server's total over its
  ``g`` ports.

Bandwidth per server: by default the same total as the direct-connect cluster (``degree x B``, the
ideal-switch comparison of the paper); any other value with ``server_bandwidth_gbps``; or, for
``fat_tree`` and the rail networks, the **equal-cost** bandwidth (``equal_cost=True``): the bandwidth whose Fat-tree, with this
oversubscription, rack size and 3 switch tiers, costs as much as the instance's ``n x d`` interfaces
plus their patch-panel/OCS ports under the cost model of ``topoopt_ilp.evaluation.cost`` (prices from the
instance's ``cost`` section, else the documented defaults). An oversubscribed tree has fewer upper-tier
ports, so at equal cost its servers get more bandwidth than a full-bisection tree's. The rail networks
are priced by :func:`~topoopt_ilp.evaluation.cost.rail_cost`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from topoopt_ilp.core.instance import Instance
from topoopt_ilp.core.traffic import effective_demand, traffic_matrix
from topoopt_ilp.errors import InputError
from topoopt_ilp.evaluation.cost import (
    equal_cost_bandwidth,
    equal_cost_rail_bandwidth,
    fat_tree_cost,
    prices_for,
    rail_cost,
)
from topoopt_ilp.evaluation.evaluate import critical_path_s, job_term
from topoopt_ilp.evaluation.rails import RAIL_ARCHITECTURES, rail_hops, rail_times, rail_traffic

__all__ = ["ARCHITECTURES", "SwitchMetrics", "evaluate_architecture"]

ARCHITECTURES = ("big_switch", "fat_tree", *RAIL_ARCHITECTURES)
HOPS_INTRA_RACK = 2
HOPS_INTER_RACK = 6


@dataclass(frozen=True)
class SwitchMetrics:
    architecture: str
    iteration_time_s: float
    compute_time_s: float
    comm_time_s: float
    bandwidth_time_s: float
    latency_time_s: float
    server_port_time_s: float
    rack_uplink_time_s: float
    oversubscription: float
    rack_size: int
    server_bandwidth_gbps: float = 0.0
    equal_cost: bool = False
    cost_usd: float | None = None  # the Fat-tree's cost when it was sized to equal cost
    rails: int = 1  # rail networks: ports (rails) per server, each of server_bandwidth_gbps / rails
    forward_time_s: float = 0.0  # rail networks: the busiest accelerator's scale-up forwarding time

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def evaluate_architecture(
    instance: Instance,
    architecture: str = "big_switch",
    *,
    oversubscription: float = 1.0,
    rack_size: int | None = None,
    placement: Any = None,
    server_bandwidth_gbps: float | None = None,
    equal_cost: bool = False,
) -> SwitchMetrics:
    """Iteration time of the instance's traffic (a workload's under ``placement``, default TopoOpt's
    data-parallel start) on a switched network.

    Each server gets ``server_bandwidth_gbps`` (default: the cluster's ``degree x B``), or with
    ``equal_cost`` (not big_switch) the bandwidth of the network that costs as much as the cluster."""
    if architecture not in ARCHITECTURES:
        raise InputError(f"unknown architecture {architecture!r}; choose one of {', '.join(ARCHITECTURES)}")
    if not oversubscription >= 1.0:
        raise InputError(f"oversubscription must be >= 1, got {oversubscription}")
    n = instance.n
    if architecture == "big_switch":
        if oversubscription != 1.0 or rack_size is not None:
            raise InputError("a big switch has no racks or oversubscription; use fat_tree")
        rack_size = n
    elif rack_size is None:
        rack_size = min(n, 16)
    if not 1 <= rack_size <= n or n % rack_size:
        raise InputError(f"rack size must divide the {n} servers, got {rack_size}")
    cost_usd = None
    if equal_cost:
        if architecture == "big_switch":
            raise InputError(
                "equal cost sizes a fat_tree or a rail network; a big switch is compared at equal bandwidth"
            )
        if server_bandwidth_gbps is not None:
            raise InputError("give either a server bandwidth or equal cost, not both")
        server_bandwidth_gbps, cost_usd = _equal_cost(instance, architecture, oversubscription, rack_size)
    elif server_bandwidth_gbps is None:
        server_bandwidth_gbps = instance.cluster.degree * instance.cluster.link_bandwidth_gbps
    if not (math.isfinite(server_bandwidth_gbps) and server_bandwidth_gbps > 0):
        raise InputError(f"server bandwidth must be a finite number of Gbps > 0, got {server_bandwidth_gbps}")
    demand, compute_s = effective_demand(instance, placement)
    D = traffic_matrix(instance, demand=demand)
    if architecture in RAIL_ARCHITECTURES:
        g = instance.cluster.accelerators_per_server
        times = rail_times(
            rail_traffic(instance, D),
            n,
            server_bandwidth_gbps / g,
            rack_size=rack_size,
            oversubscription=oversubscription,
            scale_up_gbps=instance.cluster.scale_up_gbps_per_accelerator,
        )
        t_bw, server_time, rack_time = times.bandwidth_s, times.port_s, times.uplink_s
        hops = rail_hops(architecture, times, bool(D.any()))
    else:
        g, times = 1, None
        t_bw, server_time, rack_time, hops = _switch_times(D, server_bandwidth_gbps, rack_size, oversubscription)
    t_lat = hops * instance.cluster.hop_latency_s
    comm = t_bw + t_lat
    compute = float(compute_s.max()) if compute_s.size else 0.0
    if instance.workload is not None and instance.workload.compute_model == "critical_path":
        compute = max(compute, critical_path_s(instance, placement))
    overlap = instance.workload.overlap if instance.workload is not None else "none"
    compute, overlap = job_term(instance, compute, overlap)
    return SwitchMetrics(
        architecture,
        max(compute, comm) if overlap == "full" else compute + comm,
        compute,
        comm,
        t_bw,
        t_lat,
        server_time,
        rack_time,
        float(oversubscription),
        int(rack_size),
        float(server_bandwidth_gbps),
        bool(equal_cost),
        cost_usd,
        g,
        times.forward_s if times is not None else 0.0,
    )


def _equal_cost(instance: Instance, architecture: str, oversubscription: float, rack_size: int) -> tuple[float, float]:
    """(bandwidth per server in Gbps, cost in USD) of the ``architecture`` that costs as much as the
    instance's direct-connect cluster."""
    prices = prices_for(instance)
    c = instance.cluster
    n = instance.n
    if architecture == "fat_tree":
        bandwidth = equal_cost_bandwidth(
            n, c.degree, c.link_bandwidth_gbps, prices, oversubscription=oversubscription, rack_size=rack_size
        )
        cost = fat_tree_cost(n, bandwidth, prices, oversubscription=oversubscription, rack_size=rack_size)
        return bandwidth, cost.total_usd
    g = c.accelerators_per_server
    shape = {"rail_only": architecture == "rail_only", "oversubscription": oversubscription, "rack_size": rack_size}
    rail = equal_cost_rail_bandwidth(n, c.degree, c.link_bandwidth_gbps, g, prices, **shape)
    return g * rail, rail_cost(n, g, rail, prices, **shape).total_usd


def _switch_times(
    D: np.ndarray, server_bandwidth_gbps: float, rack_size: int, oversubscription: float
) -> tuple[float, float, float, int]:
    """(bandwidth time, busiest server port, busiest rack uplink, hops) on a big switch or Fat-tree."""
    n = len(D)
    port = server_bandwidth_gbps * 1e9 / 8.0  # bytes per second and direction
    server_time = float(max(D.sum(axis=1).max(), D.sum(axis=0).max()) / port)
    rack = np.arange(n) // rack_size
    inter = rack[:, None] != rack[None, :]
    racks = n // rack_size
    cross = np.where(inter, D, 0.0)
    out_r = np.bincount(rack, weights=cross.sum(axis=1), minlength=racks)
    in_r = np.bincount(rack, weights=cross.sum(axis=0), minlength=racks)
    uplink = rack_size * port / oversubscription
    rack_time = float(max(out_r.max(), in_r.max()) / uplink) if racks > 1 else 0.0
    hops = 0 if not D.any() else (HOPS_INTER_RACK if (cross > 0).any() else HOPS_INTRA_RACK)
    return max(server_time, rack_time), server_time, rack_time, hops
