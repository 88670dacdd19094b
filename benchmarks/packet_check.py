"""The evaluator's communication time beside a packet-level replay of the same iteration in ns-3.

For each instance, the design of ``topoopt solve`` (the default method) is scored by the evaluator
(``evaluate``, its own routing) and replayed in ns-3 by ``topoopt_ilp.evaluation.packet_sim``: one
point-to-point link per linked pair at the summed rate of its parallel links and the cluster's hop
latency, one TCP transfer per (server pair, route) along the solution's rings, paths and offset
routes, all starting together. Every byte is multiplied by ``--scale`` (the packet simulation's
events grow with the bytes); the evaluator's time of the scaled bytes is its bandwidth term times
``--scale`` plus its latency term, which does not scale. ``wire_ms``: that time with the bandwidth
term grown by the headers every 1,448-byte TCP segment carries on the link (1,502 bytes); ``fair_ms``:
the same transfers as a fluid in which every transfer always runs at its max-min fair rate
(``max_min_fair_time``, on-the-wire bytes; no packets). ``ratio``: simulated over evaluator,
``wire_ratio``: simulated over ``wire_ms``; ``lost``: packets dropped at full queues (and resent).
Needs the ``sim`` extra (``pip install '.[sim]'``).

Usage: python benchmarks/packet_check.py [--instances instances/mix-8.json,...] [--scale 0.1]
"""

from __future__ import annotations

import argparse
import time

from _args import instance_files
from _results import Record, add_out_argument

from topoopt_ilp import evaluate, files, solve
from topoopt_ilp.evaluation.packet_sim import (
    SEGMENT_BYTES,
    WIRE_BYTES_PER_SEGMENT,
    iteration_flows,
    max_min_fair_time,
    ns3_available,
    simulate,
)

DEFAULT = ",".join(
    f"instances/{name}.json" for name in ("fixed-ring-8", "mix-8", "dlrm-mini-8-fixed", "testbed-12", "mix-16")
)


def positive(text: str) -> float:
    value = float(text)
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"not a positive number: {text!r}")
    return value


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--instances", type=instance_files, default=DEFAULT, help="comma list of instance files")
    ap.add_argument("--scale", type=positive, default=0.1, help="multiply every byte of the iteration by this")
    ap.add_argument(
        "--queue",
        type=int,
        default=100,
        help="packets in every device's drop-tail transmit queue (behind ns-3's FqCoDel queue discipline)",
    )
    add_out_argument(ap)
    args = ap.parse_args()
    if not ns3_available():
        ap.error("the ns-3 bindings are not installed: pip install '.[sim]'")
    record = Record(args)
    t = record.table(
        f"communication time of one iteration, bytes x {args.scale:g}: evaluator vs ns-3 (TCP)",
        [
            ("instance", "<24"),
            ("n", ">3"),
            ("flows", ">5"),
            ("MB", ">7.1f"),
            ("evaluator_ms", ">12.4f"),
            ("wire_ms", ">8.4f"),
            ("fair_ms", ">8.4f"),
            ("ns3_ms", ">8.4f"),
            ("ratio", ">6.3f"),
            ("wire_ratio", ">10.3f"),
            ("lost", ">5"),
            ("sim_wall_s", ">10.1f"),
        ],
    )
    print(t.header(), flush=True)
    ratios = []
    for path in args.instances:
        inst = files.load_instance(path)
        sol = solve(inst)
        metrics = evaluate(inst, sol)
        predicted = metrics.bandwidth_time_s * args.scale + metrics.latency_time_s
        wire = metrics.bandwidth_time_s * args.scale * WIRE_BYTES_PER_SEGMENT / SEGMENT_BYTES + metrics.latency_time_s
        rate_bps = sol.topology.matrix * inst.cluster.link_bandwidth_gbps * 1e9
        fair = max_min_fair_time(rate_bps, inst.cluster.hop_latency_s, iteration_flows(inst, sol, args.scale))
        start = time.perf_counter()
        sim = simulate(inst, sol, args.scale, args.queue)
        wall = time.perf_counter() - start
        ratio = sim.comm_time_s / predicted
        ratios.append(ratio)
        name = inst.name or path
        row = (name, inst.n, sim.flows, sim.payload_bytes / 1e6, predicted * 1e3, wire * 1e3, fair * 1e3)
        print(t.add(*row, sim.comm_time_s * 1e3, ratio, sim.comm_time_s / wire, sim.lost_packets, wall), flush=True)
    record.ratios = {"min_ratio": min(ratios), "max_ratio": max(ratios)}
    record.write()


if __name__ == "__main__":
    main()
