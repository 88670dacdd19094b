"""SelectPermutations: choose ``m`` ring jumps out of the TotientPerms candidates (docs/methods/heuristic.md).

Rules are plain functions with one signature (networkx ``flow_func`` style)::

    rule(candidates, m, *, n, directed, fixed, seed) -> tuple[int, ...]

* :func:`geometric_rule` - the authors' ``choose_n_geo`` (the rule TopoOpt ships).
* :func:`best_rule` - minimise the mean hop count (ASPL), then the diameter, of the circulant made
  by the picked jumps plus ``fixed`` jumps; exact (exhaustive up to the multiplier symmetry) when the
  search space is small, seeded swap local search beyond.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from math import comb, gcd

import numpy as np

from topoopt_ilp.heuristic.circulant import circulant_stats_batch

__all__ = [
    "SelectRule",
    "select_permutations",
    "geometric_rule",
    "best_rule",
    "jump_set_score",
    "canonical_jump_sets",
    "DEFAULT_RULE",
]

SelectRule = Callable[..., tuple[int, ...]]


def select_permutations(
    candidates: Sequence[int] | np.ndarray,
    m: int,
    *,
    n: int,
    rule: SelectRule | None = None,
    mode: str = "paper",
    directed: bool = False,
    fixed: Sequence[int] = (),
    seed: int = 0,
) -> tuple[int, ...]:
    """Pick ``m`` ring jumps for one group size.

    Parameters
    ----------
    candidates : array_like of int
        TotientPerms jumps of one group size (see :func:`totient_perms`).
    m : int
        Number of ring families to pick (``ports/2`` undirected, ``ports`` directed).
    n : int
        Number of servers (jumps are residues mod ``n``).
    rule : callable, optional
        Selection rule; default :data:`DEFAULT_RULE` (:func:`geometric_rule`).
    mode : {"paper", "authors"}
        ``"authors"`` draws from all coprime candidates, so an undirected pick may hold both ``j``
        and ``n - j`` (a duplicated link; the authors' quirk, e.g. n=12, d=8 -> 1, 5, 7, 11).
        ``"paper"`` keeps only ``j <= n/2`` (``p <= k/2``) when undirected, so no jump is duplicated.
    directed : bool
        Directed links (each jump is one port and ``-j`` is not implied).
    fixed : sequence of int
        Jumps already in the topology (other group sizes); rules that score the circulant include them.
    seed : int
        Seed for randomised rules.

    Returns
    -------
    tuple of int
        The ``m`` picked jumps in pick order. If ``m`` exceeds the number of candidates, jumps repeat
        (parallel rings), which is the only way to spend the ports on this group size.
    """
    if mode not in ("paper", "authors"):
        raise ValueError(f"mode must be 'paper' or 'authors', got {mode!r}")
    c = np.unique(np.asarray(candidates, dtype=np.int64) % n)
    c = c[c != 0]
    if mode == "paper" and not directed:
        c = c[2 * c <= n]
    if m <= 0:
        return ()
    if c.size == 0:
        raise ValueError("no candidate jumps")
    rule = DEFAULT_RULE if rule is None else rule
    picked = tuple(int(j) for j in rule(c, m, n=n, directed=directed, fixed=tuple(fixed), seed=seed))
    if len(picked) != m:
        raise ValueError(f"rule returned {len(picked)} jumps, expected {m}")
    return picked


def geometric_rule(
    candidates: np.ndarray, m: int, *, n: int, directed: bool = False, fixed: Sequence[int] = (), seed: int = 0
) -> tuple[int, ...]:
    """The authors' ``choose_n_geo``: Chord-like fingers ``c_1, c_1 r, c_1 r^2, ...``.

    ``ratio = (c_L / c_1) ** (1/m)`` (``1/(m-1)`` directed); start at ``x = c_1``; each pick is the
    smallest untaken candidate ``>= x``, then ``x *= ratio``. ``fixed`` and ``seed`` are ignored.
    When no untaken candidate is ``>= x`` the largest untaken one is taken; when all are taken
    the taken set is cleared (repeats = parallel rings).
    """
    c = np.sort(np.asarray(candidates, dtype=np.int64))
    L = c.size
    if directed:
        ratio = (c[-1] / c[0]) ** (1.0 / (m - 1)) if m > 1 else 1.0
    else:
        ratio = (c[-1] / c[0]) ** (1.0 / m)
    taken = np.zeros(L, dtype=bool)
    x = float(c[0])
    out: list[int] = []
    for _ in range(m):
        if taken.all():
            taken[:] = False
        # tolerance: c_1 * ratio**m can round to just above c_L
        ok = np.flatnonzero((~taken) & (c >= x * (1 - 1e-12)))
        i = int(ok[0]) if ok.size else int(np.flatnonzero(~taken)[-1])
        taken[i] = True
        out.append(int(c[i]))
        x *= ratio
    return tuple(out)


# --------------------------------------------------------------------------------------------
# exact / local-search rule


def _classes(c: np.ndarray, n: int, directed: bool) -> np.ndarray:
    """Jump classes: undirected j and n-j give the same links, so keep min(j, n-j)."""
    if directed:
        return np.unique(c % n)
    c = c % n
    return np.unique(np.minimum(c, n - c))


def _coins(sets: np.ndarray, n: int, directed: bool, fixed: Sequence[int]) -> np.ndarray:
    """One-hop steps of each jump set (B, m) -> (B, c) including negatives and the fixed jumps."""
    parts = [sets]
    if not directed:
        parts.append((-sets) % n)
    if len(fixed):
        f = np.asarray(fixed, dtype=np.int64) % n
        if not directed:
            f = np.concatenate([f, (-f) % n])
        parts.append(np.broadcast_to(f, (sets.shape[0], f.size)))
    return np.concatenate(parts, axis=1)


def jump_set_score(sets: np.ndarray, n: int, directed: bool = False, fixed: Sequence[int] = ()) -> np.ndarray:
    """Lexicographic score (smaller is better) of each jump set, packed in one int64:
    (unreachable residues, sum of hop distances = ASPL * (n-1), diameter)."""
    sets = np.atleast_2d(np.asarray(sets, dtype=np.int64))
    un, tot, dm = circulant_stats_batch(n, _coins(sets, n, directed, fixed))
    return (un * (n * n + 1) + tot) * (n + 1) + dm


def _units(n: int, directed: bool) -> np.ndarray:
    u = np.array([u for u in range(1, n) if gcd(u, n) == 1], dtype=np.int64)
    return u if directed else u[2 * u <= n]  # u and -u act the same on +-classes


def canonical_jump_sets(sets: np.ndarray, n: int, directed: bool = False) -> np.ndarray:
    """Canonical form of each jump set under the multiplier group: ``C_n(J)`` and ``C_n(uJ)`` are
    isomorphic for every unit ``u`` of Z_n (and ``j ~ -j`` when undirected). Returns, per row, the
    lexicographically smallest sorted image."""
    sets = np.atleast_2d(np.asarray(sets, dtype=np.int64))
    best = None
    for u in _units(n, directed):
        t = (sets * u) % n
        if not directed:
            t = np.minimum(t, n - t)
        t = np.sort(t, axis=1)
        if best is None:
            best = t
            continue
        diff = t != best
        first = np.where(diff.any(axis=1), diff.argmax(axis=1), 0)
        rows = np.arange(t.shape[0])
        less = diff.any(axis=1) & (t[rows, first] < best[rows, first])
        best[less] = t[less]
    return best


def _closed_under_units(classes: np.ndarray, n: int, directed: bool) -> bool:
    s = set(classes.tolist())
    for u in _units(n, directed):
        t = (classes * u) % n
        if not directed:
            t = np.minimum(t, n - t)
        if set(t.tolist()) != s:
            return False
    return True


def best_rule(
    candidates: np.ndarray,
    m: int,
    *,
    n: int,
    directed: bool = False,
    fixed: Sequence[int] = (),
    seed: int = 0,
    exhaustive_limit: int = 20000,
    restarts: int = 1,
    max_neighbors: int = 512,
    max_iter: int = 100,
) -> tuple[int, ...]:
    """Jump set minimising (unreachable residues, ASPL, diameter) of the circulant ``fixed + picks``.

    Exact when the search space is small: with no ``fixed`` jumps the first jump is fixed to the
    smallest class (every generator maps to it under a unit multiplier) and the remaining
    ``C(L-1, m-1)`` sets are reduced to canonical forms (:func:`canonical_jump_sets`) before
    evaluation. With ``fixed`` jumps the symmetry is broken and all ``C(L, m)`` sets are evaluated.
    If the count exceeds ``exhaustive_limit``: best-improvement swap local search from the geometric
    pick plus ``restarts`` seeded random starts (neighbourhoods larger than ``max_neighbors`` are
    sampled). Distances come from one BFS over residues per set (vertex transitivity).
    Undirected picks never contain both ``j`` and ``n - j``; if ``m`` exceeds the number of jump
    classes, all classes are used and the rest repeat (parallel rings change no distance).
    """
    cls = _classes(np.asarray(candidates, dtype=np.int64), n, directed)
    L = cls.size
    if m >= L:
        reps = [int(cls[i % L]) for i in range(m)]
        return tuple(reps)
    use_sym = len(fixed) == 0 and _closed_under_units(cls, n, directed)
    count = comb(L - 1, m - 1) if use_sym else comb(L, m)
    if count <= exhaustive_limit:
        if use_sym:
            if m == 1:  # combinations(., 0) yields one empty tuple
                rest = np.zeros((1, 0), dtype=np.int64)
            else:
                rest = np.array(list(itertools.combinations(cls[1:].tolist(), m - 1)), dtype=np.int64)
            sets = np.concatenate([np.full((rest.shape[0], 1), cls[0]), rest], axis=1)
            sets = np.unique(canonical_jump_sets(sets, n, directed), axis=0)
        else:
            sets = np.array(list(itertools.combinations(cls.tolist(), m)), dtype=np.int64).reshape(-1, m)
        score = jump_set_score(sets, n, directed, fixed)
        return tuple(int(j) for j in sets[int(np.argmin(score))])
    found = _local_search(cls, m, n, directed, fixed, seed, restarts, max_neighbors, max_iter)
    if use_sym:  # report the isomorphic canonical representative (contains the smallest class)
        return tuple(int(j) for j in canonical_jump_sets(np.array([found]), n, directed)[0])
    return found


def _local_search(cls, m, n, directed, fixed, seed, restarts, max_neighbors, max_iter) -> tuple[int, ...]:
    rng = np.random.default_rng(seed)
    g = geometric_rule(cls, m, n=n, directed=directed)
    starts = [np.array(sorted(set(g)), dtype=np.int64)]
    if starts[0].size < m:  # geometric repeated a class: fill with unused ones
        pool = np.setdiff1d(cls, starts[0])
        starts[0] = np.sort(np.concatenate([starts[0], rng.choice(pool, m - starts[0].size, replace=False)]))
    for _ in range(restarts):
        starts.append(np.sort(rng.choice(cls, m, replace=False)))
    best_set, best_score = None, None
    for cur in starts:
        cur_score = int(jump_set_score(cur[None, :], n, directed, fixed)[0])
        for _ in range(max_iter):
            pool = np.setdiff1d(cls, cur)
            pos, rep = np.meshgrid(np.arange(m), pool, indexing="ij")
            pos, rep = pos.ravel(), rep.ravel()
            if pos.size > max_neighbors:
                pick = rng.choice(pos.size, max_neighbors, replace=False)
                pos, rep = pos[pick], rep[pick]
            nb = np.repeat(cur[None, :], pos.size, axis=0)
            nb[np.arange(pos.size), pos] = rep
            sc = jump_set_score(nb, n, directed, fixed)
            i = int(np.argmin(sc))
            if sc[i] >= cur_score:
                break
            cur, cur_score = np.sort(nb[i]), int(sc[i])
        if best_score is None or cur_score < best_score:
            best_set, best_score = cur, cur_score
    return tuple(int(j) for j in best_set)


#: Module default rule for :func:`select_permutations` (the authors' rule).
DEFAULT_RULE: SelectRule = geometric_rule
