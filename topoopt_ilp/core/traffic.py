"""From an instance's demand (and a choice of AllReduce rings) to byte matrices.

Ring AllReduce over k members sends ``2(k-1)/k * S`` bytes from each member to its ring successor
(docs/guide/evaluator.md). AllReduce is mutable: which ring (member order) and how the bytes split over several
rings is a decision, recorded in a :class:`~topoopt_ilp.core.routes.RingSet`. Without one, every group
uses a single ring in the order its members are listed.

A workload instance has no fixed demand: its demand (and compute time per server) follows from a
placement, see :func:`effective_demand`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from topoopt_ilp.core.instance import Demand, Instance
from topoopt_ilp.core.routes import RingSet
from topoopt_ilp.core.strategy import data_parallel, mp_pair_tuples, parse_strategy, strategy_traffic
from topoopt_ilp.errors import InputError

__all__ = [
    "effective_demand",
    "default_rings",
    "ring_traffic",
    "traffic_matrix",
    "group_traffic",
    "group_traffic_pairs",
    "traffic_pairs",
    "all_to_all_pairs",
]


def effective_demand(instance: Instance, placement: Any = None) -> tuple[Demand, np.ndarray]:
    """The demand to route and the compute seconds per server.

    A demand instance returns its demand and zero compute. A workload instance derives both from
    ``placement`` (a strategy dict as in solution files; default: TopoOpt's data-parallel start).
    Raises :class:`~topoopt_ilp.errors.InstanceError` for a malformed placement.
    """
    n = instance.n
    if instance.workload is None:
        return instance.demand, np.zeros(n)

    w = instance.workload
    strategy = data_parallel(w, n) if placement is None else parse_strategy(placement, w, n)
    groups, pairs, compute = strategy_traffic(w, n, strategy)
    return Demand(allreduce=tuple(groups), mp=mp_pair_tuples(pairs)), compute


def _demand(instance: Instance, demand: Demand | None) -> Demand:
    return demand if demand is not None else instance.demand


def default_rings(instance: Instance, demand: Demand | None = None) -> RingSet:
    """One ring per AllReduce group, in the order its members are listed."""
    groups = _demand(instance, demand).allreduce
    return RingSet.from_lists((g, group.members, 1.0) for g, group in enumerate(groups)) if groups else RingSet.empty()


def ring_traffic(
    instance: Instance, rings: RingSet, only_group: int | None = None, demand: Demand | None = None
) -> np.ndarray:
    """Bytes each ring member sends to its successor, summed over rings (n x n)."""
    n = instance.n
    out = np.zeros((n, n))
    groups = _demand(instance, demand).allreduce
    for r in range(len(rings)):
        g = int(rings.group[r])
        if only_group is not None and g != only_group:
            continue
        if not 0 <= g < len(groups):
            raise InputError(f"ring {r} names AllReduce group {g}, the demand has {len(groups)} group(s)")
        order = rings.order[r][rings.order[r] >= 0]
        amount = rings.fraction[r] * groups[g].bytes_per_member()
        np.add.at(out, (order, np.roll(order, -1)), amount)
    return out


def traffic_matrix(instance: Instance, rings: RingSet | None = None, demand: Demand | None = None) -> np.ndarray:
    """All bytes ``D[i, j]`` that server i sends to server j in one iteration."""
    dm = _demand(instance, demand)
    if rings is None or len(rings) == 0:
        rings = default_rings(instance, dm)
    return ring_traffic(instance, rings, demand=dm) + dm.mp_matrix(instance.n)


def group_traffic(instance: Instance, rings: RingSet | None, group: int, demand: Demand | None = None) -> np.ndarray:
    """The traffic of one AllReduce group alone."""
    dm = _demand(instance, demand)
    if rings is None or len(rings) == 0:
        rings = default_rings(instance, dm)
    return ring_traffic(instance, rings, only_group=group, demand=dm)


def group_traffic_pairs(
    instance: Instance, rings: RingSet | None, group: int, demand: Demand | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`group_traffic` as its pairs with traffic: their positions ``s * n + t`` (ascending)
    and bytes, each the same sum, added in the same order, as the matrix's entry. Memory grows with
    the group's ring, not with n^2."""
    return traffic_pairs(instance, rings, demand, group=group)


def traffic_pairs(
    instance: Instance, rings: RingSet | None = None, demand: Demand | None = None, *, group: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`traffic_matrix` (``group`` None) or :func:`group_traffic` as the pairs with traffic:
    their positions ``s * n + t`` (ascending) and bytes, each equal to the matrix's entry to the last
    bit: the rings' bytes summed in ring order (numpy's ``bincount`` adds in order of occurrence, as
    ``add.at`` does), the MP pairs' likewise, then one added to the other. Memory grows with the
    rings and pairs, not with n^2. ``all_to_all`` traffic is every pair: use the matrix for it."""
    n = instance.n
    dm = _demand(instance, demand)
    if group is None and dm.all_to_all:
        raise ValueError("all-to-all traffic is every pair: use traffic_matrix")
    if rings is None or len(rings) == 0:
        rings = default_rings(instance, dm)
    groups = dm.allreduce
    keys, amounts = [np.zeros(0, dtype=np.int64)], [np.zeros(0)]
    for r in range(len(rings)) if group is None else np.flatnonzero(rings.group == group).tolist():
        g = int(rings.group[r])
        if not 0 <= g < len(groups):
            raise InputError(f"ring {r} names AllReduce group {g}, the demand has {len(groups)} group(s)")
        order = rings.order[r][rings.order[r] >= 0]
        keys.append(order * n + np.roll(order, -1))
        amounts.append(np.full(order.size, rings.fraction[r] * groups[g].bytes_per_member()))
    pair, total = _sums(np.concatenate(keys), np.concatenate(amounts))
    if group is None and dm.mp:
        mp_pair, mp_total = _mp_sums(dm, n)
        union = np.union1d(pair, mp_pair)
        total = _at(pair, total, union) + _at(mp_pair, mp_total, union)
        pair = union
    some = total != 0
    return pair[some], total[some]


def all_to_all_pairs(
    instance: Instance, rings: RingSet | None = None, demand: Demand | None = None
) -> tuple[float, np.ndarray, np.ndarray]:
    """:func:`traffic_matrix` of a demand with all-to-all bytes ``A``: ``A``, which every pair of
    distinct servers carries at least, and the pairs whose bytes the rings and MP pairs add to
    (positions ``s * n + t``, ascending, none on the diagonal) with their bytes, each equal to the
    matrix's entry to the last bit: ``rings + (mp + A)``, the order in which the matrix adds them.
    Memory grows with the rings and pairs, not with n^2."""
    n = instance.n
    dm = _demand(instance, demand)
    level = float(dm.all_to_all)
    ring_pair, ring_total = traffic_pairs(instance, rings, Demand(allreduce=dm.allreduce))
    mp_pair, mp_total = _mp_sums(dm, n)
    pair = np.union1d(ring_pair, mp_pair)
    mp_part = np.full(pair.size, level)
    mp_part[np.searchsorted(pair, mp_pair)] = mp_total + level
    total = _at(ring_pair, ring_total, pair) + mp_part
    off_diagonal = pair // n != pair % n
    return level, pair[off_diagonal], total[off_diagonal]


def _sums(keys: np.ndarray, amounts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct keys (ascending) and each one's amounts summed in order of occurrence."""
    pair, inverse = np.unique(keys, return_inverse=True)
    return pair, np.bincount(inverse.ravel(), weights=amounts, minlength=pair.size).astype(np.float64)


def _mp_sums(dm: Demand, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The MP pairs' positions ``s * n + t`` (ascending) and bytes, a pair listed twice summed in order."""
    mp = np.asarray(dm.mp, dtype=float).reshape(-1, 3)
    return _sums(mp[:, 0].astype(np.int64) * n + mp[:, 1].astype(np.int64), mp[:, 2])


def _at(keys: np.ndarray, values: np.ndarray, query: np.ndarray) -> np.ndarray:
    """``values`` at the sorted ``keys`` for every query key (all of them among ``query``), else 0."""
    out = np.zeros(query.size)
    out[np.searchsorted(query, keys)] = values
    return out
