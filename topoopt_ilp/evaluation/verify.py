"""The verifier: checks a solution against its instance, independently of any model code.

It answers "is this a valid design, and are its stated numbers true?" with a list of violations:
ports and degrees, symmetry, topology family and fixed topology, a path for every demand pair,
AllReduce rings, routes (paths on existing links carrying each demand exactly), the stated metrics
against the evaluator, and the stated bound and gap against the objective (and status optimal
against its gap). Every violation found is reported, not only the first.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import breadth_first_order, connected_components

from topoopt_ilp.core.checks import brief
from topoopt_ilp.core.instance import Instance, with_job_choice
from topoopt_ilp.core.solution import METHODS_WITHOUT_BOUNDS, Solution
from topoopt_ilp.core.strategy import parse_strategy, validate_strategy
from topoopt_ilp.core.traffic import effective_demand
from topoopt_ilp.errors import InputError, InstanceError
from topoopt_ilp.evaluation.evaluate import ROUTING_MODES, RoutingError, evaluate, objective_value

__all__ = [
    "VerifyReport",
    "ViolationList",
    "MAX_VIOLATION_CHARS",
    "verify",
    "direction_mismatch",
    "reachability_violations",
]

_REL_TOL = 1e-6
# The exact methods call a solve optimal when its relative gap is within the requested gap, by default
# 1e-4 (solvers.options.DEFAULT_REL_GAP; models' _tol and joint's checks use the same number). An
# instance's solver.gap, the command line's default for --gap, raises it.
_OPTIMAL_REL_GAP = 1e-4
# A stated gap must match |objective - bound| / |objective| (the definition used by solvers.result.
# relative_gap and models.close_gap) within this (absolute, plus as much relative).
_GAP_TOL = 1e-6


#: Longest violation line a report of an exported file shows.
MAX_VIOLATION_CHARS = 300


@dataclass(frozen=True)
class VerifyReport:
    violations: tuple[str, ...] = field(default_factory=tuple)

    @property
    def valid(self) -> bool:
        return not self.violations

    def __bool__(self) -> bool:
        return self.valid


class ViolationList:
    """Violations gathered by kind, as the checks of exported files report them: each line once, at
    most ``shown`` of a kind listed and the rest counted (``kind: 12 more``), every line cut to
    :data:`MAX_VIOLATION_CHARS` so that a hostile file's values are never echoed at length."""

    def __init__(self, shown: int = 10) -> None:
        self.shown = shown
        self.lines: list[str] = []
        self.listed: Counter[str] = Counter()
        self.hidden: Counter[str] = Counter()

    def add(self, kind: str, text: str) -> None:
        line = f"{kind}: {text}"
        if len(line) > MAX_VIOLATION_CHARS:
            line = line[: MAX_VIOLATION_CHARS - 3] + "..."
        if line in self.lines:
            return
        if self.listed[kind] < self.shown:
            self.lines.append(line)
            self.listed[kind] += 1
        else:
            self.hidden[kind] += 1

    def report(self) -> VerifyReport:
        return VerifyReport(tuple(self.lines + [f"{kind}: {c} more" for kind, c in sorted(self.hidden.items())]))


def _topology_violations(instance: Instance, x: np.ndarray, jumps) -> list[str]:
    out: list[str] = []
    c = instance.cluster
    n, d = c.servers, c.degree
    if x.shape != (n, n):
        return [f"topology has {x.shape[0]} servers, the instance has {n}"]
    if (x < 0).any():
        out.append("topology has a negative link count")
    if np.diag(x).any():
        v = int(np.flatnonzero(np.diag(x))[0])
        out.append(f"server {v} has a link to itself")
    links = np.nonzero(x)  # one scan of the matrix (2 GiB at n = 16,384) for the checks below
    if not c.directed:
        asymmetric = _first_asymmetric(x, links)
        if asymmetric is not None:
            i, j = asymmetric
            out.append(f"undirected topology is not symmetric: {x[i, j]} links {i}->{j} but {x[j, i]} links {j}->{i}")
    degree_views = (
        [("out-degree", x.sum(axis=1)), ("in-degree", x.sum(axis=0))] if c.directed else [("degree", x.sum(axis=1))]
    )
    for label, used in degree_views:
        bad = np.flatnonzero(used != d) if c.regular else np.flatnonzero(used > d)
        for v in bad[:5]:
            need = f"exactly {d}" if c.regular else f"at most {d}"
            out.append(f"server {int(v)} has {label} {int(used[v])}, needs {need}")
    if not c.multi_links and (x > 1).any():
        i, j = map(int, np.argwhere(x > 1)[0])
        out.append(f"{int(x[i, j])} parallel links {i}->{j} but the instance forbids multi-links")
    family = instance.topology_family
    if family != "any" and jumps is None:
        out.append(f"topology_family is {family} but the solution states no jump set")
    if jumps is not None:  # stated jumps must match the links, whatever the family
        if any(not 1 <= int(j) <= n - 1 for j in jumps):
            out.append(f"jump set {brief(list(jumps))} has a jump outside 1..{n - 1}")
        elif not _is_circulant_of(x, links, jumps, c.directed):
            out.append(f"links are not the circulant of the stated jumps {brief(list(jumps))}")
        if family == "coprime_circulant":
            for j in jumps:
                if math.gcd(int(j), n) != 1:
                    out.append(f"jump {j} is not coprime with {n} (topology_family coprime_circulant)")
    fixed = instance.fixed_topology_matrix()
    if fixed is not None and not np.array_equal(fixed, x):
        out.append("the instance fixes the topology, and the solution's links differ from it")
    return out


def _first_asymmetric(x: np.ndarray, links: tuple[np.ndarray, np.ndarray]) -> tuple[int, int] | None:
    """The first position (row-major) where ``x`` differs from its transpose, None when symmetric;
    ``links``: ``np.nonzero(x)``. Such a position or its mirror holds a link, so only the links are
    compared (``x != x.T`` would walk the whole n x n matrix in transposed order: 6 s at n = 16,384)."""
    i, j = links
    bad = x[j, i] != x[i, j]
    if not bad.any():
        return None
    n = x.shape[0]
    key = min(int((i[bad] * n + j[bad]).min()), int((j[bad] * n + i[bad]).min()))
    return key // n, key % n


def _is_circulant_of(x: np.ndarray, links: tuple[np.ndarray, np.ndarray], jumps, directed: bool) -> bool:
    """Whether the links of ``x`` (``links``: ``np.nonzero(x)``) are those of the circulant of
    ``jumps`` (each jump j links every i to i + j, and undirected also to i - j, once when 2j = n),
    counted link by link. Written here on purpose (not imported from graph/heuristic): the verifier
    shares no code with producers. The links are compared as (arc, count) lists, not as n x n
    matrices (2 GiB each at n = 16,384)."""
    n = x.shape[0]
    offsets = []
    for j in jumps:
        offsets.append(int(j) % n)
        if not directed and 2 * int(j) != n:
            offsets.append(-int(j) % n)
    servers = np.arange(n, dtype=np.int64)
    arcs = np.concatenate([servers * n + (servers + o) % n for o in offsets]) if offsets else np.zeros(0, np.int64)
    expected_arcs, expected_counts = np.unique(arcs, return_counts=True)
    i, j = links
    return np.array_equal(i.astype(np.int64) * n + j, expected_arcs) and np.array_equal(x[i, j], expected_counts)


def _ring_violations(instance: Instance, sol: Solution) -> list[str]:
    rings = sol.routing.rings
    if not len(rings):
        return []
    groups = effective_demand(instance, sol.placement)[0].allreduce
    out: list[str] = []
    totals = np.zeros(len(groups))
    for r in range(len(rings)):
        g = int(rings.group[r])
        if not 0 <= g < len(groups):
            out.append(f"ring {r} names AllReduce group {g}, the instance has {len(groups)}")
            continue
        row = rings.order[r]
        order = row[: _padded_length(row, -1)]
        if (order < 0).any():  # -1 pads the rows at their end only: one inside names no server
            out.append(f"ring {r} of group {g} names server {int(order[order < 0][0])}, which does not exist")
            continue
        if sorted(order.tolist()) != sorted(groups[g].members):
            out.append(f"ring {r} of group {g} does not visit each member of the group exactly once")
        if rings.fraction[r] < 0:
            out.append(f"ring {r} has a negative fraction")
        totals[g] += rings.fraction[r]
    for g in np.flatnonzero(np.abs(totals - 1.0) > 1e-6):
        out.append(f"the rings of AllReduce group {int(g)} carry {totals[g]:.6g} of its bytes, not all of them")
    return out


def _route_violations(instance: Instance, sol: Solution, x: np.ndarray) -> list[str]:
    """Every path runs over links without repeating a server; every offset route's jumps are links at
    every server. Screened over whole arrays (a design at cluster size has millions of hops); only the
    rows that fail are walked one by one, to name what is wrong."""
    n = instance.n
    paths = sol.routing.paths
    out: list[str] = []
    if len(paths):
        if paths.nodes.max() >= n:
            return [f"a path names a server >= {n}"]
        for p in _suspect_paths(paths.nodes, x):
            out += _path_violations(p, paths.nodes[p], x)
            if len(out) >= 20:
                break
    offs = sol.routing.offset_routes
    if len(offs):
        for r in _suspect_offset_routes(offs.jumps, x):
            out += _offset_route_violations(r, int(offs.offset[r]), offs.jumps[r], x)
    return out


def _suspect_paths(nodes: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The rows of a -1-padded path array that break a rule (a superset is fine, none may be missed)."""
    named = nodes >= 0
    hop = named[:, :-1] & named[:, 1:]
    bad = ~named[:, 0] | ~named[:, 1] if nodes.shape[1] >= 2 else np.ones(len(nodes), bool)
    bad |= (~named[:, :-1] & named[:, 1:]).any(axis=1)  # -1 inside a row, not at its end
    if nodes.shape[1] >= 2:
        a, b = np.where(hop, nodes[:, :-1], 0), np.where(hop, nodes[:, 1:], 0)
        bad |= (hop & (x[a, b] <= 0)).any(axis=1)
        ordered = np.sort(np.where(named, nodes, -np.arange(1, nodes.shape[1] + 1)), axis=1)
        bad |= ((ordered[:, 1:] == ordered[:, :-1]) & (ordered[:, 1:] >= 0)).any(axis=1)
    return np.flatnonzero(bad)


def _path_violations(p: int, nodes: np.ndarray, x: np.ndarray) -> list[str]:
    row = nodes[: _padded_length(nodes, -1)]
    if (row < 0).any():  # -1 pads the rows at their end only: one inside names no server
        return [f"path {p} names server {int(row[row < 0][0])}, which does not exist"]
    if len(row) < 2:
        return [f"path {p} has fewer than 2 nodes"]
    out = []
    if len(set(row.tolist())) != len(row):
        out.append(f"path {p} visits a server twice: {brief(row.tolist())}")
    missing = x[row[:-1], row[1:]] <= 0
    if missing.any():
        h = int(np.flatnonzero(missing)[0])
        out.append(f"path {p} uses {int(row[h])}->{int(row[h + 1])}, which is not a link")
    return out


def _suspect_offset_routes(jumps: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The rows of a 0-padded jump array that break a rule. A route for offset o starts at every server
    at once, so its hop with jump j runs from every server: j must be a link at all of them."""
    n = len(x)
    idx = np.arange(n)
    values = np.unique(jumps % n)
    link_everywhere = np.zeros(n, dtype=bool)
    for j in values[values > 0]:
        link_everywhere[j] = bool((x[idx, (idx + j) % n] > 0).all())
    used = jumps != 0
    padded = np.maximum.accumulate(used[:, ::-1], axis=1)[:, ::-1]  # True up to each row's last jump
    bad = (padded & ~used).any(axis=1)  # a 0 jump before the row's end
    bad |= (used & ~link_everywhere[jumps % n]).any(axis=1)
    return np.flatnonzero(bad)


def _offset_route_violations(r: int, offset: int, row: np.ndarray, x: np.ndarray) -> list[str]:
    n = len(x)
    jumps = row[: _padded_length(row, 0)]
    if (jumps == 0).any():  # 0 pads the rows at their end only: a 0 jump inside is no link
        return [f"offset route {r} (offset {offset}) has a 0 jump, which is not a link"]
    node = np.arange(n)
    for j in jumps:
        nxt = (node + int(j)) % n
        if (x[node, nxt] <= 0).any():
            s = int(np.flatnonzero(x[node, nxt] <= 0)[0])
            return [
                f"offset route {r} (offset {offset}) uses jump {int(j)}, which is not a link at server {int(node[s])}"
            ]
        node = nxt
    return []


def _padded_length(row: np.ndarray, fill: int) -> int:
    """The length of ``row`` without the ``fill`` entries that pad it at its end."""
    kept = np.flatnonzero(row != fill)
    return int(kept[-1]) + 1 if kept.size else 0


def _placement_violations(instance: Instance, sol: Solution) -> list[str]:
    """A workload's placement: well-formed, configs allowed, memory respected (strategy.py's rules)."""
    if instance.workload is None:
        return ["the solution has a placement, but this instance has no workload to place"] if sol.placement else []
    if sol.placement is None:
        return ["the instance is a workload, and the solution states no placement"]

    try:
        strategy = parse_strategy(sol.placement, instance.workload, instance.n)
    except InstanceError as exc:  # its message usually names the placement field already
        return [str(exc) if str(exc).startswith("placement") else f"placement: {exc}"]
    return [f"placement: {v}" for v in validate_strategy(instance.workload, instance.n, strategy)]


def reachability_violations(instance: Instance, x: np.ndarray, placement: Mapping[str, Any] | None = None) -> list[str]:
    """Every demand pair needs a path in the topology ``x``: MP and all-to-all pairs (directed
    reachability on a directed instance), and any two members of an AllReduce group (whose ring
    passes bytes between them). A workload's demand is the one ``placement`` induces (None: its
    data-parallel default). One violation per demand kind or group, naming one unreachable pair.
    Written here (not graph.py's): the verifier shares no code with producers, which may call it
    (``solve`` does, to call a fixed topology that cannot carry the demand infeasible)."""
    n = instance.n
    directed = instance.cluster.directed
    demand = effective_demand(instance, placement)[0]
    adj = sp.csr_matrix((x > 0).astype(np.int8))
    ncomp, labels = connected_components(adj, directed=directed, connection="strong")
    if ncomp == 1:
        return []
    out: list[str] = []
    bad = None
    if demand.all_to_all:  # every pair of distinct servers: no n x n matrix to find the first one cut
        bad = _first_unreachable(adj, labels, directed)
    else:
        mp = demand.mp_matrix(n)
        np.fill_diagonal(mp, 0.0)
        src, dst = np.nonzero(mp > 0)
        if not directed:
            cut = np.flatnonzero(labels[src] != labels[dst])
            if len(cut):
                bad = (int(src[cut[0]]), int(dst[cut[0]]))
        else:
            cross = labels[src] != labels[dst]  # same strong component: reachable both ways
            for s in np.unique(src[cross]):
                reach = np.zeros(n, dtype=bool)
                reach[breadth_first_order(adj, int(s), directed=True, return_predecessors=False)] = True
                targets = np.flatnonzero(mp[s] > 0)
                missing = targets[~reach[targets]]
                if len(missing):
                    bad = (int(s), int(missing[0]))
                    break
    if bad is not None:
        a, b = bad
        out.append(f"no path from {a} to {b} in the topology, but the demand sends bytes {a}->{b}")
    for g, group in enumerate(demand.allreduce):
        members = [int(m) for m in group.members]
        if len(members) < 2 or not group.bytes > 0:
            continue
        # mutual reachability is the strong-component relation: all members in one component
        first = members[0]
        other = next((m for m in members[1:] if labels[m] != labels[first]), None)
        if other is None:
            continue
        a, b = first, other
        if directed:
            reach = np.zeros(n, dtype=bool)
            reach[breadth_first_order(adj, first, directed=True, return_predecessors=False)] = True
            if reach[other]:
                a, b = other, first
        out.append(
            f"no path from {a} to {b} in the topology, but both are members of AllReduce group {g}, "
            "whose ring sends bytes between them"
        )
        if len(out) >= 6:
            break
    return out


def _first_unreachable(adj: sp.csr_matrix, labels: np.ndarray, directed: bool) -> tuple[int, int] | None:
    """The first pair (s, t) of distinct servers, in row-major order, with no path from s to t, on a
    topology of more than one (strong) component: what the demand's matrix would name when every
    pair has traffic."""
    n = len(labels)
    if not directed:
        return 0, int(np.flatnonzero(labels != labels[0])[0])
    for s in range(n):
        reach = np.zeros(n, dtype=bool)
        reach[breadth_first_order(adj, s, directed=True, return_predecessors=False)] = True
        reach[s] = True
        if not reach.all():
            return s, int(np.flatnonzero(~reach)[0])
    return None


def _claim_violations(instance: Instance, sol: Solution) -> list[str]:
    """The stated status, objective, bound and gap against each other: a bound on the right side of
    the objective, a gap that is what objective and bound give, and status optimal backed by a bound
    within the gap at which the exact methods call a solve optimal."""
    out: list[str] = []
    if sol.status not in ("optimal", "feasible"):
        return out
    if sol.method in METHODS_WITHOUT_BOUNDS and (sol.status == "optimal" or sol.bound is not None):
        # A relabelled heuristic solution would otherwise pass with bound = objective and gap 0.
        claim = "status optimal" if sol.status == "optimal" else f"bound {sol.bound:.12g}"
        out.append(f"{claim} from method {sol.method}, which proves no bound (only the exact method does)")
    if sol.status == "optimal" and sol.bound is None:  # a claim of optimality needs its proof
        out.append("status optimal but the solution states no bound")
    obj, bound, gap = sol.objective, sol.bound, sol.gap
    finite = [v is not None and math.isfinite(float(v)) for v in (obj, bound)]
    if gap is not None and math.isfinite(float(gap)) and gap < 0:
        out.append(f"gap is {gap}, a gap is never negative")
    if gap is not None and math.isfinite(float(gap)) and bound is None:  # a gap is measured against a bound
        out.append(f"gap is {gap:.9g}, but the solution states no bound it would be measured against")
    if not all(finite):
        return out
    obj, bound = float(obj), float(bound)
    maximise = instance.objective == "throughput"
    slack = _REL_TOL * max(abs(obj), abs(bound)) + 1e-15
    if not maximise and bound > obj + slack:
        out.append(
            f"bound {bound:.12g} is above the objective {obj:.12g}, but {instance.objective} is minimised: "
            "a lower bound cannot exceed a value that was reached"
        )
    if maximise and bound < obj - slack:
        out.append(
            f"bound {bound:.12g} is below the objective {obj:.12g}, but throughput is maximised: "
            "an upper bound cannot be below a value that was reached"
        )
    diff = abs(obj - bound)
    if gap is not None and obj != 0.0:
        expected = diff / abs(obj)
        if math.isinf(float(gap)) or abs(float(gap) - expected) > _GAP_TOL * (1.0 + expected):
            out.append(
                f"gap is {gap:.9g}, but objective {obj:.12g} and bound {bound:.12g} give "
                f"|objective - bound| / |objective| = {expected:.9g}"
            )
    if sol.status == "optimal":
        tol = max(_OPTIMAL_REL_GAP, float(instance.solver.gap or 0.0))
        scale = max(abs(obj), abs(bound))  # the solver layer's denominator (solvers.result._gap_closed)
        if diff > tol * scale * (1 + 1e-9) + 1e-12:
            out.append(
                f"status optimal but objective {obj:.12g} and bound {bound:.12g} are {diff / scale:.3g} apart "
                f"(relative), more than the gap {tol:g} within which a solve is called optimal"
            )
    return out


def _metric_violations(instance: Instance, sol: Solution) -> list[str]:
    stated = sol.metrics or {}
    # Evaluated even without stated metrics: this is where a routing that drops traffic shows up.
    mode = stated.get("routing", "given")
    if mode not in ROUTING_MODES:
        return [f"metrics.routing is {brief(mode)}, not one of {', '.join(ROUTING_MODES)}"]
    try:
        metrics = evaluate(instance, sol, routing=mode)
    except RoutingError as exc:
        return [f"routing does not carry the demand: {exc.reason}"]
    m = metrics.as_dict()
    out = []
    for key, value in stated.items():
        if key not in m or key == "routing":
            continue
        ours = m[key]
        if isinstance(ours, list):
            listed = isinstance(value, (list, tuple))
            if not listed or len(value) != len(ours) or any(not _close(a, b) for a, b in zip(value, ours)):
                out.append(f"metrics.{key} is {brief(value)}, recomputed {brief(ours)}")
        elif not _close(value, ours):
            out.append(f"metrics.{key} is {brief(value)}, recomputed {ours}")
    if sol.objective is not None and sol.status in ("optimal", "feasible"):
        ours = objective_value(instance, metrics)
        if not _close(sol.objective, ours):
            out.append(
                f"objective is {sol.objective}, the evaluator gives {ours} ({instance.objective}, {mode} routing)"
            )
    return out


def _close(a, b) -> bool:
    if a is None:  # JSON null stands for a non-finite number
        return b is None or (isinstance(b, float) and not math.isfinite(b))
    if isinstance(a, bool) or isinstance(b, bool):
        return a == b
    try:
        a, b = float(a), float(b)
    except (TypeError, ValueError):
        return False
    if math.isinf(a) or math.isinf(b):
        return a == b
    # Relative: times are micro- to milliseconds, throughputs thousands; 1e-15 absorbs exact zeros.
    return abs(a - b) <= _REL_TOL * max(abs(a), abs(b)) + 1e-15


def direction_mismatch(instance: Instance, solution: Solution) -> str | None:
    """The solution file's ``topology.directed`` against the instance's links, or None when they agree
    (or the solution was not read from a file that says)."""
    stated = solution.topology.stated_directed if solution.topology is not None else None
    if stated is None or stated == instance.cluster.directed:
        return None
    kind = {True: "directed", False: "undirected"}
    return f"the solution's links are {kind[stated]}, the instance's {kind[instance.cluster.directed]}"


def verify(instance: Instance, solution: Solution, *, check_metrics: bool = True) -> VerifyReport:
    """Every violation of the instance's rules by the solution, and (``check_metrics``) every stated
    metric that the evaluator does not reproduce. An empty report means valid."""
    if solution.status not in ("optimal", "feasible"):
        if solution.topology is not None:
            return VerifyReport((f"status {solution.status} but the solution carries a topology",))
        return VerifyReport()
    try:  # the job's split and mapping as the solution chose them
        instance = with_job_choice(instance, solution.job)
    except InputError as exc:
        return VerifyReport((f"the solution's job choice: {exc}",))
    claims = _claim_violations(instance, solution)
    if solution.topology is None:
        return VerifyReport((f"status {solution.status} but the solution has no topology", *claims))
    mismatch = direction_mismatch(instance, solution)
    if mismatch:  # its links were read the instance's way: degree errors would hide the real cause
        return VerifyReport((mismatch, *claims))
    x = solution.topology.matrix
    out = claims + _topology_violations(instance, x, solution.topology.jumps)
    if x.shape != (instance.n, instance.n):
        return VerifyReport(tuple(out))
    placement = _placement_violations(instance, solution)
    if placement:  # the rings, demand pairs and metrics below depend on the demand that the placement induces
        return VerifyReport(tuple(out + placement))
    out += reachability_violations(instance, x, solution.placement)
    out += _ring_violations(instance, solution)
    out += _route_violations(instance, solution, x)
    if len(out) == len(claims) and check_metrics:  # metrics: only for a design that is otherwise valid
        out += _metric_violations(instance, solution)
    return VerifyReport(tuple(out))
