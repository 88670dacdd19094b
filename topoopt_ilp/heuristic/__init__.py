"""TopoOpt's TopologyFinder heuristic and the baseline topologies, one module per algorithm.

* :mod:`.totient` - TotientPerms candidates (:func:`totient_perms`, :func:`candidate_jumps`).
* :mod:`.select` - SelectPermutations rules (:func:`geometric_rule`, :func:`best_rule`).
* :mod:`.circulant` - circulant matrices and BFS over residues.
* :mod:`.coin_change` - CoinChangeMod routing (:func:`coin_change_mod`).
* :mod:`.degree` - degree split and port allocation.
* :mod:`.mp_links` - repeated max-weight matching and MP routing.
* :mod:`.baselines` - random expander, demand greedy ("dheu"), torus.
* :mod:`.simple` - parallel-link repair for ``multi_links: false`` (:func:`remove_parallel_links`).
* :mod:`.all_to_all` - a circulant with offset routes for uniform all-to-all (:func:`all_to_all_circulant`).
* :mod:`.finder` - :func:`topology_finder`, composing the above.
* :mod:`.design` - the heuristic applied to an instance: its demand, or a workload's data-parallel
  start (what ``--method heuristic`` returns).
"""

from __future__ import annotations

from topoopt_ilp.heuristic.all_to_all import AllToAllCirculant, all_to_all_circulant, coin_loads
from topoopt_ilp.heuristic.baselines import connect_components, demand_greedy, random_expander, torus
from topoopt_ilp.heuristic.circulant import (
    circulant_arcs,
    circulant_distances,
    circulant_matrix,
    circulant_stats,
    circulant_stats_batch,
    coin_set,
)
from topoopt_ilp.heuristic.coin_change import DEFAULT_MAX_ROUTES, coin_change_mod
from topoopt_ilp.heuristic.degree import allocate_ports, allreduce_bytes_total, degree_split
from topoopt_ilp.heuristic.finder import (
    SELECT_RULES,
    TopologyFinderResult,
    classify_groups,
    group_rings,
    topology_finder,
)
from topoopt_ilp.heuristic.mp_links import (
    BLOSSOM_EDGE_LIMIT,
    blossom_matching,
    distance_tie_break,
    greedy_matching,
    pair_hop_distances,
    repeated_matching,
    route_pairs,
)
from topoopt_ilp.heuristic.select import (
    DEFAULT_RULE,
    best_rule,
    canonical_jump_sets,
    geometric_rule,
    jump_set_score,
    select_permutations,
)
from topoopt_ilp.heuristic.simple import parallel_link_count, remove_parallel_links
from topoopt_ilp.heuristic.totient import candidate_jumps, coset_of, coset_rings, divisors, jump_ports, totient_perms

__all__ = [
    "AllToAllCirculant",
    "all_to_all_circulant",
    "coin_loads",
    "BLOSSOM_EDGE_LIMIT",
    "DEFAULT_MAX_ROUTES",
    "DEFAULT_RULE",
    "SELECT_RULES",
    "TopologyFinderResult",
    "allocate_ports",
    "best_rule",
    "blossom_matching",
    "candidate_jumps",
    "canonical_jump_sets",
    "circulant_distances",
    "circulant_arcs",
    "circulant_matrix",
    "circulant_stats",
    "circulant_stats_batch",
    "coin_change_mod",
    "coin_set",
    "connect_components",
    "classify_groups",
    "coset_of",
    "group_rings",
    "coset_rings",
    "allreduce_bytes_total",
    "degree_split",
    "demand_greedy",
    "distance_tie_break",
    "divisors",
    "geometric_rule",
    "greedy_matching",
    "jump_ports",
    "jump_set_score",
    "pair_hop_distances",
    "parallel_link_count",
    "random_expander",
    "remove_parallel_links",
    "repeated_matching",
    "route_pairs",
    "select_permutations",
    "topology_finder",
    "torus",
    "totient_perms",
]
