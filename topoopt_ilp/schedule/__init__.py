"""One training iteration as a task graph, schedule files and schedule checks."""
