"""Exporters: a design written in the formats other tools read."""
