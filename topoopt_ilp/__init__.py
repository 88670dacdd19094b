"""topoopt-ilp: topology, routing and placement for direct-connect DNN training clusters.

The public API the CLI is a thin layer over::

    from topoopt_ilp import load_instance, solve, evaluate, verify

    inst = load_instance("instances/testbed-12.json")
    sol = solve(inst, method="heuristic")
    print(sol.metrics["iteration_time_s"], verify(inst, sol).valid)
"""

from .errors import InputError, InstanceError, TopoOptError, UnsupportedError
from .evaluate import Metrics, evaluate
from .instance import AllReduceGroup, Cluster, Demand, FixedTopology, Instance, SolverDefaults
from .io import instance_to_dict, load_instance, load_solution, parse_instance, save_instance, save_solution
from .route import route
from .routing import OffsetRoutes, PathSet, RingSet, Routing
from .solution import Solution, Topology
from .solve import METHODS, solve
from .verify import VerifyReport, verify

__version__ = "0.1.0"

__all__ = [
    "AllReduceGroup", "Cluster", "Demand", "FixedTopology", "Instance", "SolverDefaults",
    "Solution", "Topology", "Routing", "RingSet", "PathSet", "OffsetRoutes",
    "Metrics", "VerifyReport", "METHODS",
    "load_instance", "parse_instance", "instance_to_dict", "save_instance", "load_solution", "save_solution",
    "solve", "evaluate", "verify", "route",
    "TopoOptError", "InputError", "InstanceError", "UnsupportedError",
]
