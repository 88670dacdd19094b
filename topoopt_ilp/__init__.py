"""topoopt-ilp: topology, routing and placement for direct-connect DNN training clusters.

The public API the CLI is a thin layer over::

    from topoopt_ilp import load_instance, solve, evaluate, verify

    inst = load_instance("instances/testbed-12.json")
    sol = solve(inst, method="heuristic")
    print(sol.metrics["iteration_time_s"], verify(inst, sol).valid)
"""

from topoopt_ilp.core.instance import AllReduceGroup, Cluster, Demand, FixedTopology, Instance, SolverDefaults
from topoopt_ilp.core.routes import OffsetRoutes, PathSet, RingSet, Routing
from topoopt_ilp.core.solution import Solution, Topology
from topoopt_ilp.errors import InputError, InstanceError, TopoOptError, UnsupportedError
from topoopt_ilp.evaluation.evaluate import Metrics, evaluate
from topoopt_ilp.evaluation.verify import VerifyReport, verify
from topoopt_ilp.files import (
    instance_to_dict,
    load_instance,
    load_solution,
    parse_instance,
    save_instance,
    save_solution,
)
from topoopt_ilp.methods import METHODS, solve
from topoopt_ilp.methods.reroute import route

__version__ = "0.1.0"

__all__ = [
    "AllReduceGroup",
    "Cluster",
    "Demand",
    "FixedTopology",
    "Instance",
    "SolverDefaults",
    "Solution",
    "Topology",
    "Routing",
    "RingSet",
    "PathSet",
    "OffsetRoutes",
    "Metrics",
    "VerifyReport",
    "METHODS",
    "load_instance",
    "parse_instance",
    "instance_to_dict",
    "save_instance",
    "load_solution",
    "save_solution",
    "solve",
    "evaluate",
    "verify",
    "route",
    "TopoOptError",
    "InputError",
    "InstanceError",
    "UnsupportedError",
]
