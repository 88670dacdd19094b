"""The LP-relaxation bound of the collective model against the independent cut bound, on the scale cases.

The cases of ``collective_scale.py``: an AllGather of ``--bytes`` over every server of a circulant
C(n; jumps) of degree d (jumps spread geometrically), ``--chunks`` chunks per server.
``models.collective_relaxation.relaxation_bound`` (HiGHS, one thread, ``--time-limit`` seconds per
LP; skipped above ``--max-chunks`` chunk ids, n x chunks, as the exact model is in
``collective_scale.py``) beside the independent bound of ``evaluation.collective_bounds`` (``cut``,
the best of its cut, latency and volume parts) and the model's own floor (``floor``, where the
bisection starts). ``stronger`` says whether the relaxation's bound exceeds the independent one;
``greedy`` is the greedy schedule's finish step, the upper end of the bisection.

Usage: python benchmarks/collective_relaxation.py [--servers 8 16 32 64 128] [--chunks 1 2 4] [--degrees 4 8]
       [--time-limit 15] [--max-chunks 128] [--bytes 1e9]
"""

from __future__ import annotations

import argparse

from _args import seconds
from _results import Record, add_out_argument
from collective_scale import add_case_arguments, spread_jumps
from collective_speed import circulant

from topoopt_ilp.core.collective import Collective, LinkModel
from topoopt_ilp.evaluation.collective_bounds import collective_lower_bound
from topoopt_ilp.models.collective import solve_collective
from topoopt_ilp.models.collective_relaxation import relaxation_bound
from topoopt_ilp.models.common import ExactOptions


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_case_arguments(ap)
    ap.add_argument("--time-limit", type=seconds, default=15.0, help="seconds per LP")
    ap.add_argument("--max-chunks", type=int, default=128, help="skip the relaxation above n x chunks")
    add_out_argument(ap)
    args = ap.parse_args()
    record = Record(args)
    link = LinkModel(args.alpha, args.bandwidth)
    t = record.table(
        f"AllGather of {args.bytes:g} bytes on circulants: bounds in steps, the LP relaxation's on HiGHS 1 thread, "
        f"{args.time_limit:g} s per LP",
        [
            ("n", ">4"),
            ("d", ">2"),
            ("jumps", "<14"),
            ("chunks", ">6"),
            ("cut", ">4"),
            ("floor", ">5"),
            ("lp", ">4"),
            ("settled", "<7"),
            ("lps", ">4"),
            ("lp_s", ">7.2f"),
            ("greedy", ">6"),
            ("stronger", "<8"),
        ],
    )
    print(t.header(), flush=True)
    stronger = weaker = 0
    for d in args.degrees:
        for n in args.servers:
            if d >= n:
                continue
            jumps = spread_jumps(n, d)
            topology = circulant(n, jumps)
            for k in args.chunks:
                coll = Collective("allgather", tuple(range(n)), args.bytes, k)
                cut = collective_lower_bound(topology, coll, link).steps
                greedy = solve_collective(topology, coll, link, method="heuristic").steps
                if n * k > args.max_chunks:
                    print(t.add(n, d, " ".join(map(str, jumps)), k, cut, "-", "-", "skipped", "-", None, greedy, "-"))
                    continue
                options = ExactOptions(time_limit_s=args.time_limit, threads=1)
                lp = relaxation_bound(topology, coll, link, options=options)
                stronger += lp.steps > cut
                weaker += lp.steps < cut
                print(
                    t.add(
                        n,
                        d,
                        " ".join(map(str, jumps)),
                        k,
                        cut,
                        lp.floor_steps,
                        lp.steps,
                        "yes" if lp.settled else "no",
                        lp.solves,
                        lp.solve_s,
                        greedy,
                        "yes" if lp.steps > cut else "no",
                    ),
                    flush=True,
                )
    print(t.note(f"the relaxation above the independent bound on {stronger} case(s), below it on {weaker}"))
    record.write()


if __name__ == "__main__":
    main()
