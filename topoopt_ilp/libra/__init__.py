"""LIBRA's problem: bandwidth per dimension of a hierarchical network, its files and its importer."""
