"""LIBRA's bandwidth allocation on random problems: does every LP back-end end optimal, and agree?

    python benchmarks/libra_stress.py [--seeds 0,1,2,3,4] [--problems 150] [--backends highs,scip,cbc]

Each seed draws ``--problems`` valid problems (:func:`random_problem`: up to 6 dimensions of 2-4096
NPUs, 1-4 layers of random collectives whose bytes span 7 orders of magnitude, a bandwidth or a
cost budget) and solves each with every back-end. A problem is listed when a back-end does not end
``optimal`` or the optima differ by more than what optimal means (1e-4); the last line per seed
counts them. Measured 2026-12-03 (seeds 0-4, 150 each): 0 of 750 listed; the release before
listed 66 of them (10, 14, 12, 18, 12 per seed): mostly "the cutting planes stalled before finding a
finite allocation" (exit 1), SCIP's "numerical troubles in LP", and SCIP optima 2.6e-4 off.
``tests/models/test_libra.py`` runs a slice of the same draw.
"""

from __future__ import annotations

import argparse

import numpy as np
from _args import int_list
from _results import Record, add_out_argument

from topoopt_ilp.errors import InstanceError
from topoopt_ilp.libra.problem import Budget, Collective, Constraints, Dimension, HierarchyProblem, Layer, Phase
from topoopt_ilp.models.libra import OPTIMAL_GAP, solve_bandwidth

KINDS = ("ring", "fully_connected", "switch")
COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all")


def random_problem(rng: np.random.Generator) -> HierarchyProblem | None:
    """One random problem (module docstring), or None when the draw is not a valid one (more NPUs
    than allowed, a communicator size that does not fit)."""
    n_dims = int(rng.integers(1, 7))
    sizes = [2, 4, 8, 16, 64, 512, 4096] if n_dims < 4 else [2, 4, 8]
    dims = tuple(
        Dimension(
            f"d{i}",
            str(rng.choice(KINDS)),
            int(rng.choice(sizes)),
            unit_cost_usd_per_gbps=float(rng.choice([1.0, 3.0, 50.0])),
        )
        for i in range(n_dims)
    )
    layers = []
    for k in range(int(rng.integers(1, 5))):
        phases = {}
        for phase in ("forward", "input_grad", "weight_grad"):
            if rng.random() < 0.6:
                comm = [int(rng.choice([-1, d.size])) for d in dims]
                if all(c == -1 for c in comm):
                    comm[0] = dims[0].size
                collective = Collective(str(rng.choice(COLLECTIVES)), float(10 ** rng.uniform(3, 10)), tuple(comm))
                phases[phase] = Phase(float(rng.choice([0.0, 10.0, 1e4])), collective)
        layers.append(Layer(f"l{k}", **phases))
    budget = (
        Budget("total_bandwidth", float(rng.choice([1.0, 100.0, 1e5])))
        if rng.random() < 0.6
        else Budget("cost", float(10 ** rng.uniform(3, 9)))
    )
    try:
        return HierarchyProblem(dims, tuple(layers), budget, Constraints(), "iteration_time")
    except InstanceError:
        return None


def disagreements(problem: HierarchyProblem, backends: list[str], time_limit_s: float = 30.0) -> str | None:
    """None when every back-end ends optimal and their optima agree within OPTIMAL_GAP; else a line
    saying what each returned."""
    sols = {b: solve_bandwidth(problem, backend=b, time_limit_s=time_limit_s) for b in backends}
    values = [s.objective for s in sols.values() if s.objective is not None]
    if all(s.status == "optimal" for s in sols.values()) and max(values) <= min(values) * (1 + OPTIMAL_GAP):
        return None
    return "; ".join(
        f"{b} {s.status} {s.objective if s.objective is None else f'{s.objective:.6g}'} {s.message[:70]}"
        for b, s in sols.items()
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int_list, default="0,1,2,3,4")
    ap.add_argument("--problems", type=int, default=150, help="valid problems per seed")
    ap.add_argument("--backends", default="highs,scip,cbc")
    add_out_argument(ap)
    args = ap.parse_args()
    record = Record(args)
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    table = record.table(
        f"problems per seed where a back-end of {', '.join(backends)} does not end optimal or the optima "
        f"differ by more than {OPTIMAL_GAP:g}; the listed problems are the notes",
        [("seed", ">4"), ("listed", ">6"), ("problems", ">8")],
    )
    for seed in args.seeds:
        rng = np.random.default_rng(seed)
        listed = checked = 0
        while checked < args.problems:
            problem = random_problem(rng)
            if problem is None:
                continue
            checked += 1
            line = disagreements(problem, backends)
            if line is not None:
                listed += 1
                dims = " x ".join(f"{d.kind}({d.size})" for d in problem.dimensions)
                print(table.note(f"seed {seed} problem {checked}: {dims}: {line}"), flush=True)
        table.add(seed, listed, checked)
        print(f"seed {seed}: {listed} of {checked} problems listed", flush=True)
    record.write()


if __name__ == "__main__":
    main()
