"""Shared fixtures: the repository root and its shipped instances."""

from __future__ import annotations

import copy
import os
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
INSTANCES = ROOT / "instances"


@pytest.fixture
def root() -> Path:
    return ROOT


def instance_data(name: str) -> dict:
    """A fresh (mutable) copy of a shipped instance's JSON."""
    return copy.deepcopy(json.loads((INSTANCES / f"{name}.json").read_text()))


def minimal(**overrides) -> dict:
    """A small valid instance dict; keyword arguments replace top-level sections."""
    data = {
        "format": "topoopt-instance",
        "version": 1,
        "cluster": {"servers": 8, "degree": 2, "link_bandwidth_gbps": 100, "hop_latency_us": 0.0},
        "demand": {"all_to_all": 1e6},
    }
    data.update(overrides)
    return data


# CI runs the property tests on a fixed sequence of examples (a red CI should mean a change broke
# something, not that the dice found an old bug); locally they explore new examples every run.
from hypothesis import settings as _hsettings  # noqa: E402

_hsettings.register_profile("ci", derandomize=True)
if os.environ.get("CI"):
    _hsettings.load_profile("ci")
