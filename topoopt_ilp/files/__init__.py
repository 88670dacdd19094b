"""Strict JSON in, atomic JSON out: instance and solution files, the training-job zoo.

- :mod:`.jsonio`: what every format shares (strict reading, shape checks, atomic writing);
- :mod:`.instance_file`: instance files, the workload section included;
- :mod:`.solution_file`: solution files;
- :mod:`.zoo`: the training jobs of TopoOpt's evaluation as instance files (``topoopt generate``).
"""

from topoopt_ilp.files.instance_file import (
    INSTANCE_FORMAT,
    VERSION,
    instance_to_dict,
    load_instance,
    parse_instance,
    parse_workload,
    save_instance,
    workload_to_dict,
)
from topoopt_ilp.files.jsonio import MAX_FILE_BYTES, check_writable, dumps, json_safe, write_atomic, write_json_atomic
from topoopt_ilp.files.solution_file import (
    MAX_SOLUTION_BYTES,
    SOLUTION_FORMAT,
    load_solution,
    parse_solution,
    save_solution,
    solution_to_dict,
)

__all__ = [
    "INSTANCE_FORMAT",
    "SOLUTION_FORMAT",
    "VERSION",
    "MAX_FILE_BYTES",
    "MAX_SOLUTION_BYTES",
    "load_instance",
    "parse_instance",
    "instance_to_dict",
    "save_instance",
    "parse_workload",
    "workload_to_dict",
    "load_solution",
    "parse_solution",
    "solution_to_dict",
    "save_solution",
    "check_writable",
    "dumps",
    "json_safe",
    "write_atomic",
    "write_json_atomic",
]
