"""Check a solution's stated bound by solving again: ``topoopt verify --prove``.

The verifier can check everything a solution states except its bound: that no design is better than
the bound says needs a solve. :func:`check_bound` runs the exact method within a time limit and
compares what it finds with the claim. For a minimised objective (a maximised one mirrors it), with
``b`` the stated bound, ``u`` the exact method's incumbent and ``L`` its proven bound (``L <= OPT <= u``):

* **refuted** when ``u < b`` beyond the tolerance: a design better than the stated bound exists;
* **confirmed** when ``L >= b`` within the tolerance: no design is better than the stated bound;
* **undecided** otherwise: the time limit ended between the two.

A status ``optimal`` is the claim ``bound = objective`` (the verifier checks that the two agree), so
the same test confirms or refutes it. The tolerance is the relative gap within which the exact method
calls a solve optimal (the instance's ``solver.gap`` when larger).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from topoopt_ilp.core.instance import Instance
from topoopt_ilp.core.solution import Solution
from topoopt_ilp.methods import solve
from topoopt_ilp.solvers import DEFAULT_REL_GAP

__all__ = ["BoundCheck", "VERDICTS", "check_bound"]

VERDICTS = ("confirmed", "refuted", "undecided", "nothing_to_prove")


@dataclass(frozen=True)
class BoundCheck:
    """The verdict on a solution's stated bound, and the exact solve it rests on (None when the solution
    states no bound and nothing was solved)."""

    verdict: str
    message: str
    exact: Solution | None = None


def _tolerance(instance: Instance) -> float:
    return max(DEFAULT_REL_GAP, float(instance.solver.gap or 0.0))


def check_bound(instance: Instance, solution: Solution, *, time_limit_s: float, **exact_options: Any) -> BoundCheck:
    """Confirm or refute ``solution.bound`` with the exact method (``exact_options`` go to it: backend,
    threads). The solution should already pass :func:`~topoopt_ilp.evaluation.verify.verify`."""
    if solution.bound is None or not math.isfinite(float(solution.bound)):
        return BoundCheck("nothing_to_prove", f"status {solution.status} with no bound: there is no claim to prove")
    claimed = float(solution.bound)
    maximise = instance.objective == "throughput"
    exact = solve(instance, method="exact", time_limit_s=time_limit_s, **exact_options)
    slack = _tolerance(instance) * max(abs(claimed), 1e-300)
    what = f"{instance.objective} {'<=' if maximise else '>='} {claimed:.9g}"
    found, proven = exact.objective, exact.bound
    if exact.has_solution and found is not None and math.isfinite(found):
        better = found > claimed + slack if maximise else found < claimed - slack
        if better:
            return BoundCheck(
                "refuted",
                f"the stated bound ({what}) is refuted: the exact method found a design with "
                f"{instance.objective} {found:.9g}",
                exact,
            )
    if exact.status == "optimal" and found is not None:
        proven = found if proven is None else proven
    if proven is not None and math.isfinite(proven):
        holds = proven <= claimed + slack if maximise else proven >= claimed - slack
        if holds:
            return BoundCheck(
                "confirmed",
                f"the stated bound ({what}) is confirmed: the exact method proved {instance.objective} "
                f"{'<=' if maximise else '>='} {proven:.9g} ({exact.status}, {exact.wall_time_s:.1f} s)",
                exact,
            )
    reached = f"incumbent {found:.9g}" if found is not None else "no design"
    reached += f", bound {proven:.9g}" if proven is not None else ", no bound"
    return BoundCheck(
        "undecided",
        f"the stated bound ({what}) is neither confirmed nor refuted within {time_limit_s:g} s "
        f"(the exact method reached {exact.status}: {reached})",
        exact,
    )
