"""Exact topology models: the topology + routing MILP, its starts, circulant and catalogue searches, MP matching, OCS permutations."""
