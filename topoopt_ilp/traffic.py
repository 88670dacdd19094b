"""From an instance's demand (and a choice of AllReduce rings) to byte matrices.

Ring AllReduce over k members sends ``2(k-1)/k * S`` bytes from each member to its ring successor
(design §3). AllReduce is mutable: which ring (member order) and how the bytes split over several
rings is a decision, recorded in a :class:`~topoopt_ilp.routing.RingSet`. Without one, every group
uses a single ring in the order its members are listed.
"""

from __future__ import annotations

import numpy as np

from .instance import Instance
from .routing import RingSet

__all__ = ["default_rings", "ring_traffic", "traffic_matrix", "group_traffic"]


def default_rings(instance: Instance) -> RingSet:
    """One ring per AllReduce group, in the order its members are listed."""
    groups = instance.demand.allreduce if instance.demand is not None else ()
    return RingSet.from_lists((g, group.members, 1.0) for g, group in enumerate(groups)) if groups else RingSet.empty()


def ring_traffic(instance: Instance, rings: RingSet, only_group: int | None = None) -> np.ndarray:
    """Bytes each ring member sends to its successor, summed over rings (n x n)."""
    n = instance.n
    out = np.zeros((n, n))
    groups = instance.demand.allreduce
    for r in range(len(rings)):
        g = int(rings.group[r])
        if only_group is not None and g != only_group:
            continue
        order = rings.order[r][rings.order[r] >= 0]
        amount = rings.fraction[r] * groups[g].bytes_per_member()
        np.add.at(out, (order, np.roll(order, -1)), amount)
    return out


def traffic_matrix(instance: Instance, rings: RingSet | None = None) -> np.ndarray:
    """All bytes ``D[i, j]`` that server i sends to server j in one iteration."""
    if rings is None or len(rings) == 0:
        rings = default_rings(instance)
    return ring_traffic(instance, rings) + instance.demand.mp_matrix(instance.n)


def group_traffic(instance: Instance, rings: RingSet | None, group: int) -> np.ndarray:
    """The traffic of one AllReduce group alone."""
    if rings is None or len(rings) == 0:
        rings = default_rings(instance)
    return ring_traffic(instance, rings, only_group=group)
