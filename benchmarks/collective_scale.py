"""AllGather schedules as the cluster grows: finish time against the independent bound and solve time
of the exact, greedy and ring schedules side by side, per servers, chunks per server and degree
(docs/guide/collectives.md).

Each case is an AllGather of ``--bytes`` over every server of a circulant C(n; jumps) of degree d:
the d / 2 jumps spread geometrically, round(n^(i / (d/2))) for i = 0 .. d/2 - 1 (each made distinct
and below n / 2), so 1 and about sqrt(n) for degree 4. ``models.collective.solve_collective`` with
``method`` exact (HiGHS, one thread, ``--time-limit`` seconds per solve; skipped above
``--exact-max-chunks`` chunk ids, n x chunks, to keep a run short: the model grows with chunks x
arcs x steps), heuristic (the greedy list schedule) and ring (the circulant's two-way ring); every schedule
is checked by ``evaluation.collective_check`` inside ``solve_collective``. ``bound`` is the
independent bound in steps (``evaluation.collective_bounds``); ``greedy<=ring`` checks the issue's
target that the heuristic schedule is never worse than the design's ring schedule.

Usage: python benchmarks/collective_scale.py [--servers 8 16 32 64 128] [--chunks 1 2 4] [--degrees 4 8]
       [--time-limit 60] [--exact-max-chunks 128] [--bytes 1e9]
"""

from __future__ import annotations

import argparse
import time

from _args import seconds
from _results import Record, add_out_argument
from collective_speed import circulant

from topoopt_ilp.core.collective import Collective, LinkModel
from topoopt_ilp.models.collective import solve_collective
from topoopt_ilp.models.common import ExactOptions


def spread_jumps(n: int, degree: int) -> tuple[int, ...]:
    """d / 2 distinct jumps below n / 2, spread geometrically (module docstring)."""
    half = degree // 2
    jumps: list[int] = []
    for i in range(half):
        j = max(1, round(n ** (i / half)))
        while j in jumps or 2 * j >= n:
            j = j + 1 if 2 * (j + 1) < n else min(set(range(1, (n + 1) // 2)) - set(jumps))
        jumps.append(j)
    return tuple(jumps)


def add_case_arguments(ap: argparse.ArgumentParser) -> None:
    """The AllGather cases of this benchmark (servers, chunks, degrees, bytes) and the link model."""
    ap.add_argument("--servers", type=int, nargs="+", default=[8, 16, 32, 64, 128])
    ap.add_argument("--chunks", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--degrees", type=int, nargs="+", default=[4, 8])
    ap.add_argument("--bytes", type=float, default=1e9)
    ap.add_argument("--alpha", type=float, default=1e-6, help="seconds per hop")
    ap.add_argument("--bandwidth", type=float, default=12.5e9, help="bytes per second per link")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_case_arguments(ap)
    ap.add_argument("--time-limit", type=seconds, default=60.0, help="seconds per exact solve")
    ap.add_argument("--exact-max-chunks", type=int, default=128, help="skip the exact model above n x chunks")
    add_out_argument(ap)
    args = ap.parse_args()
    record = Record(args)
    link = LinkModel(args.alpha, args.bandwidth)
    t = record.table(
        f"AllGather of {args.bytes:g} bytes on circulants, alpha {args.alpha * 1e6:g} us, "
        f"{args.bandwidth / 1e9:g} GB/s links; steps and wall seconds per method, exact HiGHS 1 thread, "
        f"{args.time_limit:g} s",
        [
            ("n", ">4"),
            ("d", ">2"),
            ("jumps", "<14"),
            ("chunks", ">6"),
            ("bound", ">5"),
            ("exact", ">5"),
            ("status", ">8"),
            ("exact_s", ">7"),
            ("greedy", ">6"),
            ("greedy_s", ">8.2f"),
            ("ring", ">5"),
            ("ring_s", ">6.2f"),
            ("best_gap", ">8.3f"),
            ("finish_ms", ">10.3f"),
            ("greedy<=ring", "<12"),
        ],
    )
    print(t.header(), flush=True)
    misses = 0
    for d in args.degrees:
        for n in args.servers:
            if d >= n:
                continue
            jumps = spread_jumps(n, d)
            topology = circulant(n, jumps)
            for k in args.chunks:
                coll = Collective("allgather", tuple(range(n)), args.bytes, k)
                greedy = solve_collective(topology, coll, link, method="heuristic")
                ring = solve_collective(topology, coll, link, method="ring")
                exact, exact_s = None, None
                if n * k <= args.exact_max_chunks:
                    started = time.perf_counter()
                    options = ExactOptions(time_limit_s=args.time_limit, threads=1)
                    exact = solve_collective(topology, coll, link, options=options)
                    exact_s = f"{time.perf_counter() - started:.2f}"
                best = min((r for r in (exact, greedy, ring) if r is not None), key=lambda r: r.steps)
                bound = max(r.bound_steps for r in (exact, greedy) if r is not None)
                ok = greedy.steps <= ring.steps
                misses += not ok
                print(
                    t.add(
                        n,
                        d,
                        " ".join(map(str, jumps)),
                        k,
                        bound,
                        "-" if exact is None else exact.steps,
                        "skipped" if exact is None else exact.status,
                        "-" if exact_s is None else exact_s,
                        greedy.steps,
                        greedy.solve_s,
                        ring.steps,
                        ring.solve_s,
                        (best.steps - bound) / best.steps,
                        best.finish_s * 1e3,
                        "yes" if ok else "NO",
                    ),
                    flush=True,
                )
    print(t.note(f"greedy no worse than the ring on every case: {'yes' if not misses else f'no, {misses} misses'}"))
    record.write()


if __name__ == "__main__":
    main()
