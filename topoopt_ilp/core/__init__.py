"""The canonical problem as data: instances, workloads, strategies, solutions, routes, traffic and graph routines. No files, no solvers."""
