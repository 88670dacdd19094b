"""TopologyFinder: TopoOpt's end-to-end topology + routing heuristic (docs/methods/heuristic.md).

Steps: traffic weights per group size -> degree split (d_A, d_MP) -> AllReduce ports per group size
-> TotientPerms candidates + SelectPermutations per size -> circulant AllReduce links ->
CoinChangeMod routes -> rings (direct or multi-hop "virtual") per group -> repeated max-weight
matching for MP links -> (``multi_links=False``: parallel links rewired away, CoinChangeMod redone
over the jumps left whole) -> explicit shortest paths where the MP links beat the circulant routes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components, shortest_path

from topoopt_ilp.core.routes import PathSet, RingSet, Routing
from topoopt_ilp.heuristic.baselines import connect_components
from topoopt_ilp.heuristic.circulant import circulant_matrix
from topoopt_ilp.heuristic.coin_change import DEFAULT_MAX_ROUTES, coin_change_mod
from topoopt_ilp.heuristic.degree import allocate_ports, allreduce_bytes_total, degree_split
from topoopt_ilp.heuristic.mp_links import DEFAULT_MATCHING, repeated_matching, route_pairs
from topoopt_ilp.heuristic.select import best_rule, geometric_rule, select_permutations
from topoopt_ilp.heuristic.simple import parallel_link_count, remove_parallel_links
from topoopt_ilp.heuristic.totient import coset_of, jump_ports, totient_perms

__all__ = ["TopologyFinderResult", "FinderOptions", "topology_finder", "SELECT_RULES"]

#: Named SelectPermutations rules accepted by ``topology_finder(select=...)``.
SELECT_RULES: dict[str, Callable[..., tuple[int, ...]]] = {"geometric": geometric_rule, "best": best_rule}


@dataclass(frozen=True, eq=False)
class TopologyFinderResult:
    """Output of :func:`topology_finder`.

    Attributes
    ----------
    X : numpy.ndarray
        ``(n, n)`` int64 final topology ``ar_matrix + mp_matrix``; rows (and columns) sum to ``d``.
    ar_matrix, mp_matrix : numpy.ndarray
        AllReduce (circulant) links and MP (matching) links. After a ``multi_links=False`` repair,
        ``ar_matrix`` holds the circulant links that survived and ``mp_matrix`` the rest.
    jumps : dict int -> tuple of int
        Group size ``k`` -> jumps chosen for its direct rings, in pick order (repeats = parallel rings).
        May contain ``n`` even without a group of size ``n`` (the connectivity ring).
    virtual_jumps : dict int -> tuple of int
        Coset group sizes without direct rings -> the logical TotientPerms jumps (one per +-class)
        of minimum CoinChangeMod length, realised multi-hop over ``routing.offset_routes``.
    routing : Routing
        ``rings``: per input group (index into ``groups``), the ring orders with equal fractions;
        ``offset_routes``: CoinChangeMod routes for every reachable nonzero offset (valid from every
        source on the circulant part, which stays inside ``X``); ``paths``: explicit shortest paths
        over ``X`` only for pairs with traffic (MP demand or hops of non-coset rings) whose distance in
        ``X`` is shorter than on the circulant (so only when ``d_mp > 0`` or the circulant is disconnected).
    d_allreduce, d_mp : int
        Degree split.
    ports : dict int -> int
        AllReduce ports per node given to each group size.
    group_weights : dict int -> float
        ``W[k] = sum S (2k-1)/k`` over coset groups of size ``k`` (the authors' weight).
    group_kind : tuple of str
        Per input group: ``"direct"`` (rings on its own jumps), ``"virtual"`` (multi-hop rings),
        ``"ordered"`` (not a coset: ring in the given member order, both directions if undirected),
        ``"trivial"`` (size <= 1, no traffic) or ``"routed"`` (no ring of its size on the circulant:
        one ring in member order, routed over explicit shortest paths like an ordered group's).
    coin_dist : numpy.ndarray
        CoinChangeMod distance per residue (``-1`` unreachable); after a ``multi_links=False``
        repair, over the jumps whose links all survived (``routing_jumps``).
    rewired : int
        Degree-preserving link swaps made to remove parallel links (``multi_links=False``; 0 otherwise).
    routing_jumps : tuple of int or None
        The jumps CoinChangeMod routes over when a repair broke some chosen jumps (None: all chosen).
    notes : tuple of str
        Fix-ups and fallbacks applied during this run.
    """

    X: np.ndarray
    ar_matrix: np.ndarray
    mp_matrix: np.ndarray
    jumps: dict[int, tuple[int, ...]]
    virtual_jumps: dict[int, tuple[int, ...]]
    routing: Routing
    d_allreduce: int
    d_mp: int
    ports: dict[int, int]
    group_weights: dict[int, float]
    group_kind: tuple[str, ...]
    coin_dist: np.ndarray
    n: int
    d: int
    directed: bool
    mode: str
    split: str
    select: str
    notes: tuple[str, ...] = field(default=())
    rewired: int = 0
    routing_jumps: tuple[int, ...] | None = None


def _ring_rows(n: int, s: int, k: int, jumps: Sequence[int], directed: bool) -> list[np.ndarray]:
    """Ring orders s, s+j, s+2j, ... for each jump, plus the -j direction when undirected."""
    rows = []
    t = np.arange(k, dtype=np.int64)
    for j in jumps:
        rows.append((s + j * t) % n)
        if not directed and 2 * (j % n) != n:
            rows.append((s - j * t) % n)
    return rows


def classify_groups(
    groups: Sequence[tuple[np.ndarray | Sequence[int], float]], n: int
) -> tuple[list[str], list[tuple[int, int] | None], list[np.ndarray]]:
    """Per AllReduce group (members, bytes): its kind - ``trivial`` (at most one member or no bytes),
    ``coset`` (the members are a coset ``{s, s + n/k, ...}``: ``(k, s)`` given), or ``ordered`` -
    with the coset and the members as an array. Raises ValueError for negative bytes or members
    that are not distinct server ids."""
    kinds: list[str] = []
    coset: list[tuple[int, int] | None] = []
    members: list[np.ndarray] = []
    for gi, (mem, S) in enumerate(groups):
        mem = np.asarray(mem, dtype=np.int64)
        if S < 0:
            raise ValueError(f"group {gi}: negative bytes")
        if mem.size and (mem.min() < 0 or mem.max() >= n or np.unique(mem).size != mem.size):
            raise ValueError(f"group {gi}: members must be distinct server ids in [0, {n})")
        members.append(mem)
        c = coset_of(mem, n) if mem.size > 1 and S != 0 else None
        kinds.append("trivial" if mem.size <= 1 or S == 0 else ("coset" if c else "ordered"))
        coset.append(c)
    return kinds, coset, members


def group_rings(
    n: int,
    kinds: Sequence[str],
    coset: Sequence[tuple[int, int] | None],
    members: Sequence[np.ndarray],
    jumps: dict[int, tuple[int, ...]],
    dist: np.ndarray,
    directed: bool,
    notes: list[str],
) -> tuple[RingSet, list[str], dict[int, tuple[int, ...]]]:
    """The AllReduce rings of every group (step 6 of :func:`topology_finder`): an ``ordered`` group
    rings in its member order (both directions undirected); a ``coset`` group of size k on the
    jumps chosen for k (``direct``), else on the candidate jumps of k that CoinChangeMod reaches in the
    fewest hops (``virtual``, multi-hop; ``dist`` its hop counts per offset), else (no circulant
    reaches it, e.g. no ring ports at all) in member order as an ordered group, over explicit paths
    (``routed``, noted). Each group's traffic splits equally over its rings. Returns the rings,
    the final kind per group and the virtual jumps per group size."""
    virtual: dict[int, tuple[int, ...]] = {}
    ring_group: list[int] = []
    ring_rows: list[np.ndarray] = []
    ring_frac: list[float] = []
    final_kinds: list[str] = []
    for gi, (kind, c, mem) in enumerate(zip(kinds, coset, members)):
        if kind == "trivial":
            final_kinds.append(kind)
            continue
        if kind == "ordered":
            rows = [mem] if directed else [mem, mem[::-1].copy()]
            final_kinds.append("ordered")
        else:
            k, s = c
            if k in jumps:
                rj = jumps[k]
                final_kinds.append("direct")
            else:
                if k not in virtual:
                    cj = totient_perms(n, k)
                    if not directed:
                        cj = np.unique(np.minimum(cj, n - cj))
                    dc = dist[cj]
                    ok = dc > 0
                    virtual[k] = tuple(int(j) for j in cj[ok & (dc == dc[ok].min())]) if ok.any() else ()
                rj = virtual[k]
                final_kinds.append("virtual" if rj else "routed")
                if not rj:
                    notes.append(
                        f"group {gi}: no ring of size {k} on the circulant; it rings in member order "
                        "over shortest paths"
                    )
            rows = _ring_rows(n, s, k, rj, directed) if rj else ([mem] if directed else [mem, mem[::-1].copy()])
        for r in rows:
            ring_group.append(gi)
            ring_rows.append(r)
            ring_frac.append(1.0 / len(rows))
    if not ring_rows:
        return RingSet.empty(), final_kinds, virtual
    kmax = max(r.size for r in ring_rows)
    order = np.full((len(ring_rows), kmax), -1, dtype=np.int64)
    for i, r in enumerate(ring_rows):
        order[i, : r.size] = r
    return RingSet(np.array(ring_group, dtype=np.int64), order, np.array(ring_frac)), final_kinds, virtual


def _link_free_ports(X: np.ndarray, d: int, multi_links: bool) -> np.ndarray:
    """Links between servers that still have a free port in the undirected topology ``X`` (after
    near-perfect matching rounds on an odd number of servers), farthest pair first (hop distance,
    unreachable counted as n), then lowest ids; parallel links only when ``multi_links``. At most
    one server keeps a free port at the end, unless all the others are its neighbours already."""
    n = X.shape[0]
    add = np.zeros_like(X)
    while True:
        free = np.flatnonzero((X + add).sum(axis=1) < d)
        if free.size < 2:
            return add
        dist = shortest_path((X + add) > 0, unweighted=True, directed=False)[np.ix_(free, free)]
        dist[~np.isfinite(dist)] = n
        ok = np.triu(np.ones_like(dist, dtype=bool), 1)
        if not multi_links:
            ok &= (X + add)[np.ix_(free, free)] == 0
        if not ok.any():
            return add
        a, b = np.unravel_index(int(np.argmax(np.where(ok, dist, -1))), dist.shape)
        add[free[a], free[b]] += 1
        add[free[b], free[a]] += 1


def topology_finder(
    n: int,
    d: int,
    groups: Sequence[tuple[np.ndarray | Sequence[int], float]],
    mp,
    *,
    directed: bool = False,
    split: str | None = None,
    select: str | Callable[..., tuple[int, ...]] = "geometric",
    mode: str = "paper",
    mp_routing: str = "shortest",
    matching: str | Callable[..., np.ndarray] = DEFAULT_MATCHING,
    max_routes: int | None = DEFAULT_MAX_ROUTES,
    mp_k: int = 3,
    seed: int = 0,
    multi_links: bool = True,
    mp_tie_break: str = "distance",
    regular: bool = True,
) -> TopologyFinderResult:
    """TopoOpt's TopologyFinder.

    Parameters
    ----------
    n, d : int
        Servers and interfaces per server.
    groups : sequence of (members, bytes)
        AllReduce groups. Members forming a coset ``{s, s + n/k, ...}`` of Z_n (``k | n``) are
        TotientPerms groups. Other member sets are *ordered* groups: one ring in the given member order
        (plus its reverse, half the bytes each, when undirected), routed over the topology; their bytes
        count in the degree split but they get no ports of their own. Groups of size <= 1 are ignored.
    mp : (n, n) array_like or scipy sparse matrix
        MP bytes ``i -> j`` (diagonal ignored).
    directed : bool
        Directed links (row and column sums ``d``; jump ``j`` adds only ``i -> i + j``).
    split : {"proportional", "all_allreduce"}, optional
        Degree split; default ``"proportional"`` in paper mode, ``"all_allreduce"`` in authors mode.
    select : {"geometric", "best"} or callable
        SelectPermutations rule (see :mod:`.select`); a callable has the rule signature.
    mode : {"paper", "authors"}
        ``"paper"``: proportional ports per group size, no +-j duplicates. ``"authors"``: heaviest group
        size takes all AllReduce ports (+ connectivity ring), duplicates allowed (the code's quirk).
    mp_routing : {"shortest", "ecmp", "ksp"}
        Explicit path routing (see :func:`route_pairs`); ``"ecmp"``/``"ksp"`` are per-pair networkx.
    matching : {"auto", "blossom", "greedy"} or callable
        MP matching algorithm (see :func:`repeated_matching`).
    max_routes : int or None
        CoinChangeMod alternatives kept per offset.
    mp_k : int
        ``k`` for ``mp_routing="ksp"``.
    seed : int
        Seeds the matching completion and randomised select rules.
    multi_links : bool
        Parallel links allowed (default, TopoOpt's multigraphs). When False, the finished topology's
        parallel links are rewired by degree-preserving swaps (:func:`.simple.remove_parallel_links`,
        the links carrying the least ring + MP traffic move first, connectivity kept); CoinChangeMod
        is redone over the chosen jumps whose links all survived, and every pair with traffic that
        those jumps no longer reach at the topology's distance gets explicit shortest paths.
    mp_tie_break : {"distance", "none"}
        Ties between equally heavy MP matchings (see :func:`.mp_links.distance_tie_break`):
        ``"distance"`` (default, both modes) prefers pairs far apart in the AllReduce rings plus the
        earlier matching rounds; ``"none"`` keeps the matcher's index order, which on uniform demand
        builds near-cliques. It applies in ``mode="authors"`` too: the authors' code leaves ties to
        Blossom V's internal order (a min-cost perfect matching on ``maxT - T``), which this package
        does not reproduce either way, and the mode's promises (``d_A = d``, heaviest group takes all
        ports, the +-j quirk) do not involve it (and with AllReduce traffic, authors mode has
        ``d_MP = 0`` for even ``d``). It never changes which demand weight wins, so it only matters
        where demand weights tie (uniform or block-uniform MP demand). Undirected links only: the
        directed rounds (``linear_sum_assignment``) are unchanged.

    Returns
    -------
    TopologyFinderResult
    """
    options = FinderOptions.checked(
        directed=directed,
        split=split,
        select=select,
        mode=mode,
        mp_routing=mp_routing,
        matching=matching,
        max_routes=max_routes,
        mp_k=mp_k,
        seed=seed,
        multi_links=multi_links,
        mp_tie_break=mp_tie_break,
        regular=regular,
    )
    run = _FinderRun.start(n, d, groups, mp, options)
    _weigh_traffic(run)
    _split_degree(run)
    _allocate_ring_ports(run)
    _choose_jumps(run)
    _build_rings(run)
    _match_mp_links(run)
    if not options.multi_links:
        _remove_parallel_links(run)
    _route_explicit_paths(run)
    return run.result()


@dataclass(frozen=True)
class FinderOptions:
    """The choices of one :func:`topology_finder` run, checked (see its parameters); ``rule`` is
    the SelectPermutations rule itself and ``select`` its name."""

    directed: bool
    split: str
    rule: Callable[..., tuple[int, ...]]
    select: str
    mode: str
    mp_routing: str
    matching: str | Callable[..., np.ndarray]
    max_routes: int | None
    mp_k: int
    seed: int
    multi_links: bool
    mp_tie_break: str
    regular: bool

    @classmethod
    def checked(cls, *, split: str | None, select, mode: str, **rest) -> FinderOptions:
        if mode not in ("paper", "authors"):
            raise ValueError(f"mode must be 'paper' or 'authors', got {mode!r}")
        if split is None:
            split = "proportional" if mode == "paper" else "all_allreduce"
        if isinstance(select, str):
            if select not in SELECT_RULES:
                raise ValueError(f"unknown select rule {select!r}")
            rule, name = SELECT_RULES[select], select
        else:
            rule, name = select, getattr(select, "__name__", "custom")
        return cls(split=split, rule=rule, select=name, mode=mode, **rest)


@dataclass(eq=False)
class _FinderRun:
    """What the steps of one :func:`topology_finder` run build, in step order; each step function
    below reads the fields of the steps before it and fills its own."""

    n: int
    d: int
    groups: Sequence[tuple[np.ndarray | Sequence[int], float]]
    mp: np.ndarray | sp.spmatrix
    options: FinderOptions
    odd_ports: bool  # undirected, n and d odd: some server keeps a port free
    notes: list[str] = field(default_factory=list)
    # 1. traffic weights
    kinds: list[str] = field(default_factory=list)
    coset: list[tuple[int, int] | None] = field(default_factory=list)
    members: list[np.ndarray] = field(default_factory=list)
    weights: dict[int, float] = field(default_factory=dict)
    t_ar: float = 0.0
    mp_total: float = 0.0
    # 2.-3. degree split, ports per group size
    d_a: int = 0
    d_mp: int = 0
    ports: dict[int, int] = field(default_factory=dict)
    # 4.-5. jumps, circulant links, CoinChangeMod
    jumps: dict[int, tuple[int, ...]] = field(default_factory=dict)
    chosen: list[int] = field(default_factory=list)
    ar: np.ndarray | None = None
    dist: np.ndarray | None = None
    offset_routes: object = None
    # 6. rings
    rings: RingSet | None = None
    final_kinds: list[str] = field(default_factory=list)
    virtual: dict[int, tuple[int, ...]] = field(default_factory=dict)
    ring_rows: list[np.ndarray] = field(default_factory=list)
    # 7. MP links (and the parallel-link repair)
    mpm: np.ndarray | None = None
    X: np.ndarray | None = None
    rewired: int = 0
    routing_jumps: tuple[int, ...] | None = None
    repaired: bool = False
    # 8. explicit paths
    paths: PathSet = field(default_factory=PathSet.empty)

    @classmethod
    def start(cls, n: int, d: int, groups, mp, options: FinderOptions) -> _FinderRun:
        """The run's inputs, refused when no topology of the requested kind exists."""
        if n < 2 or d < 1:
            raise ValueError("need n >= 2 and d >= 1")
        odd_ports = not options.directed and (n * d) % 2 == 1
        if odd_ports and options.regular:
            raise ValueError(f"n*d = {n * d} is odd: no undirected {d}-regular topology")
        if odd_ports and d == 1:
            raise ValueError(f"degree 1 on {n} servers (an odd number) leaves a server without a link")
        if not options.multi_links and d > n - 1:
            raise ValueError(
                f"degree {d} needs parallel links on {n} servers (multi_links false allows at most {n - 1})"
            )
        if mp is None:
            mp = np.zeros((n, n))
        if mp.shape != (n, n):
            raise ValueError(f"mp must be {n}x{n}, got {mp.shape}")
        if not sp.issparse(mp):
            mp = np.asarray(mp, dtype=float)
        return cls(n, d, groups, mp, options, odd_ports)

    def result(self) -> TopologyFinderResult:
        o = self.options
        for matrix in (self.X, self.ar, self.mpm):
            matrix.setflags(write=False)  # a Topology then keeps X as it is, not a copy (2 GiB at n = 16,384)
        return TopologyFinderResult(
            X=self.X,
            ar_matrix=self.ar,
            mp_matrix=self.mpm,
            jumps=self.jumps,
            virtual_jumps=self.virtual,
            routing=Routing(rings=self.rings, paths=self.paths, offset_routes=self.offset_routes),
            d_allreduce=self.d_a,
            d_mp=self.d_mp,
            ports=dict(self.ports),
            group_weights=self.weights,
            group_kind=tuple(self.final_kinds),
            coin_dist=self.dist,
            n=self.n,
            d=self.d,
            directed=o.directed,
            mode=o.mode,
            split=o.split,
            select=o.select,
            notes=tuple(self.notes),
            rewired=self.rewired,
            routing_jumps=self.routing_jumps,
        )


def _weigh_traffic(run: _FinderRun) -> None:
    """1. Classify the groups; the authors' weights ``W[k] += S (2k-1)/k`` per coset group size,
    ``T_AR = sum S (2k-1)`` over all groups with traffic, and the MP bytes off the diagonal."""
    run.kinds, run.coset, run.members = classify_groups(run.groups, run.n)
    run.t_ar = allreduce_bytes_total(zip(run.members, (S for _, S in run.groups)))
    for kind, mem, (_, S) in zip(run.kinds, run.members, run.groups):
        if kind == "coset":
            k = mem.size
            run.weights[k] = run.weights.get(k, 0.0) + S * (2 * k - 1) / k
    mp = run.mp
    run.mp_total = float(mp.sum() - mp.diagonal().sum()) if sp.issparse(mp) else float(mp.sum() - np.trace(mp))


def _split_degree(run: _FinderRun) -> None:
    """2. Ports for AllReduce rings (``d_A``) and for MP matchings (``d_MP``)."""
    n, d, o = run.n, run.d, run.options
    run.d_a, run.d_mp = degree_split(d, run.t_ar, run.mp_total, split=o.split, directed=o.directed)
    if run.odd_ports:  # rings take every port they can (an even number); the last one goes to a near-perfect matching
        if run.t_ar > 0 and run.d_a != d - 1:
            run.notes.append(
                f"n={n} and d={d} odd: {d - 1} ports go to AllReduce rings, the last to one MP matching "
                f"round that leaves one server's port free (regular false)"
            )
        run.d_a, run.d_mp = (d - 1, 1) if run.t_ar > 0 else (0, d)
    elif run.d_mp and not o.directed and n % 2:
        run.notes.append(f"n={n} odd: no perfect matching, all {d} ports go to AllReduce rings")
        run.d_a, run.d_mp = d, 0


def _allocate_ring_ports(run: _FinderRun) -> None:
    """3. AllReduce ports per group size (paper: proportional to ``W``; authors: the heaviest size
    takes them all); ports no coset size takes go to full n-rings."""
    n, o = run.n, run.options
    mode = "proportional" if o.mode == "paper" else "heaviest"
    run.ports = allocate_ports(run.weights, run.d_a, n, mode=mode, directed=o.directed)
    spare = run.d_a - sum(run.ports.values())
    if spare > 0:  # no coset group at all (only ordered groups): spend on full n-rings
        run.ports[n] = run.ports.get(n, 0) + spare
        run.notes.append(f"{spare} AllReduce ports without a coset group size went to full {n}-rings")
    if n in run.ports and n not in run.weights:
        run.notes.append(f"connectivity ring: {run.ports[n]} ports on a full {n}-ring (group size {n} has no traffic)")


def _choose_jumps(run: _FinderRun) -> None:
    """4.-5. TotientPerms candidates and SelectPermutations per group size, heaviest first; the
    circulant of the chosen jumps, and CoinChangeMod routes over them."""
    n, o = run.n, run.options
    for k, pk in run.ports.items():
        cands = totient_perms(n, k)
        m = pk // jump_ports(n, int(cands[0]), o.directed)
        picked = select_permutations(
            cands, m, n=n, rule=o.rule, mode=o.mode, directed=o.directed, fixed=tuple(run.chosen), seed=o.seed
        )
        run.jumps[k] = picked
        run.chosen.extend(picked)
    run.ar = circulant_matrix(n, run.chosen, o.directed) if run.chosen else np.zeros((n, n), dtype=np.int64)
    run.dist, run.offset_routes = coin_change_mod(n, run.chosen, directed=o.directed, max_routes=o.max_routes)


def _build_rings(run: _FinderRun) -> None:
    """6. The rings of every group (:func:`group_rings`)."""
    run.rings, run.final_kinds, run.virtual = group_rings(
        run.n, run.kinds, run.coset, run.members, run.jumps, run.dist, run.options.directed, run.notes
    )
    run.ring_rows = [row[row >= 0] for row in run.rings.order]


def _match_mp_links(run: _FinderRun) -> None:
    """7. MP links by repeated max-weight matching over the ports the rings left. With no ring ports
    (``d_A = 0``) the AllReduce traffic can only ride these links, so the matching weighs it too:
    each group's ring in member order, ``2(k-1)/k x S`` per edge (two disjoint pair groups at
    degree 1 were matched across, inf). Free ports left by near-perfect rounds are linked, and a
    topology without rings is made connected."""
    n, d, o, mp = run.n, run.d, run.options, run.mp
    weights = mp
    if run.d_a == 0 and run.t_ar > 0:
        live = [(mem, S) for kind, mem, (_, S) in zip(run.kinds, run.members, run.groups) if kind != "trivial"]
        src = np.concatenate([mem for mem, _ in live])
        ring = sp.coo_matrix(
            (
                np.concatenate([np.full(mem.size, 2 * (mem.size - 1) / mem.size * S) for mem, S in live]),
                (src, np.concatenate([np.roll(mem, -1) for mem, _ in live])),
            ),
            shape=(n, n),
        )
        weights = sp.csr_matrix(mp) + ring if sp.issparse(mp) else mp + ring.toarray()
    run.mpm = repeated_matching(
        weights, run.d_mp, seed=o.seed, method=o.matching, directed=o.directed, base=run.ar, tie_break=o.mp_tie_break
    )
    run.X = run.ar + run.mpm
    if run.odd_ports:  # near-perfect rounds may leave free ports on different servers: link them
        run.mpm += _link_free_ports(run.X, d, o.multi_links)
        run.X = run.ar + run.mpm
    if run.d_a == 0 and d >= (1 if o.directed else 2):  # undirected, d = 1: a matching, never connected
        if connected_components(run.X > 0, directed=o.directed, connection="strong")[0] > 1:
            connect_components(run.X, np.random.default_rng(o.seed), directed=o.directed)
            run.mpm = run.X - run.ar
            run.notes.append("no AllReduce rings: MP matching links rewired to connect the topology")


def _remove_parallel_links(run: _FinderRun) -> None:
    """7b. ``multi_links=False``: rewire the parallel links by degree-preserving swaps (the links
    carrying the least ring + MP traffic first), then redo CoinChangeMod over the chosen jumps whose
    links all survived."""
    n, o, X = run.n, run.options, run.X
    before = parallel_link_count(X, o.directed)
    if not before:
        return
    w = run.mp.toarray() if sp.issparse(run.mp) else np.array(run.mp, dtype=float)
    np.fill_diagonal(w, 0.0)
    for r, g, f in zip(run.ring_rows, run.rings.group.tolist(), run.rings.fraction.tolist()):
        np.add.at(w, (r, np.roll(r, -1)), float(run.groups[g][1]) * f)
    run.rewired = remove_parallel_links(X, directed=o.directed, weight=w, seed=o.seed)
    run.ar = np.minimum(run.ar, X)
    run.mpm = X - run.ar
    idx = np.arange(n)
    whole = []
    for j in run.chosen:
        j = int(j) % n
        key = j if o.directed else min(j, n - j)
        if key and key not in whole and (X[idx, (idx + key) % n] > 0).all():
            whole.append(key)
    run.routing_jumps = tuple(whole)
    run.dist, run.offset_routes = coin_change_mod(n, run.routing_jumps, directed=o.directed, max_routes=o.max_routes)
    run.repaired = True
    broken = sorted({(int(j) % n if o.directed else min(int(j) % n, n - int(j) % n)) for j in run.chosen} - set(whole))
    note = (
        f"multi_links false: {run.rewired} degree-preserving link swaps ({2 * run.rewired} links rewired) removed "
        f"{before} parallel links"
    )
    if broken:
        note += (
            f"; jumps {broken} lost links, so CoinChangeMod routes over {list(run.routing_jumps)} and "
            "explicit shortest paths carry the rest"
        )
    run.notes.append(note)


def _route_explicit_paths(run: _FinderRun) -> None:
    """8. Explicit paths for the pairs with traffic (MP demand, hops of rings that are not on the
    circulant, every ring hop after a repair) where the whole topology is shorter than the circulant
    routes, or reaches what they cannot."""
    n, o, mp, dist = run.n, run.options, run.mp, run.dist
    if not (run.d_mp > 0 or (dist < 0).any() or run.repaired):
        return
    if sp.issparse(mp):
        C = mp.tocoo()
        src, dst = C.row.astype(np.int64), C.col.astype(np.int64)
        keep = (C.data > 0) & (src != dst)
        src, dst = src[keep], dst[keep]
    else:
        src, dst = np.nonzero(mp > 0)
        keep = src != dst
        src, dst = src[keep].astype(np.int64), dst[keep].astype(np.int64)
    hs, hd = [src], [dst]
    for r, g in zip(run.ring_rows, run.rings.group.tolist()):
        if run.final_kinds[g] in ("ordered", "routed") or run.repaired:  # repaired: a coset ring's jump may be gone
            hs.append(r)
            hd.append(np.roll(r, -1))
    src, dst = np.concatenate(hs), np.concatenate(hd)
    if not src.size:
        return
    key = np.sort(src * n + dst)  # sort-based dedupe: numpy's hash unique is slow on ~1e6 keys
    key = key[np.r_[True, key[1:] != key[:-1]]]
    src, dst = key // n, key % n
    cd = dist[(dst - src) % n].astype(float)
    cd[cd < 0] = np.inf
    bd, bp = route_pairs(run.X, src, dst, method="shortest", shorter_than=cd)
    if o.mp_routing == "shortest":
        run.paths = bp
    else:
        need = (bd >= 0) & (bd < cd)
        _, run.paths = route_pairs(run.X, src[need], dst[need], method=o.mp_routing, k=o.mp_k)
    unreach = int(((bd < 0) & ~np.isfinite(cd)).sum())
    if unreach:
        run.notes.append(f"{unreach} pairs with traffic are unreachable")
