"""LIBRA's bandwidth allocation: the optimum against the equal split, and what it costs to prove it.

    python benchmarks/libra_allocation.py [--backends highs,scip,cbc] [--no-scale]

Part 1, on the shipped instances (instances/libra/*.json), for each objective the instance has an
optimum for: the iteration time of the optimal allocation and of the equal split (every dimension
the same bandwidth, the whole budget spent), their ratio (equal / optimal: how much faster the
optimum is), the same ratio for time x cost, and the time to prove the optimum (gap 1e-6) with each
LP back-end, side by side in one run (ratio to HiGHS in brackets).

Part 2, scale: random workloads with D dimensions and P distinct collectives (seeded), HiGHS only:
cutting-plane rounds and wall time.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from _results import Record, add_out_argument

from topoopt_ilp.errors import InputError
from topoopt_ilp.libra.problem import (
    Budget,
    Collective,
    Constraints,
    Dimension,
    HierarchyProblem,
    Layer,
    Phase,
    load_hierarchy,
)
from topoopt_ilp.models.libra import solve_bandwidth

ROOT = Path(__file__).resolve().parent.parent


def shipped(backends: list[str], record: Record) -> None:
    columns = [
        ("instance", "<24"),
        ("objective", "<16"),
        ("status", "<9"),
        ("rounds", ">6"),
        ("T opt", ">9.3f", "ms"),
        ("T equal", ">9.3f", "ms"),
        ("equal/opt", ">10.4f"),
        ("TxC eq/opt", ">11.4f"),
    ]
    for b in backends:
        columns += [" ", (f"time {b}", ">10.3f", "s"), " ", (f"{b}/{backends[0]}", ">8.1f", "x")]
    table = record.table("Part 1: shipped instances (gap 1e-6)", columns, sep="")
    print(table.title)
    print(table.header())
    for path in sorted((ROOT / "instances" / "libra").glob("*.json")):
        problem = load_hierarchy(path)
        for objective in ("iteration_time", "perf_per_cost"):
            cells, base, sol = [], None, None
            for b in backends:
                t0 = time.perf_counter()
                try:
                    s = solve_bandwidth(problem, objective, backend=b)
                except InputError as exc:
                    if "no optimum" in str(exc):
                        s = None
                        break
                    raise
                secs = time.perf_counter() - t0
                base = base or secs
                cells += [secs, secs / base]
                sol = sol or s
            if sol is None:
                print(table.note(f"{path.stem} {objective}: no optimum (nothing keeps the bandwidths above 0)"))
                continue
            ratio = sol.equal_split_time_s / sol.iteration_time_s
            cost_ratio = (sol.equal_split_objective / sol.objective) if objective == "perf_per_cost" else None
            print(
                table.add(
                    path.stem,
                    objective,
                    sol.status,
                    sol.iterations,
                    sol.iteration_time_s * 1e3,
                    sol.equal_split_time_s * 1e3,
                    ratio,
                    cost_ratio,
                    *cells,
                ),
                flush=True,
            )


def random_problem(D: int, P: int, seed: int) -> HierarchyProblem:
    rng = np.random.default_rng(seed)
    sizes = [int(rng.choice([2, 4, 8, 16])) for _ in range(D)]
    kinds = ["ring", "fully_connected", "switch"]
    dims = tuple(
        Dimension(f"d{i}", kinds[i % 3], sizes[i], unit_cost_usd_per_gbps=float(rng.uniform(2, 60))) for i in range(D)
    )
    colls = ["all_reduce", "reduce_scatter", "all_gather", "all_to_all"]
    layers = []
    for k in range(P):
        comm = tuple(int(rng.choice([-1, s])) for s in sizes)
        if max(comm) < 2:
            comm = tuple(sizes)
        coll = Collective(colls[int(rng.integers(4))], float(10 ** rng.uniform(6, 9)), comm)
        layers.append(Layer(f"l{k}", forward=Phase(float(rng.uniform(10, 1000)), coll), count=int(rng.integers(1, 8))))
    names = [d.name for d in dims]
    cons = Constraints(min_gbps={names[-1]: 10.0}, orderings=tuple((names[i], names[i + 1]) for i in range(D - 2)))
    return HierarchyProblem(dims, tuple(layers), Budget("total_bandwidth", 200.0 * D), cons)


def scale(record: Record) -> None:
    table = record.table(
        "Part 2: scale (random workloads, HiGHS, gap 1e-6)",
        [
            ("D", ">3"),
            ("P", ">7"),
            ("status", ">10"),
            ("rounds", ">8"),
            ("wall s", ">9.3f"),
            ("equal/opt", ">11.4f"),
            "  ",
            ("equal split meets the constraints", ""),
        ],
        sep="",
    )
    print(f"\n{table.title}")
    print(table.header())
    for D in (4, 6, 8):
        for P in (10, 100, 1000):
            sol = solve_bandwidth(random_problem(D, P, seed=D * 1000 + P))
            print(
                table.add(
                    D,
                    P,
                    sol.status,
                    sol.iterations,
                    sol.wall_time_s,
                    sol.equal_split_time_s / sol.iteration_time_s,
                    "yes" if sol.equal_split_feasible else "no",
                ),
                flush=True,
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backends", default="highs,scip,cbc")
    ap.add_argument("--no-scale", action="store_true", help="skip part 2")
    add_out_argument(ap)
    args = ap.parse_args()
    record = Record(args)
    shipped([b for b in args.backends.split(",") if b], record)
    if not args.no_scale:
        scale(record)
    record.write()


if __name__ == "__main__":
    main()
