"""Placement, topology and routing at once: the joint MILP, its enumeration, symmetry and cycle cuts."""
