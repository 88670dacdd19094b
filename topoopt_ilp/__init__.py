"""topoopt-ilp: topology, routing and placement for direct-connect DNN training clusters."""

__version__ = "0.1.0"
