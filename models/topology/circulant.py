"""Exact choice of a circulant jump set (``topology_family: circulant | coprime_circulant``).

A circulant ``C_n(J)`` links ``i -> i + j (mod n)`` for every jump ``j`` in ``J`` (and ``i -> i - j``
when links are undirected). It is a Cayley graph of Z_n, hence vertex-transitive: the translation
``x -> x + s`` is an automorphism. Three consequences shape the models below.

* **One source suffices.** For a demand that depends only on ``(t - s) mod n`` (all-to-all, rings
  ``i -> i + k``, a uniform AllReduce over all servers in order) the flows of every source are the
  translates of the flows of source 0. The arc ``i -> i + a`` then carries, summed over all sources,
  ``sum_v f[a, v]`` where ``f[a, v]`` is source 0's flow on the arc ``v -> v + a``: the load of an
  arc depends only on its *arc class* ``a`` (a residue), and one capacity row per arc class is the
  capacity row of every arc of that class. A model with ``A * n`` flow columns (``A`` arc classes)
  replaces a multi-commodity flow with ``A * n^2``.
* **Unit multipliers.** For a unit ``u`` of Z_n (``gcd(u, n) = 1``), ``x -> u x`` maps ``C_n(J)``
  onto ``C_n(uJ)``: an isomorphism. In the coprime family every jump ``j`` is a unit, so with
  ``u = j^-1 (mod n)`` the set ``uJ`` contains 1 and is isomorphic to ``J``. Graph properties
  (ASPL, diameter) are isomorphism invariants, so fixing jump 1 loses no optimum. For throughput
  the isomorphism also moves the demand (offset ``k`` becomes ``u k``), so jump 1 is fixed only when
  the demand is invariant under every unit multiplier (``D0[u t] = D0[t]``, e.g. all-to-all);
  otherwise (e.g. a ring demand ``i -> i + 1``) no jump is fixed.
* **Closed counting bounds.** A circulant with ``f`` jump pairs ``+-j`` reaches at most
  ``N_k = sum_i 2^i C(f, i) C(k, i)`` residues within ``k`` hops (Boesch & Wang; one more factor
  for the jump ``n/2``; ``C(m + k, k)`` for ``m`` directed jumps). They give a lower bound on every
  residue's distance profile, hence on the total hop count of any routing: a valid inequality that
  lifts the LP relaxation of the throughput and ASPL models from "every residue one hop away" to
  the counting bound (``formulation="strong"``, the default; ``"basic"`` omits it).

Demands that are not rotation-invariant fall back to the full multi-commodity flow over the chosen
jumps (source-aggregated flows of all ``n`` sources, one capacity row per arc).

Public entry points: :func:`solve_circulant` (instance -> Solution) and
:func:`build_circulant_model` (instance -> :class:`CirculantModel`, the LinearModel plus what is
needed to decode a solution of it).
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from topoopt_ilp import heuristic as h
from topoopt_ilp.core.instance import Instance
from topoopt_ilp.core.routes import OffsetRoutes, PathSet, Routing
from topoopt_ilp.core.solution import Solution, Topology
from topoopt_ilp.core.traffic import traffic_matrix
from topoopt_ilp.errors import InputError, UnsupportedError
from topoopt_ilp.files import load_solution
from topoopt_ilp.models.common import MAX_MODEL_NONZEROS, ExactOptions, check_backend, run_model, solution_status
from topoopt_ilp.models.flow_decomposition import decompose_source_flow
from topoopt_ilp.solvers import LinearModel, ModelBuilder, SolveStatus, VarBlock
from topoopt_ilp.solvers import solve as solver_solve

__all__ = [
    "MAX_CIRCULANT_SERVERS",
    "CirculantModel",
    "jump_classes",
    "counting_bound",
    "distance_lower_bounds",
    "rotation_offsets",
    "build_circulant_model",
    "solve_circulant",
    "heuristic_jumps",
    "decompose_offset_flow",
    "jump_set_throughput",
    "orbit_representative",
]

#: Largest n the circulant models accept (the evaluator and the models keep n x n arrays).
MAX_CIRCULANT_SERVERS = 4096

_THROUGHPUT_LIKE = ("throughput", "comm_time", "iteration_time")


# ----------------------------------------------------------------------------------------------
# Jump classes, arc classes, counting bounds
# ----------------------------------------------------------------------------------------------
def jump_classes(n: int, directed: bool, family: str) -> tuple[np.ndarray, np.ndarray]:
    """Jump classes of the family and the ports each uses per server.

    Undirected: ``j`` and ``n - j`` give the same links, so classes are ``1..floor(n/2)``; each uses
    2 ports except ``n/2`` (1 port: the links to ``i + n/2`` and ``i - n/2`` coincide). Directed:
    ``1..n-1``, one port each. ``coprime_circulant`` keeps the units of Z_n only.
    """
    top = n // 2 if not directed else n - 1
    cls = np.arange(1, top + 1, dtype=np.int64)
    if family == "coprime_circulant":
        cls = cls[np.gcd(cls, n) == 1]
    ports = np.where(directed | (2 * cls == n), 1, 2).astype(np.int64)
    return cls, ports


def _arc_classes(n: int, classes: np.ndarray, directed: bool) -> tuple[np.ndarray, np.ndarray]:
    """Arc residues ``a`` (the arc ``v -> v + a``) and the jump class index of each."""
    idx = np.arange(classes.size)
    if directed:
        return classes.copy(), idx
    neg = (-classes) % n
    two = neg != classes  # n/2 is its own negative: one arc class
    res = np.concatenate([classes, neg[two]])
    cid = np.concatenate([idx, idx[two]])
    return res, cid


def counting_bound(n: int, d: int, directed: bool, family: str = "circulant", kmax: int | None = None) -> np.ndarray:
    """``N[k]``: the most residues (0 included) any jump set of degree <= d reaches within k hops.

    Undirected, ``f`` pairs ``+-j`` and possibly the involution ``n/2``:
    ``N_f(k) = sum_i 2^i C(f, i) C(k, i)`` (lattice points of the l1 ball), times ``N_f(k) +
    N_f(k-1)`` with ``n/2``. Directed, ``m`` jumps: ``C(m + k, k)``. Capped at ``n``; the counts
    grow with ``f`` (``m``), so the largest number of jumps the degree allows is used.
    """
    cls, ports = jump_classes(n, directed, family)
    kmax = n if kmax is None else kmax
    out = np.empty(kmax + 1, dtype=np.int64)
    if directed:
        m = min(d, cls.size)
        for k in range(kmax + 1):
            out[k] = min(n, math.comb(m + k, k))
        return out
    has_half = bool((ports == 1).any()) and d % 2 == 1
    f = min(d // 2, int((ports == 2).sum()))
    if not has_half and d % 2 == 1 and bool((ports == 1).any()):
        has_half = True

    def nf(k: int) -> int:
        if k < 0:
            return 0
        return sum(2**i * math.comb(f, i) * math.comb(k, i) for i in range(min(f, k) + 1))

    for k in range(kmax + 1):
        v = nf(k) + (nf(k - 1) if has_half else 0)
        out[k] = min(n, v)
    return out


def distance_lower_bounds(counts: np.ndarray, n: int) -> np.ndarray:
    """Lower bounds on the sorted distances of the ``n - 1`` nonzero residues: the i-th closest
    residue (0-based) is at least ``min{k : counts[k] - 1 > i}`` hops away."""
    i = np.arange(n - 1)
    return np.searchsorted(counts - 1, i, side="right").astype(np.int64)


def _min_weighted_hops(weights: np.ndarray, lb: np.ndarray) -> float:
    """Rearrangement bound: heaviest residues get the smallest admissible distances."""
    w = np.sort(np.asarray(weights, dtype=float))[::-1]
    return float(w @ lb[: w.size])


def rotation_offsets(D: np.ndarray, rtol: float = 1e-12) -> np.ndarray | None:
    """``D0`` with ``D[s, t] == D0[(t - s) % n]`` for all pairs, or None if D is not rotation-invariant."""
    n = D.shape[0]
    s = np.arange(n)[:, None]
    t = np.arange(n)[None, :]
    D0 = D[0].copy()
    ok = np.abs(D - D0[(t - s) % n]) <= rtol * max(float(np.abs(D).max()), 1e-300)
    return D0 if bool(ok.all()) else None


def _unit_invariant(D0: np.ndarray) -> bool:
    n = D0.size
    t = np.arange(n)
    units = [u for u in range(1, n) if math.gcd(u, n) == 1]
    scale = max(float(np.abs(D0).max()), 1e-300)
    return all(np.allclose(D0[(u * t) % n], D0, rtol=0, atol=1e-12 * scale) for u in units)


def heuristic_jumps(n: int, d: int, directed: bool, family: str) -> tuple[int, ...] | None:
    """TopoOpt's geometric jump set for the family (TotientPerms candidates + geometric rule), as
    jump classes; None when the heuristic cannot give a set of distinct classes of degree ``d``."""
    cands = h.totient_perms(n, n) if family == "coprime_circulant" else np.arange(1, n)
    fixed: tuple[int, ...] = ()
    m = d
    if not directed:
        if d % 2:
            if n % 2 or (family == "coprime_circulant" and n != 2):
                return None
            fixed = (n // 2,)
        m = d // 2
    try:
        pool = [int(c) for c in cands if c not in fixed and (directed or 2 * c != n)]
        chosen = (
            h.select_permutations(pool, m, n=n, rule=h.geometric_rule, mode="paper", directed=directed, fixed=fixed)
            if m
            else ()
        )
    except ValueError:
        return None
    out = [int(j) % n for j in chosen] + list(fixed)
    if not directed:
        out = [min(j, n - j) for j in out]
    if len(set(out)) != len(out):
        return None
    return tuple(sorted(out))


# ----------------------------------------------------------------------------------------------
# The models
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class CirculantModel:
    """A built circulant model and what decoding needs.

    ``kind``: ``"throughput"`` (source-0 flows, rotation-invariant demand), ``"mcf"`` (all sources,
    any demand), ``"aspl"`` or ``"diameter"``. ``classes[c]``/``ports[c]``: jump classes and their
    ports (``y[c]`` chooses class c); ``arcs[a]``/``arc_class[a]``: arc residues and their class.
    ``scale``: throughput in iterations/s = ``scale * lambda`` (model units: capacity 1 per link,
    demand normalised to sum 1 (per source)). ``demand0``: source-0 offsets demand (bytes) for
    ``throughput``; ``demand``: the full byte matrix for ``mcf``.
    """

    model: LinearModel
    kind: str
    n: int
    d: int
    directed: bool
    family: str
    classes: np.ndarray
    ports: np.ndarray
    arcs: np.ndarray
    arc_class: np.ndarray
    y: VarBlock
    lam: VarBlock | None = None
    f: VarBlock | None = None
    r: VarBlock | None = None
    z: VarBlock | None = None
    u: VarBlock | None = None
    hops: int = 0
    scale: float = 1.0
    demand0: np.ndarray | None = None
    demand: np.ndarray | None = None
    fixed_jump_one: bool = False
    notes: tuple[str, ...] = field(default_factory=tuple)
    incumbent_jumps: tuple[int, ...] | None = None

    def jumps_of(self, values: np.ndarray) -> tuple[int, ...]:
        """The chosen jump classes of a solution vector."""
        yv = np.asarray(values)[self.y.index]
        return tuple(int(j) for j in self.classes[yv > 0.5])

    def y_vector(self, jumps: tuple[int, ...]) -> np.ndarray:
        """0/1 vector over classes for a jump set (classes, or residues reduced to classes)."""
        n = self.n
        cls = {int(j) if self.directed else min(int(j) % n, n - int(j) % n) for j in jumps}
        return np.isin(self.classes, sorted(cls)).astype(float)


def _check_request(instance: Instance, objective: str) -> None:
    c = instance.cluster
    n, d = c.servers, c.degree
    if instance.topology_family not in ("circulant", "coprime_circulant"):
        raise InputError(
            f"the circulant model needs topology_family circulant or coprime_circulant, got {instance.topology_family}"
        )
    if n > MAX_CIRCULANT_SERVERS:
        raise UnsupportedError(
            f"{n} servers: the exact circulant model is limited to n <= {MAX_CIRCULANT_SERVERS} "
            "(its flow and reachability arrays grow as n x jump classes); use --method heuristic"
        )
    if objective not in ("throughput", "comm_time", "iteration_time", "aspl", "diameter"):
        raise UnsupportedError(f"objective {objective!r} is not supported by the circulant model")
    if instance.fixed_topology is not None:
        raise InputError("the instance fixes the topology: there is no jump set to choose")
    cls, ports = jump_classes(n, c.directed, instance.topology_family)
    fam = instance.topology_family
    if c.regular:
        # Exactly d ports: sum of a subset of `ports` (2s and at most one 1) must equal d.
        twos, ones = int((ports == 2).sum()), int((ports == 1).sum())
        if c.directed:
            ok = d <= ones
        else:
            ok = (d % 2 == 0 and d // 2 <= twos) or (d % 2 == 1 and ones >= 1 and (d - 1) // 2 <= twos)
        if not ok:
            why = ""
            if not c.directed and d % 2 == 1 and ones == 0:
                why = "an odd degree needs the jump n/2, which " + (
                    "does not exist for odd n" if n % 2 else f"is not coprime with n = {n}"
                )
            else:
                why = f"the family has only {cls.size} jump classes ({int(ports.sum())} ports)"
            raise UnsupportedError(f"no {fam} jump set on {n} servers has degree exactly {d}: {why}")


def build_circulant_model(
    instance: Instance,
    objective: str | None = None,
    *,
    formulation: str = "strong",
    integral_flows: bool = False,
    hop_limit: int | None = None,
) -> CirculantModel:
    """Build the circulant MILP of ``instance`` for ``objective`` (default: the instance's).

    Parameters
    ----------
    formulation : ``"strong"`` (counting-bound cuts, default) or ``"basic"``.
    integral_flows : ASPL and diameter: integer flow (ASPL) / binary z (diameter) columns, giving an
        all-integer model CP-SAT accepts (for a fixed jump set the ASPL LP is a shortest-path tree
        problem and z = min(y, r), so this changes no optimum).
    hop_limit : diameter only: the largest diameter the model represents (default: the smallest
        diameter known before the solve, from the heuristic set or, with the strong formulation, the
        candidate sets scored for the cuts; feasible, so the optimum is within it).
    """
    objective = objective or instance.objective
    _check_request(instance, objective)
    if formulation not in ("strong", "basic"):
        raise InputError(f"unknown circulant formulation {formulation!r}; choose strong or basic")
    strong = formulation == "strong"
    c = instance.cluster
    n, d, directed, fam = c.servers, c.degree, c.directed, instance.topology_family
    classes, ports = jump_classes(n, directed, fam)
    arcs, arc_class = _arc_classes(n, classes, directed)
    counts = counting_bound(n, d, directed, fam)
    lbdist = distance_lower_bounds(counts, n)
    common = dict(n=n, d=d, directed=directed, family=fam, classes=classes, ports=ports, arcs=arcs, arc_class=arc_class)

    if objective in _THROUGHPUT_LIKE:
        D = traffic_matrix(instance)
        D0 = rotation_offsets(D)
        if D0 is None:
            return _build_mcf(instance, D, lbdist, strong, common)
        return _build_throughput(instance, D0, lbdist, strong, common)
    if objective == "aspl":
        return _build_aspl(instance, lbdist, strong, integral_flows, common)
    return _build_diameter(instance, counts, hop_limit, strong, integral_flows, common)


def _degree_row(b: ModelBuilder, y: VarBlock, ports: np.ndarray, d: int, regular: bool) -> None:
    b.add_constraints(
        np.zeros(y.size, dtype=np.int64), y.index, ports, lb=d if regular else 0, ub=d, count=1, name="degree"
    )


def _jump_one_fixing(n: int, classes: np.ndarray, fam: str, allowed: bool) -> np.ndarray:
    lb = np.zeros(classes.size)
    if fam == "coprime_circulant" and allowed and n > 2 and classes.size and classes[0] == 1:
        lb[0] = 1.0
    return lb


# Throughput, rotation-invariant demand -------------------------------------------------------
# Data:      n servers, jump classes c with ports p_c, arc classes a (residue r_a, class c(a)),
#            D0[t] = bytes from s to s+t (any s), normalised Dn = D0 / sum(D0); capacity 1 per
#            link (bytes/s normalised by B). lb_t: counting-bound lower bound on hop distances.
# Variables: y_c in {0,1} (class c chosen); lambda >= 0 (concurrent-flow multiplier);
#            f[a, v] >= 0: source 0's flow on arc v -> v + r_a (0 on arcs into node 0).
# Constraints:
#   degree:       sum_c p_c y_c = d             (<= d when the cluster is not regular)
#   conservation: sum_a f[a, v - r_a] - sum_a f[a, v] = lambda * Dn[v]      for v = 1..n-1
#   capacity:     sum_v f[a, v] <= y_c(a)        (load of every arc of class a, by translation)
#   hops (strong): sum_{a,v} f[a, v] >= lambda * min_hops, min_hops = sum_t Dn_sorted[t] lb_t
#                 (every unit of flow to t crosses >= dist(t) >= lb arcs)
#   symmetry:     y_1 = 1 (coprime family, demand invariant under unit multipliers)
# Objective: maximise lambda; throughput (iterations/s) = lambda * B / sum(D0).
def _build_throughput(
    instance: Instance, D0: np.ndarray, lbdist: np.ndarray, strong: bool, common: dict
) -> CirculantModel:
    n, d = common["n"], common["d"]
    arcs, arc_class, classes, ports = common["arcs"], common["arc_class"], common["classes"], common["ports"]
    A = arcs.size
    total = float(D0[1:].sum())
    if total <= 0:
        raise InputError("the demand is empty")
    Dn = D0 / total
    Dn[0] = 0.0
    _size_guard(3 * A * n, n, A)
    fix_one = instance.topology_family == "coprime_circulant" and _unit_invariant(D0)
    b = ModelBuilder(name=f"circulant_throughput_n{n}_d{d}")
    y = b.add_variables(
        classes.size, lb=_jump_one_fixing(n, classes, common["family"], fix_one), ub=1, kind="binary", name="y"
    )
    min_hops = _min_weighted_hops(Dn[1:], lbdist)
    lam_ub = (d / min_hops) if min_hops > 0 else float(d)
    lam = b.add_variables(1, lb=0.0, ub=lam_ub, name="lambda")
    v = np.arange(n)
    head = (v[None, :] + arcs[:, None]) % n  # (A, n)
    f_ub = np.where(head == 0, 0.0, np.inf)
    f = b.add_variables((A, n), lb=0.0, ub=f_ub, name="f")
    _degree_row(b, y, ports, d, instance.cluster.regular)
    _conservation(b, f.index, head, np.broadcast_to(v, (A, n)), n, lam[0], Dn)
    # capacity rows: sum_v f[a, v] - y_c(a) <= 0
    rows = np.concatenate([np.repeat(np.arange(A), n), np.arange(A)])
    cols = np.concatenate([f.index.ravel(), y.index[arc_class]])
    vals = np.concatenate([np.ones(A * n), -np.ones(A)])
    b.add_constraints(rows, cols, vals, ub=np.zeros(A), name="capacity")
    notes: list[str] = []
    if fix_one:
        notes.append("jump 1 fixed (coprime family, demand invariant under unit multipliers)")
        if strong and _orbit_rows(b, y, n, classes, common["directed"]):
            notes.append("orbit representative: smallest second jump among the unit images containing 1")
    if strong:
        b.add_constraints(
            np.zeros(A * n + 1, dtype=np.int64),
            np.concatenate([f.index.ravel(), [lam[0]]]),
            np.concatenate([np.ones(A * n), [-min_hops]]),
            lb=0.0,
            count=1,
            name="hops",
        )
        if _distance_cuts(b, y, lam, instance, D0, Dn, common, fix_one):
            notes.append(
                "distance-bound cuts: lambda <= d / sum_t Dn[t] dist_J(t), maximised over the jump sets "
                "containing each class / pair of classes (one BFS per candidate set)"
            )
    b.set_objective([lam[0]], [1.0], sense="maximize")
    scale = instance.cluster.link_bytes_per_s / total
    notes = tuple(notes)
    return CirculantModel(
        model=b.build(),
        kind="throughput",
        y=y,
        lam=lam,
        f=f,
        scale=scale,
        demand0=D0,
        fixed_jump_one=fix_one,
        notes=notes,
        **common,
    )


# Valid inequalities of the throughput model ---------------------------------------------------
#: Largest number of candidate jump sets the distance-bound cuts enumerate (one BFS each, batched).
DISTANCE_CUT_LIMIT = 200_000


def _class_of(x: np.ndarray, n: int, directed: bool) -> np.ndarray:
    x = np.asarray(x) % n
    return x if directed else np.minimum(x, n - x)


def _orbit_rows(b: ModelBuilder, y: VarBlock, n: int, classes: np.ndarray, directed: bool) -> bool:
    """Symmetry breaking beyond ``y_1 = 1`` (coprime family, jump 1 fixed).

    The unit images of J that contain 1 are ``j^-1 J`` for ``j`` in ``J``. Among them keep one whose
    second-smallest class ``m(J) = min(J minus {1})`` is smallest. For that representative and every
    pair ``j != k`` of its classes (``j != 1``) the image ``j^-1 J`` contains the class of ``j^-1 k``
    (not 1), so ``m(J) <= class(j^-1 k)``: if ``y_j = y_k = 1`` then some class ``i`` with
    ``1 < i <= class(j^-1 k)`` is chosen:  ``y_j + y_k - 1 <= sum_{1 < i <= c} y_i``.
    """
    L = classes.size
    if L < 3 or classes[0] != 1:
        return False
    rows, cols, vals = [], [], []
    r = 0
    for jj in range(1, L):
        inv = pow(int(classes[jj]), -1, n)
        img = _class_of(inv * classes, n, directed)  # class of j^-1 k for every k
        for kk in range(L):
            if kk == jj:
                continue
            c = int(img[kk])
            if c == 1:
                continue
            small = [i for i in range(1, L) if classes[i] <= c]
            # y_j + y_k - sum_{1 < i <= c} y_i <= 1 ; skip rows that are implied (j or k among `small`)
            if jj in small or kk in small:
                continue
            rows += [r, r] + [r] * len(small)
            cols += [y[jj], y[kk]] + [y[i] for i in small]
            vals += [1.0, 1.0] + [-1.0] * len(small)
            r += 1
    if r:
        b.add_constraints(rows, cols, vals, ub=np.ones(r), name="orbit")
    return r > 0


def _enumerate_sets(common: dict, fix_one: bool, regular: bool) -> np.ndarray | None:
    """Class-index rows of every candidate jump set of a regular even (or directed) degree, jump 1
    first when fixed; None when not applicable or more than :data:`DISTANCE_CUT_LIMIT` sets."""
    import itertools

    d, directed, ports = common["d"], common["directed"], common["ports"]
    if not regular or (not directed and d % 2):
        return None
    usable = np.flatnonzero(ports == (1 if directed else 2))
    m = d if directed else d // 2
    free = usable[1:] if fix_one else usable
    k = m - 1 if fix_one else m
    if k < 1 or k > free.size or math.comb(free.size, k) > DISTANCE_CUT_LIMIT:
        return None
    combos = np.array(list(itertools.combinations(free.tolist(), k)), dtype=np.int64).reshape(-1, k)
    if fix_one:
        combos = np.concatenate([np.full((combos.shape[0], 1), usable[0]), combos], axis=1)
    return combos if combos.shape[0] else None


def _set_stats(common: dict, combos: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(unreachable residues, sum of distances, diameter) of each set: one BFS over residues each."""
    n, directed = common["n"], common["directed"]
    jumps = common["classes"][combos]
    coins = jumps if directed else np.concatenate([jumps, (-jumps) % n], axis=1)
    return h.circulant_stats_batch(n, coins)


def _score_cuts(
    b: ModelBuilder,
    y: VarBlock,
    expr_cols: np.ndarray,
    expr_coefs: np.ndarray,
    combos: np.ndarray,
    score: np.ndarray,
    name: str,
) -> None:
    """Valid inequalities ``E >= L + (L_c - L) y_c`` and ``E >= L + (L_ck - L)(y_c + y_k - 1)`` for an
    expression E (the objective, or minus it) that is ``>= score[J]`` for every candidate set J.

    ``L`` is the smallest score, ``L_c`` (``L_ck``) the smallest over the sets containing class c
    (classes c and k). At y_c = 1 the set contains c, so its score is >= L_c; otherwise the row
    reduces to ``E >= L``. Every feasible jump set is a candidate, so no feasible point is cut off.
    """
    L = float(score.min())
    ncls = y.size
    Lc = np.full(ncls, np.inf)
    np.minimum.at(Lc, combos.ravel(), np.repeat(score, combos.shape[1]))
    ec, ev = np.asarray(expr_cols), np.asarray(expr_coefs, dtype=float)
    rows, cols, vals, lb = [np.zeros(ec.size, dtype=np.int64)], [ec], [ev], [L]
    r = 1
    for c in np.flatnonzero(np.isfinite(Lc) & (Lc > L + 1e-12 * max(1.0, abs(L)))):
        rows.append(np.full(ec.size + 1, r))
        cols.append(np.concatenate([ec, [y[int(c)]]]))
        vals.append(np.concatenate([ev, [-(Lc[c] - L)]]))
        lb.append(L)
        r += 1
    if combos.shape[1] >= 2:
        ii, jj = np.triu_indices(combos.shape[1], 1)
        a, bb = combos[:, ii].ravel(), combos[:, jj].ravel()
        key = np.minimum(a, bb) * ncls + np.maximum(a, bb)
        Lp = np.full(ncls * ncls, np.inf)
        np.minimum.at(Lp, key, np.repeat(score, ii.size))
        for kk in np.flatnonzero(np.isfinite(Lp)):
            c1, c2 = divmod(int(kk), ncls)
            if Lp[kk] <= max(Lc[c1], Lc[c2]) + 1e-12 * max(1.0, abs(L)):
                continue  # implied by a single-class row
            delta = Lp[kk] - L
            rows.append(np.full(ec.size + 2, r))
            cols.append(np.concatenate([ec, [y[c1], y[c2]]]))
            vals.append(np.concatenate([ev, [-delta, -delta]]))
            lb.append(L - delta)
            r += 1
    b.add_constraints(np.concatenate(rows), np.concatenate(cols), np.concatenate(vals), lb=np.array(lb), name=name)


def _distance_cuts(
    b: ModelBuilder,
    y: VarBlock,
    lam: VarBlock,
    instance: Instance,
    D0: np.ndarray,
    Dn: np.ndarray,
    common: dict,
    fix_one: bool,
) -> bool:
    """Cuts from the distance bound ``lambda_J <= d / sum_t Dn[t] dist_J(t)`` (capacity 1 per arc,
    d arcs per node, every unit of flow to t crosses >= dist_J(t) arcs), for uniform demand:
    ``-lambda >= -U_J`` in the form of :func:`_score_cuts`."""
    nz = D0[1:]
    if not np.allclose(nz, nz[0], rtol=1e-12, atol=0):
        return False
    combos = _enumerate_sets(common, fix_one, instance.cluster.regular)
    if combos is None:
        return False
    unreach, total, _ = _set_stats(common, combos)
    bound = np.where(unreach > 0, 0.0, common["d"] / np.maximum(total * float(Dn[1]), 1e-300))
    _score_cuts(b, y, np.array([lam[0]]), np.array([-1.0]), combos, -bound, "distance_cuts")
    return True


def _conservation(
    b: ModelBuilder,
    fidx: np.ndarray,
    head: np.ndarray,
    tail: np.ndarray,
    n: int,
    lam_col: int,
    Dn: np.ndarray,
    source_rows: np.ndarray | None = None,
) -> None:
    """Rows ``in - out - lambda * Dn[v] = 0`` for v != source (one source) or, with
    ``source_rows`` (the source of each flow column), per (source, v)."""
    fi = fidx.ravel()
    hd, tl = head.ravel(), tail.ravel()
    if source_rows is None:
        keep_in, keep_out = hd != 0, tl != 0
        r_in, r_out = hd[keep_in] - 1, tl[keep_out] - 1
        rows = np.concatenate([r_in, r_out, np.arange(n - 1)])
        cols = np.concatenate([fi[keep_in], fi[keep_out], np.full(n - 1, lam_col)])
        vals = np.concatenate([np.ones(r_in.size), -np.ones(r_out.size), -Dn[1:]])
        b.add_constraints(rows, cols, vals, lb=np.zeros(n - 1), ub=np.zeros(n - 1), name="conservation")
        return
    src = source_rows.ravel()
    keep_in, keep_out = hd != src, tl != src
    r_in, r_out = src[keep_in] * n + hd[keep_in], src[keep_out] * n + tl[keep_out]
    s_all, t_all = np.divmod(np.arange(n * n), n)
    off = s_all != t_all
    rows = np.concatenate([r_in, r_out, np.arange(n * n)[off]])
    cols = np.concatenate([fi[keep_in], fi[keep_out], np.full(int(off.sum()), lam_col)])
    vals = np.concatenate([np.ones(r_in.size), -np.ones(r_out.size), -Dn.ravel()[off]])
    # rows (s, s) stay empty and free; they keep the indexing simple
    lb = np.where(off, 0.0, -np.inf)
    ub = np.where(off, 0.0, np.inf)
    b.add_constraints(rows, cols, vals, lb=lb, ub=ub, name="conservation")


def _size_guard(nnz: int, n: int, A: int) -> None:
    if nnz > MAX_MODEL_NONZEROS:
        raise UnsupportedError(
            f"the circulant model for n = {n} with {A} arc classes would have about {nnz:,} non-zeros "
            f"(limit {MAX_MODEL_NONZEROS:,}): too large; use the coprime family, fewer servers, or --method heuristic"
        )


# Throughput, any demand (full multi-commodity flow over the chosen jumps) ----------------------
# Data:      D[s, t] bytes, normalised Dn = D / max_s sum_t D[s, t]; capacity 1 per link.
# Variables: y_c binary; lambda >= 0; f[s, a, v] >= 0: flow of source s on arc v -> v + r_a.
# Constraints:
#   degree:       sum_c p_c y_c = d (<= d)
#   conservation: sum_a f[s, a, v - r_a] - sum_a f[s, a, v] = lambda * Dn[s, v]   (v != s)
#   capacity:     sum_s f[s, a, v] <= y_c(a)      for every arc (a, v)  (no translation symmetry)
#   hops (strong): sum f >= lambda * sum_s (rearrangement bound of row s)
# Objective: maximise lambda.
def _build_mcf(instance: Instance, D: np.ndarray, lbdist: np.ndarray, strong: bool, common: dict) -> CirculantModel:
    n, d = common["n"], common["d"]
    arcs, arc_class, classes, ports = common["arcs"], common["arc_class"], common["classes"], common["ports"]
    A = arcs.size
    _size_guard(4 * n * A * n, n, A)
    rowsum = D.sum(axis=1)
    norm = float(rowsum.max())
    Dn = D / norm
    np.fill_diagonal(Dn, 0.0)
    b = ModelBuilder(name=f"circulant_mcf_n{n}_d{d}")
    y = b.add_variables(classes.size, ub=1, kind="binary", name="y")
    min_hops = sum(_min_weighted_hops(np.delete(Dn[s], s), lbdist) for s in range(n))
    lam_ub = (d * n / min_hops) if min_hops > 0 else float(d * n)
    lam = b.add_variables(1, lb=0.0, ub=lam_ub, name="lambda")
    v = np.arange(n)
    head = (v[None, None, :] + arcs[None, :, None]) % n + np.zeros((n, 1, 1), dtype=np.int64)  # (n, A, n)
    tail = np.broadcast_to(v[None, None, :], (n, A, n))
    src = np.broadcast_to(np.arange(n)[:, None, None], (n, A, n))
    f_ub = np.where(head == src, 0.0, np.inf)
    f = b.add_variables((n, A, n), lb=0.0, ub=f_ub, name="f")
    _degree_row(b, y, ports, d, instance.cluster.regular)
    _conservation(b, f.index, head, tail, n, lam[0], Dn, source_rows=src)
    # capacity per arc (a, v): sum_s f[s, a, v] - y_c(a) <= 0
    arc_row = np.broadcast_to(np.arange(A * n).reshape(1, A, n), (n, A, n)).ravel()
    rows = np.concatenate([arc_row, np.arange(A * n)])
    cols = np.concatenate([f.index.ravel(), np.repeat(y.index[arc_class], n)])
    vals = np.concatenate([np.ones(n * A * n), -np.ones(A * n)])
    b.add_constraints(rows, cols, vals, ub=np.zeros(A * n), name="capacity")
    if strong:
        b.add_constraints(
            np.zeros(f.size + 1, dtype=np.int64),
            np.concatenate([f.index.ravel(), [lam[0]]]),
            np.concatenate([np.ones(f.size), [-min_hops]]),
            lb=0.0,
            count=1,
            name="hops",
        )
    b.set_objective([lam[0]], [1.0], sense="maximize")
    scale = instance.cluster.link_bytes_per_s / norm
    return CirculantModel(
        model=b.build(),
        kind="mcf",
        y=y,
        lam=lam,
        f=f,
        scale=scale,
        demand=D,
        notes=("demand is not rotation-invariant: full multi-commodity flow over all sources",),
        **common,
    )


# ASPL ----------------------------------------------------------------------------------------
# Data:      unit demand from node 0 to every v != 0 (by vertex-transitivity the distances from 0
#            are the distances from every node); lb_t counting-bound distance lower bounds.
# Variables: y_c binary; f[a, v] >= 0 (integer with integral_flows): source-0 flow on v -> v + r_a.
# Constraints:
#   degree:       sum_c p_c y_c = d (<= d)
#   conservation: in(v) - out(v) = 1                        for v = 1..n-1
#   gating:       f[a, v] <= (n - 1) * y_c(a)               (no capacity: only existence)
#   hops (strong): sum f >= sum_t lb_t
#   symmetry:     y_1 = 1 in the coprime family (ASPL is an isomorphism invariant)
# Objective: minimise sum f / (n - 1) (for a fixed jump set the optimum is a shortest-path tree,
#            so the value is the mean distance = ASPL of the circulant).
def _build_aspl(instance: Instance, lbdist: np.ndarray, strong: bool, integral: bool, common: dict) -> CirculantModel:
    n, d = common["n"], common["d"]
    arcs, arc_class, classes, ports = common["arcs"], common["arc_class"], common["classes"], common["ports"]
    A = arcs.size
    _size_guard(4 * A * n, n, A)
    b = ModelBuilder(name=f"circulant_aspl_n{n}_d{d}")
    y = b.add_variables(
        classes.size, lb=_jump_one_fixing(n, classes, common["family"], True), ub=1, kind="binary", name="y"
    )
    v = np.arange(n)
    head = (v[None, :] + arcs[:, None]) % n
    f_ub = np.where(head == 0, 0.0, n - 1.0)
    f = b.add_variables((A, n), lb=0.0, ub=f_ub, kind="integer" if integral else "continuous", name="f")
    _degree_row(b, y, ports, d, instance.cluster.regular)
    # conservation without lambda: in - out = 1
    fi, hd, tl = f.index.ravel(), head.ravel(), np.broadcast_to(v, (A, n)).ravel()
    keep_in, keep_out = hd != 0, tl != 0
    rows = np.concatenate([hd[keep_in] - 1, tl[keep_out] - 1])
    cols = np.concatenate([fi[keep_in], fi[keep_out]])
    vals = np.concatenate([np.ones(int(keep_in.sum())), -np.ones(int(keep_out.sum()))])
    b.add_constraints(rows, cols, vals, lb=np.ones(n - 1), ub=np.ones(n - 1), name="conservation")
    # gating: f[a, v] - (n-1) y_c(a) <= 0
    live = np.flatnonzero(hd != 0)
    k = live.size
    rows = np.concatenate([np.arange(k), np.arange(k)])
    cols = np.concatenate([fi[live], y.index[np.repeat(arc_class, n)[live]]])
    vals = np.concatenate([np.ones(k), np.full(k, -(n - 1.0))])
    b.add_constraints(rows, cols, vals, ub=np.zeros(k), name="gating")
    fix_one = common["family"] == "coprime_circulant" and n > 2
    notes = _graph_cuts(b, y, fi, np.full(fi.size, 1.0 / (n - 1)), "aspl", instance, common, fix_one, strong)
    if strong:
        b.add_constraints(np.zeros(f.size, dtype=np.int64), fi, 1.0, lb=float(lbdist.sum()), count=1, name="hops")
    b.set_objective(fi, np.full(fi.size, 1.0 / (n - 1)), sense="minimize")
    return CirculantModel(model=b.build(), kind="aspl", y=y, f=f, notes=tuple(notes), fixed_jump_one=fix_one, **common)


def _graph_cuts(
    b: ModelBuilder,
    y: VarBlock,
    expr_cols: np.ndarray,
    expr_coefs: np.ndarray,
    what: str,
    instance: Instance,
    common: dict,
    fix_one: bool,
    strong: bool,
    cap: float | None = None,
    shift: float = 0.0,
) -> list[str]:
    """Orbit rows and score cuts (ASPL or diameter of every candidate set) for the graph objectives:
    ``expr >= score(J) + shift`` for the chosen set J (the diameter objective is ``H - sum u``, so
    ``-sum u >= diam - H``). Sets with a diameter above ``H`` (or disconnected) score ``cap``: the
    model cannot pick them anyway."""
    notes = ["jump 1 fixed (coprime family; ASPL and diameter are isomorphism invariants)"] if fix_one else []
    if not strong:
        return notes
    n = common["n"]
    if fix_one and _orbit_rows(b, y, n, common["classes"], common["directed"]):
        notes.append("orbit representative: smallest second jump among the unit images containing 1")
    combos = _enumerate_sets(common, fix_one, instance.cluster.regular)
    if combos is not None:
        unreach, total, diam = _set_stats(common, combos)
        worst = float(n) if cap is None else cap
        score = np.where(unreach > 0, worst, (total / (n - 1)) if what == "aspl" else np.minimum(diam, worst)).astype(
            float
        )
        _score_cuts(b, y, expr_cols, expr_coefs, combos, score + shift, f"{what}_cuts")
        notes.append(
            f"{what} cuts: objective >= the best {what} over the candidate sets containing each class / pair "
            f"of classes ({combos.shape[0]} sets scored by one BFS each)"
        )
    return notes


# Diameter ------------------------------------------------------------------------------------
# Data:      H = hop limit: the smallest diameter known before the solve (the heuristic set's, or with
#            the strong formulation the best candidate set scored by BFS while generating the cuts);
#            a feasible value, so the optimum is <= H;
#            N_h counting bound on residues within h hops.
# Variables: y_c binary; r[h, v] binary (v reachable from 0 within h hops), h = 0..H;
#            z[h, a, v] in [0, 1] (v reached at hop h through arc class a: r[h-1, v - r_a] and y_c(a));
#            continuous suffices (y, r binary make min(y, r) integral); binary with integral_flows
#            so that the model is all-integer for CP-SAT;
#            u[h] binary (every residue within h hops, i.e. diameter <= h).
# Constraints:
#   degree:   sum_c p_c y_c = d (<= d)
#   start:    r[0, 0] = 1, r[0, v] = 0 (v != 0);  r[h, 0] = 1
#   reach:    r[h, v] <= r[h-1, v] + sum_a z[h, a, v]          h = 1..H
#   link:     z[h, a, v] <= y_c(a);  z[h, a, v] <= r[h-1, v - r_a]
#   cover:    u[h] <= r[h, v] for all v;  u[h] <= u[h+1];  u[H] = 1;  u[0] = 0
#   counting: sum_v r[h, v] <= N_h
#   symmetry: y_1 = 1 in the coprime family
# Objective: minimise H - sum_{h<H} u[h]  (= min{h : u[h] = 1} = the diameter).
def _build_diameter(
    instance: Instance, counts: np.ndarray, hop_limit: int | None, strong: bool, integral: bool, common: dict
) -> CirculantModel:
    n, d, directed = common["n"], common["d"], common["directed"]
    arcs, arc_class, classes, ports = common["arcs"], common["arc_class"], common["classes"], common["ports"]
    A = arcs.size
    scored: tuple[int, ...] | None = None
    if hop_limit is None:
        hj = heuristic_jumps(n, d, directed, common["family"])
        if hj is not None:
            dist = h.circulant_distances(n, h.coin_set(n, hj, directed))
            hop_limit = int(dist.max()) if (dist >= 0).all() else None
        if strong:
            fix = common["family"] == "coprime_circulant" and n > 2
            combos = _enumerate_sets(common, fix, instance.cluster.regular)
            if combos is not None:
                unreach, _, diam = _set_stats(common, combos)
                if (unreach == 0).any():
                    ok = np.flatnonzero(unreach == 0)
                    i = int(ok[np.argmin(diam[ok])])
                    best = int(diam[i])
                    if hop_limit is None or best < hop_limit:
                        hop_limit = best
                        scored = tuple(int(j) for j in common["classes"][combos[i]])
                        if fix:
                            scored = orbit_representative(n, scored, directed)
        if hop_limit is None:
            hop_limit = n - 1  # a connected circulant has diameter < n
    H = max(1, int(hop_limit))
    _size_guard(3 * H * A * n, n, A)
    incumbent = scored
    b = ModelBuilder(name=f"circulant_diameter_n{n}_d{d}_H{H}")
    y = b.add_variables(
        classes.size, lb=_jump_one_fixing(n, classes, common["family"], True), ub=1, kind="binary", name="y"
    )
    r_lb = np.zeros((H + 1, n))
    r_ub = np.ones((H + 1, n))
    r_lb[:, 0] = 1.0
    r_ub[0, 1:] = 0.0
    r = b.add_variables((H + 1, n), lb=r_lb, ub=r_ub, kind="binary", name="r")
    z = b.add_variables((H, A, n), ub=1, kind="binary" if integral else "continuous", name="z")
    u_lb = np.zeros(H + 1)
    u_ub = np.ones(H + 1)
    u_lb[H] = 1.0
    u_ub[0] = 0.0 if n > 1 else 1.0
    u = b.add_variables(H + 1, lb=u_lb, ub=u_ub, kind="binary", name="u")
    _degree_row(b, y, ports, d, instance.cluster.regular)
    hh, aa, vv = np.meshgrid(np.arange(1, H + 1), np.arange(A), np.arange(n), indexing="ij")  # z[h-1] is hop h
    zi = z.index.ravel()
    # reach: r[h, v] - r[h-1, v] - sum_a z[h, a, v] <= 0, row per (h-1, v)
    hv = np.arange(H * n)
    hv_h, hv_v = np.divmod(hv, n)
    rows = np.concatenate([hv, hv, ((hh - 1) * n + vv).ravel()])
    cols = np.concatenate([r.index[hv_h + 1, hv_v], r.index[hv_h, hv_v], zi])
    vals = np.concatenate([np.ones(H * n), -np.ones(H * n), -np.ones(zi.size)])
    b.add_constraints(rows, cols, vals, ub=np.zeros(H * n), name="reach")
    # link to y and to the previous level
    m = zi.size
    rows = np.concatenate([np.arange(m), np.arange(m)])
    b.add_constraints(
        rows,
        np.concatenate([zi, y.index[arc_class[aa.ravel()]]]),
        np.concatenate([np.ones(m), -np.ones(m)]),
        ub=np.zeros(m),
        name="z_le_y",
    )
    prev = r.index[(hh - 1).ravel(), ((vv - arcs[aa]) % n).ravel()]
    b.add_constraints(
        rows, np.concatenate([zi, prev]), np.concatenate([np.ones(m), -np.ones(m)]), ub=np.zeros(m), name="z_le_r"
    )
    # cover: u[h] - r[h, v] <= 0
    hv2 = np.arange((H + 1) * n)
    h2, v2 = np.divmod(hv2, n)
    b.add_constraints(
        np.concatenate([hv2, hv2]),
        np.concatenate([u.index[h2], r.index[h2, v2]]),
        np.concatenate([np.ones(hv2.size), -np.ones(hv2.size)]),
        ub=np.zeros(hv2.size),
        name="cover",
    )
    if H >= 1:
        k = np.arange(H)
        b.add_constraints(
            np.concatenate([k, k]),
            np.concatenate([u.index[k], u.index[k + 1]]),
            np.concatenate([np.ones(H), -np.ones(H)]),
            ub=np.zeros(H),
            name="u_monotone",
        )
    cnt = counts[: H + 1] if counts.size > H else np.concatenate([counts, np.full(H + 1 - counts.size, n)])
    b.add_constraints(np.repeat(np.arange(H + 1), n), r.index.ravel(), 1.0, ub=cnt.astype(float), name="counting")
    fix_one = common["family"] == "coprime_circulant" and n > 2
    # objective expression H - sum u >= score  <=>  -sum u >= score - H: shift the scores by -H
    notes = _graph_cuts(
        b, y, u.index[:H], -np.ones(H), "diameter", instance, common, fix_one, strong, cap=float(H + 1), shift=-float(H)
    )
    b.set_objective(u.index[:H], -np.ones(H), sense="minimize", constant=float(H))
    if incumbent is not None:
        notes.append(
            f"hop limit H = {H} from the BFS-scored candidate set {list(incumbent)} (also the warm start "
            "when the heuristic set's diameter exceeds H)"
        )
    return CirculantModel(
        model=b.build(),
        kind="diameter",
        y=y,
        r=r,
        z=z,
        u=u,
        hops=H,
        notes=tuple(notes),
        fixed_jump_one=fix_one,
        incumbent_jumps=incumbent,
        **common,
    )


# ----------------------------------------------------------------------------------------------
# Decoding
# ----------------------------------------------------------------------------------------------
def decompose_offset_flow(
    n: int, arcs: np.ndarray, f: np.ndarray, demand: np.ndarray, tol: float = 1e-9
) -> list[tuple[int, list[int], float]]:
    """Split source 0's arc flow ``f[a, v]`` (arc ``v -> v + arcs[a]``) into jump sequences.

    Returns ``[(t, [jumps], amount)]`` delivering ``demand[t]`` to each t; flow cycles are cancelled.
    Arc residues are distinct, so the node paths of the generic decomposition map back to jumps.
    """
    flow = np.zeros((n, n))
    v = np.arange(n)
    for a, jump in enumerate(np.asarray(arcs, dtype=np.int64)):
        flow[v, (v + jump) % n] += np.where(f[a] > 0, f[a], 0.0)
    return [
        (path[-1], [int((b - a) % n) for a, b in zip(path, path[1:])], amount)
        for path, amount in decompose_source_flow(flow, 0, demand, tol)
    ]


def _routes_from_pieces(n: int, pieces: list[tuple[int, list[int], float]], demand: np.ndarray) -> OffsetRoutes:
    """Offset routes whose fractions per offset sum to exactly 1; raises if an offset is missing."""
    need = np.flatnonzero(demand[1:] > 0) + 1
    got = np.zeros(n)
    merged: dict[tuple[int, tuple[int, ...]], float] = {}
    for t, js, amt in pieces:
        got[t] += amt
        key = (t, tuple(js))
        merged[key] = merged.get(key, 0.0) + amt
    missing = [int(t) for t in need if got[t] <= 0]
    if missing:
        raise RuntimeError(f"flow decomposition left offsets {missing[:5]} without a route")
    rows = [(t, list(js), amt / got[t]) for (t, js), amt in sorted(merged.items()) if demand[t] > 0]
    return OffsetRoutes.from_lists(rows)


def _route_loads(n: int, routes: OffsetRoutes, D0: np.ndarray) -> tuple[np.ndarray, int]:
    """Load (bytes) of each arc residue class and longest used route, for translation-invariant routes."""
    load = np.zeros(n)
    hops = 0
    for o, js, fr in routes.to_lists():
        amount = fr * D0[o]
        if amount <= 0 or fr <= 0:
            continue
        np.add.at(load, np.asarray(js) % n, amount)
        hops = max(hops, len(js))
    return load, hops


def _fixed_y_lp(cm: CirculantModel, yv: np.ndarray, objective: str, lam_lb: float | None = None) -> np.ndarray | None:
    """Solve the model's LP with y fixed (HiGHS): ``"max_lambda"`` (warm start) or ``"min_hops"``
    (lexicographic second stage: keep lambda >= lam_lb, minimise total flow = total hops)."""
    m = cm.model
    lo, hi = m.col_lower.copy(), m.col_upper.copy()
    lo[cm.y.index] = yv
    hi[cm.y.index] = yv
    kind = np.zeros_like(m.col_kind)
    obj, sense = m.objective, m.sense
    if objective == "min_hops":
        if cm.lam is not None and lam_lb is not None:
            lo[cm.lam.index] = min(lam_lb, hi[cm.lam.index][0])
        obj = np.zeros(m.num_vars)
        obj[cm.f.index.ravel()] = 1.0
        sense = "minimize"
    lp = dataclasses.replace(
        m, col_lower=lo, col_upper=hi, col_kind=kind, objective=obj, objective_offset=0.0, sense=sense
    )
    res = solver_solve(lp, backend="highs")
    if res.status is not SolveStatus.OPTIMAL or res.values is None:
        return None
    vals = res.values.copy()
    vals[cm.y.index] = yv
    if m.col_kind.any():  # integer flows (ASPL for CP-SAT): an LP vertex of a tree problem is integral
        ints = m.integrality
        vals[ints] = np.round(vals[ints])
    return vals


def _warm_start(cm: CirculantModel, instance: Instance) -> tuple[np.ndarray | None, tuple[int, ...] | None]:
    jumps = heuristic_jumps(cm.n, cm.d, cm.directed, cm.family)
    if jumps is None:
        return None, None
    if cm.fixed_jump_one:
        # jump 1 fixed (and, with the strong formulation, orbit rows): start from the isomorphic
        # representative the model keeps
        jumps = orbit_representative(cm.n, jumps, cm.directed)
    yv = cm.y_vector(jumps)
    if not ((yv >= cm.model.col_lower[cm.y.index]) & (yv <= cm.model.col_upper[cm.y.index])).all():
        return None, None
    if cm.kind == "diameter":
        n, H = cm.n, cm.hops
        dist = h.circulant_distances(n, h.coin_set(n, jumps, cm.directed))
        if ((dist < 0).any() or dist.max() > H) and cm.incumbent_jumps is not None:
            jumps = cm.incumbent_jumps
            yv = cm.y_vector(jumps)
            dist = h.circulant_distances(n, h.coin_set(n, jumps, cm.directed))
        if (dist < 0).any() or dist.max() > H:
            return None, jumps
        x = np.zeros(cm.model.num_vars)
        x[cm.y.index] = yv
        hr = np.arange(H + 1)[:, None]
        rv = (dist[None, :] <= hr).astype(float)
        x[cm.r.index.ravel()] = rv.ravel()
        v = np.arange(n)
        zv = (yv[cm.arc_class][None, :, None] > 0.5) & (
            np.take(rv[:-1], (v[None, :] - cm.arcs[:, None]) % n, axis=1) > 0.5
        )
        x[cm.z.index.ravel()] = zv.astype(float).ravel()
        x[cm.u.index] = (np.arange(H + 1) >= dist.max()).astype(float)
        return x, jumps
    vals = _fixed_y_lp(cm, yv, "max_lambda" if cm.lam is not None else "plain")
    return vals, jumps


def orbit_representative(n: int, jumps: tuple[int, ...], directed: bool = False) -> tuple[int, ...]:
    """The lexicographically smallest sorted class set among the unit images ``j^-1 J`` (j in J, a
    unit): isomorphic to J, contains 1, and satisfies the orbit rows (its second jump is minimal).
    Sets with a non-unit jump are returned unchanged (as sorted classes)."""
    cls = np.array(sorted({int(j) % n if directed else min(int(j) % n, n - int(j) % n) for j in jumps}), dtype=np.int64)
    best = tuple(int(c) for c in cls)
    if not all(math.gcd(int(j), n) == 1 for j in cls):
        return best
    for j in cls:
        img = tuple(sorted(int(c) for c in _class_of(pow(int(j), -1, n) * cls, n, directed)))
        if img < best or best[0] != 1:
            best = img
    return best


def solve_circulant(instance: Instance, options: ExactOptions | None = None) -> Solution:
    """Choose the jump set exactly (see the module docstring) and return a :class:`Solution`.

    ``objective`` is the evaluator's value of the returned solution (throughput with the model's
    own routing; for ``comm_time``/``iteration_time`` the MILP maximises throughput, i.e. minimises
    the bandwidth term, and the objective is ``1/throughput + alpha * hops`` of the longest route:
    see ``details``); ``bound`` is the solver's proven bound in the same units.
    """
    options = options or ExactOptions()
    started = time.perf_counter()
    objective = instance.objective
    _check_request(instance, objective)
    integral = options.backend == "cpsat" and objective in ("aspl", "diameter")
    check_backend(options, continuous=not integral)
    formulation = options.formulation or "strong"
    cm = build_circulant_model(instance, objective, formulation=formulation, integral_flows=integral)
    ws, ws_jumps = (None, None)
    if options.warm_start == "heuristic":
        ws, ws_jumps = _warm_start(cm, instance)
    elif options.warm_start not in (None, "none"):
        ws, ws_jumps = _warm_start_from_file(cm, options.warm_start)
    result = run_model(cm.model, options, ws)
    details: dict[str, Any] = {
        "model": cm.kind,
        "formulation": formulation,
        "family": cm.family,
        "columns": cm.model.num_vars,
        "rows": cm.model.num_rows,
        "nonzeros": cm.model.num_nonzeros,
        "warm_start_jumps": list(ws_jumps) if ws_jumps is not None else None,
        "solver_status": solution_status(result),
        "solver_message": result.message,
        "notes": list(cm.notes),
    }
    status = solution_status(result)
    if result.values is None or status not in ("optimal", "feasible"):
        return Solution(
            status=status if status != "optimal" else "no_solution",
            method="exact",
            topology=None,
            backend=result.backend,
            wall_time_s=time.perf_counter() - started,
            details=details,
        )
    jumps = cm.jumps_of(result.values)

    x = h.circulant_matrix(cm.n, jumps, cm.directed)
    topo = Topology(x, jumps)
    bound = result.bound
    if cm.kind in ("aspl", "diameter"):
        dist, routes = h.coin_change_mod(cm.n, jumps, directed=cm.directed)
        if (dist < 0).any():
            raise RuntimeError("the model chose a disconnected jump set")  # conservation forbids it
        value = float(dist[1:].sum() / (cm.n - 1)) if cm.kind == "aspl" else float(dist.max())
        details["milp_objective"] = result.objective
        gap = _gap(value, bound)
        st = status if not (status == "optimal" and gap is not None and gap > _tol(options)) else "feasible"
        return Solution(
            status=st,
            method="exact",
            topology=topo,
            routing=Routing(offset_routes=routes),
            objective=value,
            bound=bound,
            gap=gap,
            backend=result.backend,
            wall_time_s=time.perf_counter() - started,
            details=details,
        )
    # throughput-like: second stage (same y, lambda kept) minimising total hops, then decompose
    yv = cm.y_vector(jumps)
    lam_star = float(result.values[cm.lam.index][0])
    vals = _fixed_y_lp(cm, yv, "min_hops", lam_lb=lam_star * (1 - 1e-9))
    if vals is None:
        vals = result.values
        details["notes"].append("second-stage hop minimisation failed; routes decomposed from the MILP flows")
    routing, lam_routes, max_hops = _decode_routes(cm, vals)
    B = instance.cluster.link_bytes_per_s
    details["milp_lambda_normalised"] = lam_star
    details["milp_throughput"] = lam_star * cm.scale
    thr = lam_routes
    thr_bound = None if bound is None else bound * cm.scale
    if objective == "throughput":
        value, bnd = thr, thr_bound
    else:
        alpha = instance.cluster.hop_latency_s
        value = 1.0 / thr + alpha * max_hops
        h_lb = _latency_hop_lower_bound(cm)
        bnd = None if thr_bound is None or thr_bound <= 0 else 1.0 / thr_bound + alpha * h_lb
        details["objective_note"] = (
            f"the MILP maximises throughput (minimises the bandwidth term 1/lambda); {objective} adds the latency "
            f"term alpha * hops of the longest route ({max_hops} hops). The objective is the evaluator's {objective} of "
            f"this solution; the bound is 1/throughput_bound + alpha * {h_lb} (a hop lower bound), so 'optimal' is "
            "claimed only when the two meet."
        )
    gap = _gap(value, bnd)
    st = status
    if st == "optimal" and (gap is None or gap > _tol(options)):
        st = "feasible"
    details["link_bytes_per_s"] = B
    return Solution(
        status=st,
        method="exact",
        topology=topo,
        routing=routing,
        objective=value,
        bound=bnd,
        gap=gap,
        backend=result.backend,
        wall_time_s=time.perf_counter() - started,
        details=details,
    )


def _tol(options: ExactOptions) -> float:
    return max(options.gap if options.gap is not None else 1e-4, 1e-9) * (1 + 1e-9) + 1e-12


def _gap(value: float | None, bound: float | None) -> float | None:
    if value is None or bound is None or not (math.isfinite(value) and math.isfinite(bound)):
        return None
    diff = abs(value - bound)
    if diff <= 1e-12 * max(abs(value), abs(bound), 1.0):
        return 0.0
    return diff / abs(value) if value else math.inf


def _latency_hop_lower_bound(cm: CirculantModel) -> int:
    """Fewest hops the longest demanded route can have: covering the demanded offsets needs
    ``N_h - 1 >= #offsets`` (counting bound)."""
    if cm.kind == "throughput":
        k = int((cm.demand0[1:] > 0).sum())
    else:
        D = cm.demand
        k = int(max(((D[s] > 0).sum() - (D[s, s] > 0)) for s in range(cm.n)))
    counts = counting_bound(cm.n, cm.d, cm.directed, cm.family)
    return int(np.searchsorted(counts - 1, k, side="left")) if k else 0


def _decode_routes(cm: CirculantModel, vals: np.ndarray) -> tuple[Routing, float, int]:
    """Routing from the flows; returns (routing, throughput of that routing in iterations/s, max hops)."""
    n = cm.n
    lam = float(vals[cm.lam.index][0])
    if cm.kind == "throughput":
        total = float(cm.demand0[1:].sum())
        Dn = cm.demand0 / total
        f = vals[cm.f.index]
        pieces = decompose_offset_flow(n, cm.arcs, f, lam * Dn)
        routes = _routes_from_pieces(n, pieces, cm.demand0)
        load, hops = _route_loads(n, routes, cm.demand0)
        thr = _thr(load, cm)
        return Routing(offset_routes=routes), thr, hops
    # mcf: per-source explicit paths
    D = cm.demand
    norm = float(D.sum(axis=1).max())
    f = vals[cm.f.index]  # (n, A, n)
    plist: list[tuple[list[int], float]] = []
    load = np.zeros((n, n))
    hops = 0
    for s in range(n):
        need = lam * D[s] / norm
        need[s] = 0.0
        if not need.any():
            continue
        fs = f[s]
        # relabel so that s is node 0
        shifted = np.roll(fs, -s, axis=1)
        pieces = decompose_offset_flow(n, cm.arcs, shifted, np.roll(need, -s))
        got = np.zeros(n)
        for t, _, amt in pieces:
            got[t] += amt
        for t, js, amt in pieces:
            nodes = [s]
            for j in js:
                nodes.append((nodes[-1] + j) % n)
            plist.append((nodes, amt / got[t]))
        missing = np.flatnonzero((np.roll(need, -s) > 0) & (got <= 0))
        if missing.size:
            raise RuntimeError(f"flow decomposition left pair {s}->{(s + int(missing[0])) % n} without a route")
    paths = PathSet.from_lists(plist)
    for nodes, fr in plist:
        amount = fr * D[nodes[0], nodes[-1]]
        for a_, b_ in zip(nodes, nodes[1:]):
            load[a_, b_] += amount
        hops = max(hops, len(nodes) - 1)
    # capacity of arc (i, j): B * X[i, j] = B (one link per arc of a chosen class)
    thr = cm.scale * norm / float(load.max()) if load.max() > 0 else math.inf
    return Routing(paths=paths), thr, hops


def _thr(load: np.ndarray, cm: CirculantModel) -> float:
    """Throughput (iterations/s) of per-arc-class byte loads with one link (B bytes/s) per arc."""
    B = cm.scale * float(cm.demand0[1:].sum())
    mx = float(load.max())
    return B / mx if mx > 0 else math.inf


def _warm_start_from_file(cm: CirculantModel, path: str) -> tuple[np.ndarray | None, tuple[int, ...] | None]:
    sol = load_solution(path, directed=cm.directed)
    if sol.topology is None or sol.topology.jumps is None:
        raise InputError(f"{path}: the warm-start solution states no jump set")
    jumps = tuple(sol.topology.jumps)
    yv = cm.y_vector(orbit_representative(cm.n, jumps, cm.directed) if cm.fixed_jump_one else jumps)
    if cm.kind == "diameter":
        return {int(c): float(v) for c, v in zip(cm.y.index, yv)}, tuple(sol.topology.jumps)  # type: ignore[return-value]
    return _fixed_y_lp(cm, yv, "max_lambda"), tuple(sol.topology.jumps)


def jump_set_throughput(instance: Instance, jumps: tuple[int, ...]) -> float:
    """Max-concurrent-flow throughput (iterations/s) of one given jump set: the model's LP with y fixed
    (by vertex-transitivity, source 0's flows suffice for a rotation-invariant demand; the full
    multi-commodity flow otherwise). Equal to the evaluator's ``routing="optimal"`` value, at a
    fraction of its cost for large n."""
    cm = build_circulant_model(instance, "throughput", formulation="basic")
    vals = _fixed_y_lp(cm, cm.y_vector(tuple(jumps)), "max_lambda")
    if vals is None:
        raise RuntimeError("the throughput LP of the jump set did not solve")
    return float(vals[cm.lam.index][0]) * cm.scale
