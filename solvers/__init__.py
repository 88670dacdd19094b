"""Solver back-ends behind one small interface (installed as topoopt_ilp.solvers)."""
