"""Which interface of each server every link takes (docs/guide/export.md).

A design says how many links join each pair of servers; cabling it needs an interface index at each
end of every link, each interface used at most once. The fabric decides what else must hold:

- ``patch_panel``: one panel joins any port to any port, so any distinct interfaces do.
- ``ocs``: one optical circuit switch per interface index k joins interface k of every server, so
  the links on index k must form a permutation (directed links: TX k of one server to RX k of
  another) or a matching (undirected links: a perfect matching when the cluster is regular).

Directed links always get the split into permutations: a bipartite multigraph with degrees at most d
splits into d matchings (König), computed exactly by repeated perfect matching after padding it to
d-regular. Undirected links on an OCS fabric need a proper d-edge-colouring, which not every design
has: circulants on an even number of servers are coloured by their jumps; other designs of even
degree through an Euler orientation (Petersen's 2-factorisation) when every 2-factor has even
cycles; others by a Kempe-chain search; then the circulant part by its jumps and the rest by
these routes or exactly; otherwise the exact search of ``topoopt_ilp.models.interfaces`` decides within a time limit.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import maximum_bipartite_matching

from topoopt_ilp.core.instance import Instance
from topoopt_ilp.core.solution import Solution
from topoopt_ilp.errors import InputError, UnsupportedError
from topoopt_ilp.models.common import ExactOptions
from topoopt_ilp.models.interfaces import edge_colouring

__all__ = [
    "FABRICS",
    "DEFAULT_TIME_LIMIT_S",
    "Assignment",
    "assign_interfaces",
    "default_fabric",
    "permutation_split",
    "circulant_colouring",
    "circulant_part",
    "kempe_colouring",
    "kempe_search",
    "two_factor_colouring",
]

FABRICS = ("patch_panel", "ocs")
#: Time limit of the exact colouring search when the caller gives none, in seconds.
DEFAULT_TIME_LIMIT_S = 60.0

ROLE_MP, ROLE_ALLREDUCE, ROLE_LINK = "mp", "allreduce", "link"


@dataclass(frozen=True, eq=False)
class Assignment:
    """One row per physical link: ``ends[e] = (a, b)`` (directed: a sends to b; undirected: a < b),
    ``interfaces[e] = (interface at a, interface at b)`` and ``roles[e]``. ``method`` says how the
    interfaces were found (``counter``, ``konig``, ``circulant``, ``two_factors``,
    ``kempe``, ``circulant+two_factors``, ``circulant+kempe`` or ``circulant+exact``: the circulant part by its jumps and the rest as
    said, ``exact``)."""

    n: int
    d: int
    directed: bool
    fabric: str
    ends: np.ndarray
    interfaces: np.ndarray
    roles: tuple[str, ...]
    method: str

    def port(self, server: int, interface: int) -> int:
        """The patch-panel port of an interface: ``server * d + interface``."""
        return int(server) * self.d + int(interface)


def default_fabric(instance: Instance) -> str:
    """The fabric an instance states (``cost.fabric``), else ``patch_panel``."""
    stated = instance.cost.fabric if instance.cost is not None else None
    return stated if stated in FABRICS else "patch_panel"


def _link_rows(solution: Solution, directed: bool) -> tuple[np.ndarray, np.ndarray]:
    """Every physical link once (a pair with c links is c rows), ends ordered as :class:`Assignment` says."""
    links = solution.topology.links(directed)
    if not links:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    arr = np.asarray(links, dtype=np.int64)
    reps = arr[:, 2]
    return np.repeat(arr[:, 0], reps), np.repeat(arr[:, 1], reps)


# ----------------------------------------------------------------------------------------------
# Directed links (and the 2-factors of undirected ones): König's split into permutations
# ----------------------------------------------------------------------------------------------
def permutation_split(a: np.ndarray, b: np.ndarray, n: int, d: int) -> np.ndarray:
    """The colour 0..d-1 of every arc ``a[e] -> b[e]`` such that each colour leaves every server at most
    once and enters it at most once. Needs out- and in-degrees at most ``d``; the arcs are padded to a
    d-regular bipartite multigraph, which has a perfect matching (Hall), taken ``d`` times."""
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    out_deg, in_deg = np.bincount(a, minlength=n), np.bincount(b, minlength=n)
    if a.size and max(out_deg.max(), in_deg.max()) > d:
        raise InputError(f"a server has more than {d} links: no split into {d} permutations")
    # distinct (a, b) pairs with their real and padding counts
    key = a * n + b
    pairs, real = np.unique(key, return_counts=True)
    pad_a = np.repeat(np.arange(n), d - out_deg)
    pad_b = np.repeat(np.arange(n), d - in_deg)  # as many as pad_a: both are n*d - arcs
    pad_pairs, pad_counts = np.unique(pad_a * n + pad_b, return_counts=True)
    allp = np.union1d(pairs, pad_pairs)
    real_c = np.zeros(allp.size, np.int64)
    real_c[np.searchsorted(allp, pairs)] = real
    pad_c = np.zeros(allp.size, np.int64)
    pad_c[np.searchsorted(allp, pad_pairs)] = pad_counts
    pa, pb = allp // n, allp % n
    taken: list[list[int]] = [[] for _ in range(allp.size)]  # colours of the real arcs of each pair
    for k in range(d):
        live = (real_c + pad_c) > 0
        g = sp.csr_array((np.ones(int(live.sum()), np.int8), (pa[live], pb[live])), shape=(n, n))
        match = maximum_bipartite_matching(g, perm_type="column")
        if (match < 0).any():  # cannot happen for a regular bipartite multigraph
            raise RuntimeError("no perfect matching in a regular bipartite multigraph")
        idx = np.searchsorted(allp, np.arange(n) * n + match)
        use_real = real_c[idx] > 0
        for p in idx[use_real]:
            taken[p].append(k)
        real_c[idx[use_real]] -= 1
        pad_c[idx[~use_real]] -= 1
    colours = np.empty(a.size, np.int64)
    order = np.argsort(key, kind="stable")
    pos = 0
    for p in np.searchsorted(allp, pairs):
        for k in taken[p]:
            colours[order[pos]] = k
            pos += 1
    return colours


# ----------------------------------------------------------------------------------------------
# Undirected links: constructive colourings
# ----------------------------------------------------------------------------------------------
def circulant_colouring(x: np.ndarray) -> list[tuple[int, int, int]] | None:
    """``[(a, b, colour)]`` (a < b) for a circulant link-count matrix on an even number of servers, or
    None when ``x`` is not circulant or a jump's cycles are odd.

    Jump j (1 <= j < n/2) joins i and i + j: gcd(n, j) cycles of length n / gcd(n, j). When that length
    is even, colouring the links of each cycle alternately gives 2 perfect matchings per copy of the
    jump. The jump n/2 is itself a perfect matching (1 colour per copy)."""
    n = x.shape[0]
    if n % 2:
        return None
    i = np.arange(n)
    out: list[tuple[int, int, int]] = []
    colour = 0
    for j in range(1, n // 2 + 1):
        diag = x[i, (i + j) % n]
        if (diag != diag[0]).any():
            return None
        copies = int(diag[0])
        if not copies:
            continue
        if 2 * j == n:
            for _ in range(copies):
                out += [(int(a), int(a + j), colour) for a in range(j)]
                colour += 1
            continue
        g = math.gcd(n, j)
        length = n // g
        if length % 2:
            return None
        for _ in range(copies):
            for r in range(g):
                for t in range(length):
                    a = (r + t * j) % n
                    b = (a + j) % n
                    out.append((min(a, b), max(a, b), colour + t % 2))
            colour += 2
    return out


def circulant_part(x: np.ndarray) -> np.ndarray:
    """The largest sum of whole circulant jumps inside ``x`` that :func:`circulant_colouring` colours:
    each jump j whose cycles are even (n / gcd(n, j) even), as many copies as every server has."""
    n = x.shape[0]
    part = np.zeros_like(x)
    if n % 2:
        return part
    i = np.arange(n)
    for j in range(1, n // 2 + 1):
        copies = int(x[i, (i + j) % n].min())
        if copies and (2 * j == n or (n // math.gcd(n, j)) % 2 == 0):
            part[i, (i + j) % n] += copies
            if 2 * j != n:
                part[(i + j) % n, i] += copies
    return part


def kempe_colouring(
    a: np.ndarray,
    b: np.ndarray,
    n: int,
    d: int,
    *,
    seed: int = 0,
    max_steps: int | None = None,
    tries: int = 3,
    deadline: float | None = None,
) -> np.ndarray | None:
    """:func:`kempe_search` from ``tries`` random starts (seeds ``seed``, ``seed + 1``, ...)."""
    for t in range(tries):
        colours = kempe_search(a, b, n, d, seed=seed + t, max_steps=max_steps, deadline=deadline)
        if colours is not None:
            return colours
    return None


def kempe_search(
    a: np.ndarray,
    b: np.ndarray,
    n: int,
    d: int,
    *,
    seed: int = 0,
    max_steps: int | None = None,
    deadline: float | None = None,
) -> np.ndarray | None:
    """Colours 0..d-1 for the links ``(a[e], b[e])`` such that no server has a colour twice, or None
    when this search found none (which proves nothing: the exact search decides then).

    Greedy first; then each uncoloured link {u, v} takes a colour missing at both ends, made so by
    swapping the two colours on the alternating (Kempe) chain from v when needed; when the chain
    comes back to u, a link of u or v is uncoloured instead (a random walk), up to ``max_steps`` or
    until ``deadline`` (a ``time.perf_counter()`` value)."""
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    m = a.size
    rng = np.random.default_rng(seed)
    at = np.full((n, d), -1, np.int64)  # at[v, c]: the link of v with colour c
    colour = np.full(m, -1, np.int64)
    if m and (np.bincount(a, minlength=n) + np.bincount(b, minlength=n)).max() > d:
        return None

    def put(e: int, c: int) -> None:
        colour[e] = c
        at[a[e], c] = at[b[e], c] = e

    def free(v: int) -> np.ndarray:
        return np.flatnonzero(at[v] < 0)

    def chain(start: int, first: int, second: int) -> tuple[list[int], int]:
        """The links of the alternating first/second chain from ``start`` (which lacks ``second``), and its end."""
        links, w, c = [], start, first
        while at[w, c] >= 0:
            f = int(at[w, c])
            links.append(f)
            w = int(b[f]) if a[f] == w else int(a[f])
            c = second if c == first else first
        return links, w

    def _kempe_swap(u: int, v: int, e: int, free_u: np.ndarray, free_v: np.ndarray, rng) -> bool:
        """Colour e = {u, v} after swapping one Kempe chain that does not join u and v, if there is one."""
        for ca in rng.permutation(free_u).tolist():
            for cb in rng.permutation(free_v).tolist():
                for start, other, first, second in ((v, u, ca, cb), (u, v, cb, ca)):
                    links, w = chain(start, first, second)
                    if w == other:
                        continue
                    for f in links:
                        at[a[f], colour[f]] = at[b[f], colour[f]] = -1
                    for f in links:
                        put(f, second if colour[f] == first else first)
                    put(e, first)
                    return True
        return False

    waiting = []
    for e in rng.permutation(m).tolist():
        both = np.flatnonzero((at[a[e]] < 0) & (at[b[e]] < 0))
        if both.size:
            put(e, int(both[0]))
        else:
            waiting.append(e)
    steps, limit = 0, (10 * m + 1000 if max_steps is None else max_steps)
    while waiting:
        steps += 1
        if steps > limit or (deadline is not None and steps % 256 == 0 and time.perf_counter() > deadline):
            return None
        e = waiting.pop()
        u, v = (int(a[e]), int(b[e])) if rng.random() < 0.5 else (int(b[e]), int(a[e]))
        both = np.flatnonzero((at[u] < 0) & (at[v] < 0))
        if both.size:
            put(e, int(rng.choice(both)))
            continue
        if _kempe_swap(u, v, e, free(u), free(v), rng):
            continue
        # every chain comes back: take a colour from a link of v or u, which now waits instead
        ca, cb = int(rng.choice(free(u))), int(rng.choice(free(v)))
        end, c = (v, ca) if rng.random() < 0.5 else (u, cb)
        f = int(at[end, c])
        at[a[f], c] = at[b[f], c] = -1
        colour[f] = -1
        put(e, c)
        waiting.insert(int(rng.integers(len(waiting) + 1)), f)
    return colour


def _euler_orientation(a: np.ndarray, b: np.ndarray, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Every edge oriented along an Euler circuit of its component (all degrees even): in = out."""
    rng = np.random.default_rng(seed)
    m = a.size
    adj: list[list[int]] = [[] for _ in range(n)]
    for e in rng.permutation(m):
        adj[a[e]].append(int(e))
        adj[b[e]].append(int(e))
    used = np.zeros(m, bool)
    src, dst = np.empty(m, np.int64), np.empty(m, np.int64)
    for start in range(n):
        stack = [start]
        while stack:
            v = stack[-1]
            lst = adj[v]
            while lst and used[lst[-1]]:
                lst.pop()
            if not lst:
                stack.pop()
                continue
            e = lst.pop()
            used[e] = True
            w = int(b[e]) if a[e] == v else int(a[e])
            src[e], dst[e] = v, w
            stack.append(w)
    return src, dst


def two_factor_colouring(a: np.ndarray, b: np.ndarray, n: int, d: int, tries: int = 4) -> np.ndarray | None:
    """Colours for the links of a regular undirected multigraph of even degree ``d``, or None.

    An Euler orientation gives in = out = d/2 at every server; its split into d/2 permutations
    (:func:`permutation_split`) is a split into 2-factors. A 2-factor whose cycles are all even is two
    perfect matchings. A 2-factor with an odd cycle fails this orientation; ``tries`` orientations
    are tried."""
    if d % 2 or a.size * 2 != n * d:
        return None
    for seed in range(tries):
        src, dst = _euler_orientation(a, b, n, seed)
        factor = permutation_split(src, dst, n, d // 2)
        colours = np.empty(a.size, np.int64)
        ok = True
        for f in range(d // 2):
            edges = np.flatnonzero(factor == f)
            succ = np.empty(n, np.int64)
            arc = np.empty(n, np.int64)
            succ[src[edges]] = dst[edges]
            arc[src[edges]] = edges
            seen = np.zeros(n, bool)
            for s in range(n):
                if seen[s]:
                    continue
                cycle = []
                v = s
                while not seen[v]:
                    seen[v] = True
                    cycle.append(arc[v])
                    v = succ[v]
                if len(cycle) % 2:
                    ok = False
                    break
                colours[np.asarray(cycle)] = 2 * f + np.arange(len(cycle)) % 2
            if not ok:
                break
        if ok:
            return colours
    return None


# ----------------------------------------------------------------------------------------------
def _roles(solution: Solution, a: np.ndarray, b: np.ndarray, directed: bool) -> tuple[str, ...]:
    """``mp`` for the model-parallel links the solution records (``details['mp_links']``, as the
    heuristic does), ``allreduce`` for the rest of such a design, ``link`` when the solution says nothing."""
    mp = solution.details.get("mp_links")
    if not isinstance(mp, (list, tuple)):
        return (ROLE_LINK,) * a.size
    left: dict[tuple[int, int], int] = {}
    for item in mp:
        i, j, c = (int(v) for v in item)
        key = (i, j) if directed else (min(i, j), max(i, j))
        left[key] = left.get(key, 0) + c
    roles = []
    for i, j in zip(a.tolist(), b.tolist()):
        if left.get((i, j), 0) > 0:
            left[(i, j)] -= 1
            roles.append(ROLE_MP)
        else:
            roles.append(ROLE_ALLREDUCE)
    return tuple(roles)


def _counter_interfaces(a: np.ndarray, b: np.ndarray, n: int) -> np.ndarray:
    """Distinct interfaces in link order: the t-th link of a server takes its interface t."""
    nxt = np.zeros(n, np.int64)
    out = np.empty((a.size, 2), np.int64)
    for e, (i, j) in enumerate(zip(a.tolist(), b.tolist())):
        out[e] = nxt[i], nxt[j]
        nxt[i] += 1
        nxt[j] += 1
    return out


def _circulant_and_rest(
    instance: Instance, x: np.ndarray, deadline: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, str] | None:
    """Colour the circulant part of ``x`` by its jumps and the rest with the colours left (2-factors,
    Kempe chains, else the exact model: a smaller search than the whole); None when there is no such
    part or the rest has no colouring found by ``deadline``: the whole design's search may still succeed."""
    n, d = instance.n, instance.d
    part = circulant_part(x)
    used = int(part[0].sum())
    if used == 0 or used == d:
        return None
    arr = np.asarray(circulant_colouring(part), dtype=np.int64).reshape(-1, 3)
    ra, rb = np.nonzero(np.triu(x - part, 1))
    reps = (x - part)[ra, rb]
    ra, rb = np.repeat(ra, reps), np.repeat(rb, reps)
    rest = two_factor_colouring(ra, rb, n, d - used) if instance.cluster.regular else None
    how = "circulant+two_factors"
    if rest is None:
        rest, how = kempe_colouring(ra, rb, n, d - used, deadline=deadline), "circulant+kempe"
    if rest is None:
        how = "circulant+exact"
        left = max(0.0, deadline - time.perf_counter())
        options = ExactOptions(backend="cpsat", time_limit_s=left, warm_start="none")
        rest = edge_colouring(ra, rb, n, d - used, options).colours
    if rest is None:
        return None
    return (
        np.concatenate([arr[:, 0], ra]),
        np.concatenate([arr[:, 1], rb]),
        np.concatenate([arr[:, 2], rest + used]),
        how,
    )


def _undirected_ocs(
    instance: Instance, solution: Solution, a: np.ndarray, b: np.ndarray, time_limit_s: float | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, str]:
    n, d = instance.n, instance.d
    hint = "; use --fabric patch_panel (one panel joins any port to any port)"
    if instance.cluster.regular and n % 2:
        raise UnsupportedError(
            f"a {d}-regular design on an odd number of servers ({n}) has no perfect matching, so no split into "
            f"one perfect matching per OCS" + hint
        )
    x = solution.topology.matrix
    coloured = circulant_colouring(x)
    if coloured is not None:
        arr = np.asarray(coloured, dtype=np.int64).reshape(-1, 3)
        return arr[:, 0], arr[:, 1], arr[:, 2], "circulant"
    if instance.cluster.regular:
        colours = two_factor_colouring(a, b, n, d)
        if colours is not None:
            return a, b, colours, "two_factors"
    limit = DEFAULT_TIME_LIMIT_S if time_limit_s is None else time_limit_s
    started = time.perf_counter()
    colours = kempe_colouring(a, b, n, d, deadline=started + limit / 4)
    if colours is not None:
        return a, b, colours, "kempe"
    split = _circulant_and_rest(instance, x, started + limit / 2)
    if split is not None:
        return split
    left = max(0.0, limit - (time.perf_counter() - started))
    res = edge_colouring(a, b, n, d, ExactOptions(backend="cpsat", time_limit_s=left, warm_start="none"))
    if res.colours is not None:
        return a, b, res.colours, "exact"
    if res.status == "infeasible":
        raise UnsupportedError(
            f"the design has no split of its links into {d} matchings (no proper {d}-edge-colouring), so it "
            "cannot be cabled with one OCS per interface index" + hint
        )
    raise UnsupportedError(
        f"no split of the links into {d} matchings found within the {limit:g} s time limit "
        f"(search status {res.status}); raise --time-limit" + hint
    )


def assign_interfaces(
    instance: Instance, solution: Solution, *, fabric: str | None = None, time_limit_s: float | None = None
) -> Assignment:
    """The interface of each end of every link of ``solution`` (see the module's docstring).

    ``fabric``: ``patch_panel`` or ``ocs`` (default: :func:`default_fabric`). Raises
    :class:`~topoopt_ilp.errors.UnsupportedError` (exit 2) when the fabric cannot carry the design."""
    fabric = default_fabric(instance) if fabric is None else fabric
    if fabric not in FABRICS:
        raise InputError(f"unknown fabric {fabric!r}; choose one of {', '.join(FABRICS)}")
    if solution.topology is None:
        raise InputError("the solution has no topology to cable")
    n, d, directed = instance.n, instance.d, instance.cluster.directed
    a, b = _link_rows(solution, directed)
    if directed:
        colours = permutation_split(a, b, n, d)
        ends, method = np.stack([a, b], axis=1), "konig"
        interfaces = np.stack([colours, colours], axis=1)
    elif fabric == "patch_panel":
        ends, method = np.stack([a, b], axis=1), "counter"
        interfaces = _counter_interfaces(a, b, n)
    else:
        a, b, colours, method = _undirected_ocs(instance, solution, a, b, time_limit_s)
        order = np.lexsort((colours, b, a))
        a, b, colours = a[order], b[order], colours[order]
        ends = np.stack([a, b], axis=1)
        interfaces = np.stack([colours, colours], axis=1)
    ends.setflags(write=False)
    interfaces.setflags(write=False)
    roles = _roles(solution, ends[:, 0], ends[:, 1], directed)
    return Assignment(n, d, directed, fabric, ends, interfaces, roles, method)
