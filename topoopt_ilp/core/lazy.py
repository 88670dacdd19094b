"""Modules loaded on their first use.

networkx takes 0.15 s to import (2026-12-07, `python -X importtime -c "import networkx"`), a
quarter of the command line's start-up, and most commands never call it: the modules that offer a
networkx path (graph files, the routing variants, the edge-swap search's reference scores) take
``nx`` from here, and networkx loads when one of its names is first read.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

__all__ = ["LazyModule", "nx"]


class LazyModule(ModuleType):
    """Stands for the module of its name and imports it when one of its names is first read.

    The import goes through :func:`importlib.import_module`, whose module locks make a first use
    from several threads at once safe (the standard library's ``LazyLoader`` was not, before
    Python 3.12); the module's names are then copied here, so later reads cost nothing extra."""

    def __getattr__(self, attr: str) -> Any:
        module = importlib.import_module(self.__name__)
        self.__dict__.update(module.__dict__)
        return getattr(module, attr)


nx = LazyModule("networkx")
