"""A packet-level replay of one training iteration in ns-3: the check of the evaluator's time model
(docs/guide/evaluator.md, "The packet-level check").

The evaluator scores a design by a fluid model: ``comm = max over arcs of load / capacity + alpha x
(hops of the longest used path)``. This module replays the same iteration's bytes as TCP transfers in
the ns-3 network simulator (PyPI package ``ns3``, ``pip install '.[sim]'``) and measures when the last
byte arrives, so that the two models can be set side by side (``benchmarks/packet_check.py``).

It shares no code with the evaluator: it reads the instance's demand (``effective_demand`` for a
workload's placement), the design's link counts and the solution's rings, paths and offset routes,
and derives the transfers itself.

What is replayed (:func:`iteration_flows`), as the evaluator models it:

* every ring of an AllReduce group sends ``fraction x 2(k-1)/k x S`` bytes from each member to its
  ring successor (the solution's rings; a group it leaves out, or every group when it states none,
  takes one ring in member order), and the model-parallel bytes go from their source to their
  destination; bytes of one ordered pair add up;
* a pair's bytes follow the solution's paths for that pair (split by their fractions), else its
  offset routes for the pair's offset ``(dst - src) mod n``, else, when the solution states no
  route at all, an equal split over every shortest path (the evaluator's documented fallback);
* each (pair, path) is one TCP transfer (ns-3 ``BulkSendApplication``), all starting at time 0: the
  ring's ``2(k-1)`` steps are one transfer of their summed bytes, since the evaluator's bandwidth
  term treats them as one concurrent load.

The network (:func:`simulate_flows`): one ns-3 point-to-point link per linked server pair, at the
rate of all its parallel links summed (``X[i, j] x B``; the evaluator's capacity) and the cluster's
hop latency as propagation delay; at each link's sender, ns-3's default traffic control (an FqCoDel
queue discipline of 10,240 packets, per-flow queues) in front of the device's drop-tail queue of
``queue_packets`` (100); TCP with ns-3's defaults (CUBIC) but 1,448-byte segments and 4 MiB
buffers. Every transfer's destination is an address of its own (a /32 on the destination's
loopback) with a static host route at every hop of its path, so each transfer follows its path
exactly, even where two transfers to one server take different routes.
The TCP acknowledgements go back on shortest paths (ns-3's global routing).

``ns`` is imported inside the functions that run the simulator: importing it takes about 20 s and
the package is an optional extra, so the rest of the toolkit never pays for it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from topoopt_ilp.core.instance import Instance
from topoopt_ilp.core.lazy import nx
from topoopt_ilp.core.solution import Solution
from topoopt_ilp.core.traffic import effective_demand
from topoopt_ilp.errors import InputError, UnsupportedError

__all__ = [
    "Flow",
    "PacketResult",
    "ns3_available",
    "iteration_flows",
    "pair_bytes",
    "simulate",
    "simulate_flows",
    "max_min_fair_time",
    "SEGMENT_BYTES",
    "WIRE_BYTES_PER_SEGMENT",
]

#: TCP payload per packet; on the wire each segment adds TCP (20 B), IPv4 (20 B) and PPP (2 B) headers
#: plus the TCP timestamp option (12 B): 1,448 + 52 = 1,500 B of IP packet, 1,502 B on the link.
SEGMENT_BYTES = 1448
WIRE_BYTES_PER_SEGMENT = 1502
_FIRST_PORT = 10_000
_LINK_BASE = "10.0.0.0"
_ALIAS_BASE = 11 << 24  # 11.0.0.0: the transfers' own destination addresses


@dataclass(frozen=True)
class Flow:
    """One TCP transfer: ``bytes`` of payload from ``nodes[0]`` to ``nodes[-1]`` along ``nodes``."""

    nodes: tuple[int, ...]
    bytes: int

    @property
    def src(self) -> int:
        return self.nodes[0]

    @property
    def dst(self) -> int:
        return self.nodes[-1]


@dataclass(frozen=True)
class PacketResult:
    """What one ns-3 run measured.

    ``comm_time_s``: from the common start to the arrival of the last byte of the last transfer.
    ``flows``, ``payload_bytes``: what was replayed. ``lost_packets``: sent and never received, i.e.
    dropped at full queues (TCP resent them). ``events_wall_s``: the wall time of the simulation itself."""

    comm_time_s: float
    flows: int
    payload_bytes: int
    lost_packets: int
    events_wall_s: float


def ns3_available() -> bool:
    """Whether the ns-3 bindings (``from ns import ns``) can be imported."""
    try:
        from ns import ns  # noqa: F401  # start-up time: ~20 s to load, and an optional extra
    except Exception:  # ImportError, or the bindings' own failure to load their libraries
        return False
    return True


def pair_bytes(instance: Instance, solution: Solution) -> np.ndarray:
    """Bytes server i sends server j in one iteration (n x n): ring hops and model-parallel pairs."""
    n = instance.n
    demand, _ = effective_demand(instance, solution.placement)
    out = demand.mp_matrix(n)
    rings = solution.routing.rings
    ringed: set[int] = set()
    for r in range(len(rings)):
        g = int(rings.group[r])
        if not 0 <= g < len(demand.allreduce):
            raise InputError(f"ring {r} names AllReduce group {g}; the instance has {len(demand.allreduce)}")
        order = [int(v) for v in rings.order[r] if v >= 0]
        per_hop = float(rings.fraction[r]) * demand.allreduce[g].bytes_per_member()
        for a, b in zip(order, order[1:] + order[:1]):
            out[a, b] += per_hop
        ringed.add(g)
    for g, group in enumerate(demand.allreduce):
        if g in ringed or group.size < 2:
            continue
        members = list(group.members)
        for a, b in zip(members, members[1:] + members[:1]):
            out[a, b] += group.bytes_per_member()
    np.fill_diagonal(out, 0.0)
    return out


def _routes_of_pair(solution: Solution, x: np.ndarray, src: int, dst: int) -> list[tuple[list[int], float]]:
    """The node paths and their shares that carry the pair src -> dst."""
    n = x.shape[0]
    routing = solution.routing
    given = [(nodes, frac) for nodes, frac in routing.paths.to_lists() if nodes[0] == src and nodes[-1] == dst]
    if any(frac > 0 for _, frac in given):
        return [(nodes, frac) for nodes, frac in given if frac > 0]
    offset = (dst - src) % n
    by_offset = [(jumps, frac) for o, jumps, frac in routing.offset_routes.to_lists() if o % n == offset and frac > 0]
    if by_offset:
        return [
            ([(src + int(c)) % n for c in np.concatenate(([0], np.cumsum(jumps)))], frac) for jumps, frac in by_offset
        ]
    if len(routing.paths) or len(routing.offset_routes):
        raise InputError(f"the solution routes no traffic of pair {src}->{dst}, which has bytes to send")
    graph = nx.DiGraph([(int(a), int(b)) for a, b in np.argwhere(x > 0)])
    try:
        shortest = list(nx.all_shortest_paths(graph, src, dst))
    except (nx.NetworkXNoPath, nx.NodeNotFound):
        raise InputError(f"server {dst} cannot be reached from server {src} in the design") from None
    return [(p, 1.0 / len(shortest)) for p in shortest]


def iteration_flows(instance: Instance, solution: Solution, scale: float = 1.0) -> list[Flow]:
    """The transfers of one iteration, each pair's bytes (times ``scale``) split over its routes."""
    if solution.topology is None:
        raise InputError("the solution has no topology to simulate")
    x = solution.topology.matrix
    traffic = pair_bytes(instance, solution) * scale
    flows: list[Flow] = []
    for src, dst in np.argwhere(traffic > 0).tolist():
        for nodes, frac in _routes_of_pair(solution, x, src, dst):
            for a, b in zip(nodes, nodes[1:]):
                if x[a, b] <= 0:
                    raise InputError(f"the route {nodes} of pair {src}->{dst} takes {a}->{b}, which the design lacks")
            amount = int(round(frac * traffic[src, dst]))
            if amount > 0:
                flows.append(Flow(tuple(int(v) for v in nodes), amount))
    return flows


# ----------------------------------------------------------------------------------------------
# Max-min fair sharing of the links, as a fluid (what TCP approximates; no packets, no ns-3)
#
# Data:   transfers f with b_f bytes on the arcs of their path; arc e has capacity c_e bytes/s.
# Rates:  while transfers remain, the max-min fair rates by progressive filling: the arc whose
#         capacity left, shared equally by its unfrozen transfers, is smallest fixes that share as
#         the rate of those transfers, which are frozen and subtract it from every arc they cross;
#         repeat until every transfer is frozen.
# Time:   advance to the first completion at these rates, drop the finished transfers, recompute.
#         The result, plus alpha x the longest path's hops, is the time of a fair network that
#         keeps every transfer at its fair rate at all times. The evaluator's bandwidth term,
#         max_e load_e / c_e, is the time of the best rates instead (each arc busy all the time);
#         fair sharing can only be slower, and by how much is what TCP's sharing costs.
# ----------------------------------------------------------------------------------------------


def _fair_rates(paths: list[list[int]], active: list[int], capacity: np.ndarray) -> np.ndarray:
    """Max-min fair rates (bytes/s) of the active transfers; ``paths[f]``: the arc ids of f."""
    rate = np.zeros(len(paths))
    left = capacity.astype(float).copy()
    unfrozen = set(active)
    while unfrozen:
        users: dict[int, list[int]] = {}
        for f in unfrozen:
            for e in paths[f]:
                users.setdefault(e, []).append(f)
        arc = min(users, key=lambda e: left[e] / len(users[e]))
        share = left[arc] / len(users[arc])
        for f in users[arc]:
            rate[f] = share
            unfrozen.discard(f)
            for e in paths[f]:
                left[e] -= share
        left = np.maximum(left, 0.0)
    return rate


def max_min_fair_time(rate_bps: np.ndarray, latency_s: float, flows: list[Flow], wire: bool = True) -> float:
    """When the last transfer ends if every transfer always runs at its max-min fair rate (fluid).

    ``wire``: count the bytes as they go on the link (payload x 1502/1448, the TCP/IP/PPP headers)."""
    arc_id: dict[tuple[int, int], int] = {}
    paths = [[arc_id.setdefault(arc, len(arc_id)) for arc in zip(f.nodes, f.nodes[1:])] for f in flows]
    capacity = np.array([rate_bps[u, v] / 8 for u, v in arc_id])
    left = np.array([f.bytes for f in flows], dtype=float) * (WIRE_BYTES_PER_SEGMENT / SEGMENT_BYTES if wire else 1.0)
    active = [f for f in range(len(flows)) if left[f] > 0]
    elapsed = 0.0
    while active:
        rate = _fair_rates(paths, active, capacity)
        step = min(left[f] / rate[f] for f in active)
        elapsed += step
        for f in active:
            left[f] -= rate[f] * step
        active = [f for f in active if left[f] > 1e-9 * flows[f].bytes]
    hops = max((len(f.nodes) - 1 for f in flows), default=0)
    return elapsed + hops * latency_s


def simulate(instance: Instance, solution: Solution, scale: float = 1.0, queue_packets: int = 100) -> PacketResult:
    """Replay one iteration of ``solution`` (its bytes times ``scale``) in ns-3; every device's
    drop-tail transmit queue holds ``queue_packets`` packets (behind ns-3's FqCoDel queue discipline)."""
    if instance.cluster.directed:
        raise UnsupportedError("the packet check builds full-duplex links: directed designs are not supported")
    flows = iteration_flows(instance, solution, scale)  # refuses a solution without a design
    rate_bps = np.asarray(solution.topology.matrix, dtype=float) * instance.cluster.link_bandwidth_gbps * 1e9
    return simulate_flows(rate_bps, instance.cluster.hop_latency_s, flows, queue_packets)


def _build_links(
    ns: Any, nodes: Any, rate_bps: np.ndarray, latency_s: float, queue_packets: int
) -> dict[tuple[int, int], tuple]:
    """One point-to-point link per linked pair; per arc (u, v): u's device and v's address on it."""
    helper = ns.PointToPointHelper()
    helper.SetQueue("ns3::DropTailQueue", "MaxSize", ns.QueueSizeValue(ns.QueueSize(f"{queue_packets}p")))
    addresses = ns.Ipv4AddressHelper()
    addresses.SetBase(ns.Ipv4Address(_LINK_BASE), ns.Ipv4Mask("255.255.255.252"))
    arcs: dict[tuple[int, int], tuple] = {}
    n = rate_bps.shape[0]
    for u in range(n):
        for v in range(u + 1, n):
            if rate_bps[u, v] <= 0 and rate_bps[v, u] <= 0:
                continue
            if rate_bps[u, v] != rate_bps[v, u]:
                raise UnsupportedError(f"servers {u} and {v} have unequal link counts in the two directions")
            helper.SetDeviceAttribute("DataRate", ns.StringValue(f"{int(round(rate_bps[u, v]))}bps"))
            helper.SetChannelAttribute("Delay", ns.StringValue(f"{latency_s * 1e9:.3f}ns"))
            devices = helper.Install(nodes.Get(u), nodes.Get(v))
            interfaces = addresses.Assign(devices)
            addresses.NewNetwork()
            arcs[(u, v)] = (devices.Get(0), interfaces.GetAddress(1))
            arcs[(v, u)] = (devices.Get(1), interfaces.GetAddress(0))
    return arcs


def _route_flow(ns: Any, nodes: Any, arcs: dict, flow: Flow, address: Any) -> None:
    """A /32 alias on the destination and a host route to it at every hop of the flow's path."""
    host = ns.Ipv4Mask("255.255.255.255")
    nodes.Get(flow.dst).GetObject[ns.Ipv4]().AddAddress(0, ns.Ipv4InterfaceAddress(address, host))
    static = ns.Ipv4StaticRoutingHelper()
    for u, v in zip(flow.nodes, flow.nodes[1:]):
        device, next_hop = arcs[(u, v)]
        ipv4 = nodes.Get(u).GetObject[ns.Ipv4]()
        static.GetStaticRouting(ipv4).AddHostRouteTo(address, next_hop, ipv4.GetInterfaceForDevice(device))


def simulate_flows(rate_bps: np.ndarray, latency_s: float, flows: list[Flow], queue_packets: int = 100) -> PacketResult:
    """Run ``flows`` (all starting at 0) on links of ``rate_bps[u, v]`` bit/s and delay ``latency_s``.

    Raises :class:`RuntimeError` when a transfer does not deliver all its bytes before the
    simulation's stop time (ten times the time to send every byte over the slowest link, plus 1 s)."""
    from ns import ns  # start-up time: the bindings take ~20 s to load, and are an optional extra

    n = rate_bps.shape[0]
    if len(flows) > 65_535 - _FIRST_PORT:
        raise UnsupportedError(f"{len(flows)} transfers: one port each, at most {65_535 - _FIRST_PORT}")
    ns.Config.SetDefault("ns3::TcpSocket::SegmentSize", ns.UintegerValue(SEGMENT_BYTES))
    ns.Config.SetDefault("ns3::TcpSocket::SndBufSize", ns.UintegerValue(1 << 22))
    ns.Config.SetDefault("ns3::TcpSocket::RcvBufSize", ns.UintegerValue(1 << 22))
    nodes = ns.NodeContainer()
    nodes.Create(n)
    ns.InternetStackHelper().Install(nodes)
    arcs = _build_links(ns, nodes, rate_bps, latency_s, queue_packets)
    ns.Ipv4GlobalRoutingHelper.PopulateRoutingTables()  # the acknowledgements' way back
    sinks = []
    for f, flow in enumerate(flows):
        address = ns.Ipv4Address(_ALIAS_BASE + f + 1)
        _route_flow(ns, nodes, arcs, flow, address)
        port = _FIRST_PORT + f
        sender = ns.BulkSendHelper("ns3::TcpSocketFactory", ns.InetSocketAddress(address, port).ConvertTo())
        sender.SetAttribute("MaxBytes", ns.UintegerValue(flow.bytes))
        sender.Install(nodes.Get(flow.src)).Start(ns.Seconds(0.0))
        sink = ns.PacketSinkHelper(
            "ns3::TcpSocketFactory", ns.InetSocketAddress(ns.Ipv4Address.GetAny(), port).ConvertTo()
        )
        apps = sink.Install(nodes.Get(flow.dst))
        apps.Start(ns.Seconds(0.0))
        sinks.append(apps.Get(0).GetObject[ns.PacketSink]())
    monitor_helper = ns.FlowMonitorHelper()
    monitor = monitor_helper.InstallAll()
    slowest = float(rate_bps[rate_bps > 0].min()) if (rate_bps > 0).any() else 1.0
    total = sum(flow.bytes for flow in flows)
    ns.Simulator.Stop(ns.Seconds(10.0 * total * 8 / slowest + 1.0))
    start = time.perf_counter()
    ns.Simulator.Run()
    wall = time.perf_counter() - start
    try:
        short = [f for f, sink in enumerate(sinks) if int(sink.GetTotalRx()) != flows[f].bytes]
        if short:
            f = short[0]
            raise RuntimeError(
                f"transfer {f} ({flows[f].src}->{flows[f].dst}) delivered {int(sinks[f].GetTotalRx())} of "
                f"{flows[f].bytes} bytes before the simulation stopped ({len(short)} such transfers)"
            )
        classifier = ns.DynamicCast[ns.Ipv4FlowClassifier](monitor_helper.GetClassifier())
        last, lost = 0.0, 0
        for flow_id, stats in monitor.GetFlowStats():
            tuple_ = classifier.FindFlow(flow_id)
            lost += int(stats.txPackets) - int(stats.rxPackets)  # dropped at a full queue, and resent
            if tuple_.destinationAddress.Get() > _ALIAS_BASE:  # a transfer, not its acknowledgements
                last = max(last, stats.timeLastRxPacket.GetSeconds())
    finally:
        ns.Simulator.Destroy()
    return PacketResult(last, len(flows), total, lost, wall)
