"""Placement of a workload's layers and blocks on a fixed topology: MILP, local search, enumeration, bounds."""
