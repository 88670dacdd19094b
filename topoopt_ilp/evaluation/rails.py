"""Rail networks of GPU clusters: the rail-optimised Fat-tree and the rail-only network.

Switched baselines beside the ideal switch and the Fat-tree of ``architectures.py`` (docs/guide/evaluator.md,
**Rail baselines**). A server holds ``g`` accelerators joined by its scale-up fabric (NVLink-class,
``cluster.scale_up_gbps_per_accelerator`` ``B_up`` each way per accelerator) and one NIC port of rate
``r`` per accelerator; accelerator ``i`` of every server is on **rail** ``i``.

* ``rail_optimised`` - NVIDIA's DGX SuperPOD design (rail-aligned leaves: the leaf of rail ``i`` joins
  the ``i``-th ports of ``k`` servers) with the spine tiers above all leaves, as Meta's and NVIDIA's
  AI clusters are built: racks of ``k`` servers, 3 tiers, the upper ones oversubscribed ``1:R``. A
  transfer between two accelerators of the same rail index stays in that rail: 2 hops inside a rack's
  leaf, 6 between racks.
* ``rail_only`` - Wang et al., "How to Build Low-cost Networks for Large Language Models (without
  Sacrificing Performance)", arXiv 2307.12169: the same rails with no tier joining them (each rail
  its own 2-tier leaf-spine, one switch when it fits one leaf). A rail cannot reach another rail, so
  a transfer between different rail indices *must* be forwarded through the scale-up domain.

Cross-rail transfers (accelerator ``i`` of server ``s`` to accelerator ``j != i`` of server ``t``) are
forwarded in both: first over the scale-up fabric of ``s`` from accelerator ``i`` to accelerator
``j``, then on rail ``j`` (NCCL's PXN, "PCI x NVLink", does this on rail-optimised clusters so that
a message always leaves on the destination's rail; in a rail-only network it is the only way). So
the two carry the same traffic on the same ports; they differ in what they cost (the rail-only
network has no tier joining the rails, so at equal cost its ports are faster) and in the latency of
an inter-rack transfer (6 hops against 4).

Model (bytes per iteration ``x`` of a transfer from accelerator ``(s, i)`` to ``(t, j)``, ``s != t``):

    port_out[s, j] += x,  port_in[t, j] += x                                  (the rail-j NICs)
    up_out[rack(s), j] += x, up_in[rack(t), j] += x   if rack(s) != rack(t)   (rail-j leaf uplinks)
    fwd_out[s, i] += x,  fwd_in[s, j] += x            if i != j               (the NVLink hop)

    T_port = max(port) / r,   T_uplink = max(up) / (k r / R),   T_forward = max(fwd) / B_up
    T_bw = max(T_port, T_uplink, T_forward)     (the stages of a pipelined transfer)
    T_lat = hop latency x (2 in a rack, 6 between racks rail-optimised, 4 rail-only; + 1 when any
            transfer is forwarded)

The forwarding hop shares the scale-up fabric with the job's own scale-up collectives, which are
charged separately (the job's ``scale_up_s``, fixed for every architecture): the model assumes the
two do not overlap in time more than the iteration's ``overlap`` rule already says.

Which transfers: a ``job`` instance with ``g > 1`` gives its rank-to-rank transfers
(:func:`topoopt_ilp.jobs.iteration.transfers`, rank ``r`` on accelerator ``r mod g`` of instance
server ``server_of_rank[r]``), the ones between servers: TP, PP and EP transfers keep their ranks'
accelerators; the DP and expert-DP rings' bytes between two servers are split evenly over the ``g``
rails, same rail at both ends (NCCL runs a ring collective as several channels, and on a rail
network each channel enters and leaves a server on its own rail). Any other instance (a demand, a
workload, a job on one accelerator per server) knows only server-to-server bytes and splits each
pair's bytes the same way, so nothing is forwarded and with ``g = 1`` the rail-optimised network is
the Fat-tree of ``architectures.py`` port for port.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from topoopt_ilp.core.instance import Instance
from topoopt_ilp.errors import InputError
from topoopt_ilp.jobs.iteration import transfers

__all__ = [
    "RAIL_ARCHITECTURES",
    "RailTraffic",
    "RailTimes",
    "rail_traffic",
    "rail_times",
    "rail_hops",
]

RAIL_ARCHITECTURES = ("rail_optimised", "rail_only")
HOPS_INTRA_RACK = 2
HOPS_INTER_RACK = {"rail_optimised": 6, "rail_only": 4}
HOPS_FORWARD = 1  # the scale-up hop of a cross-rail transfer


@dataclass(frozen=True)
class RailTraffic:
    """Inter-server transfers between accelerators: ``bytes[e]`` from accelerator ``src_rail[e]`` of
    server ``src_server[e]`` to accelerator ``dst_rail[e]`` of server ``dst_server[e]`` (``src_server
    != dst_server``), on servers of ``g`` accelerators."""

    g: int
    src_server: np.ndarray
    src_rail: np.ndarray
    dst_server: np.ndarray
    dst_rail: np.ndarray
    bytes: np.ndarray

    @property
    def cross_rail(self) -> np.ndarray:
        return self.src_rail != self.dst_rail


@dataclass(frozen=True)
class RailTimes:
    """The bandwidth terms of the module docstring (seconds) and whether any transfer is forwarded
    or crosses racks."""

    port_s: float
    uplink_s: float
    forward_s: float
    forwarded: bool
    inter_rack: bool

    @property
    def bandwidth_s(self) -> float:
        return max(self.port_s, self.uplink_s, self.forward_s)


def rail_traffic(instance: Instance, server_matrix: np.ndarray) -> RailTraffic:
    """The transfers the rails carry (module docstring, **Which transfers**); ``server_matrix`` is
    the instance's server-to-server bytes, used when the instance has no job on ``g > 1``."""
    g = instance.cluster.accelerators_per_server
    job = instance.compiled_job
    if job is None or g == 1:
        return _spread(g, server_matrix)
    server_of = np.asarray(job.server_of_rank)
    moved = transfers(job.job)
    dp = np.zeros_like(server_matrix, dtype=float)
    parts = []
    for kind, (src, dst, size) in moved.items():
        across = (server_of[src] != server_of[dst]) & (size > 0)
        s, t, x = server_of[src[across]], server_of[dst[across]], size[across].astype(float)
        if kind == "dp":  # NCCL's rings, one channel per rail: spread over the rails
            np.add.at(dp, (s, t), x)
        else:
            parts.append(RailTraffic(g, s, src[across] % g, t, dst[across] % g, x))
    parts.append(_spread(g, dp))
    return RailTraffic(g, *(np.concatenate([getattr(p, f) for p in parts]) for f in _FIELDS))


_FIELDS = ("src_server", "src_rail", "dst_server", "dst_rail", "bytes")


def _spread(g: int, server_matrix: np.ndarray) -> RailTraffic:
    """Each server pair's bytes split evenly over the ``g`` rails, same rail at both ends."""
    s, t = np.nonzero(server_matrix * (1 - np.eye(len(server_matrix))))
    rails = np.arange(g)
    return RailTraffic(
        g,
        np.repeat(s, g),
        np.tile(rails, len(s)),
        np.repeat(t, g),
        np.tile(rails, len(s)),
        np.repeat(server_matrix[s, t] / g, g).astype(float),
    )


def rail_times(
    traffic: RailTraffic,
    n: int,
    rail_gbps: float,
    *,
    rack_size: int,
    oversubscription: float,
    scale_up_gbps: float | None,
) -> RailTimes:
    """The port, leaf-uplink and forwarding times of ``traffic`` on ``g`` rails of ``rail_gbps`` ports
    among ``n`` servers in racks of ``rack_size`` (module docstring, **Model**)."""
    g = traffic.g
    rate = rail_gbps * 1e9 / 8.0  # bytes per second and direction
    x = traffic.bytes
    j = traffic.dst_rail  # every transfer travels on its destination's rail

    def busiest(server: np.ndarray, rail: np.ndarray, weights: np.ndarray, rows: int) -> float:
        if not len(weights):
            return 0.0
        return float(np.bincount(server * g + rail, weights=weights, minlength=rows * g).max())

    port = max(busiest(traffic.src_server, j, x, n), busiest(traffic.dst_server, j, x, n)) / rate

    racks = n // rack_size
    rack_src, rack_dst = traffic.src_server // rack_size, traffic.dst_server // rack_size
    far = rack_src != rack_dst
    uplink = 0.0
    if racks > 1 and far.any():
        load = max(busiest(rack_src[far], j[far], x[far], racks), busiest(rack_dst[far], j[far], x[far], racks))
        uplink = load / (rack_size * rate / oversubscription)

    cross = traffic.cross_rail
    forward = 0.0
    if cross.any():
        if not scale_up_gbps:
            raise InputError(
                "cluster.scale_up_gbps_per_accelerator: a rail network forwards cross-rail transfers over "
                "the scale-up fabric; give its bandwidth"
            )
        s = traffic.src_server[cross]
        load = max(
            busiest(s, traffic.src_rail[cross], x[cross], n),
            busiest(s, j[cross], x[cross], n),
        )
        forward = load / (scale_up_gbps * 1e9 / 8.0)
    return RailTimes(port, uplink, forward, bool(cross.any()), bool(racks > 1 and far.any()))


def rail_hops(architecture: str, times: RailTimes, any_traffic: bool) -> int:
    """Hops of the longest path (module docstring): 0 without traffic."""
    if not any_traffic:
        return 0
    hops = HOPS_INTER_RACK[architecture] if times.inter_rack else HOPS_INTRA_RACK
    return hops + (HOPS_FORWARD if times.forwarded else 0)
