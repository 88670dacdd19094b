"""Link lists: a topology as plain text, one link per line with its own rate (docs/guide/collectives.md,
"Topologies from other tools").

Format (``.txt``, ``.csv`` or any name): one link per line, ``src dst [gbps] [latency_us]``, the
fields separated by spaces, tabs or commas; ``#`` starts a comment (to the end of the line); blank
lines are skipped. ``src`` and ``dst`` are server ids, decimal integers, and the servers are
``0..n-1`` with n the largest id plus one (every one of them needs a link). ``gbps`` is the link's
bandwidth in Gbit/s per direction, ``latency_us`` its alpha in microseconds; ``-`` (or nothing)
takes the default given by the caller (``--gbps``, ``--latency-us``; latency 0 when none is given).

A line is one link in both directions (full duplex), or in its direction only when the list is
read as directed. A pair listed again adds a parallel link, which carries its own chunk per step;
parallel links share one rate, so a repeat with another rate is refused. Every problem is one
:class:`~topoopt_ilp.errors.InputError` naming the file and the line: a link without a rate and no
default, a self-loop, a rate or latency that is not a number, negative, zero (rate) or beyond the
limits of an instance, an id that is not a non-negative integer, a server without a link.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field

import numpy as np

from topoopt_ilp.core.collective import Collective, LinkModel
from topoopt_ilp.core.instance import MAX_LATENCY_US, MAX_LINK_GBPS, MAX_SERVERS
from topoopt_ilp.errors import InputError
from topoopt_ilp.files.jsonio import read_text

__all__ = ["LinkedTopology", "read_link_list", "linked_topology"]

_ID = re.compile(r"0|[1-9][0-9]{0,9}")
_SPLIT = re.compile(r"[\s,]+")
#: Least rate a link may have: a chunk then takes a finite time however large the collective.
MIN_GBPS = 1e-6
#: Most links a list may hold (the exact model never gets near it; it bounds the matrix built).
MAX_LINKS = 1_000_000


@dataclass(frozen=True, eq=False)
class LinkedTopology:
    """A topology read from another tool's file: ``matrix[u, v]`` links u -> v, ``link`` the rate of
    every direction (``link.arcs``), ``collective`` the collective the file describes (None: the
    caller gives it), ``source`` the file and ``kind`` what it was read as."""

    source: str
    kind: str
    matrix: np.ndarray
    link: LinkModel
    collective: Collective | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)


def linked_topology(
    source: str,
    kind: str,
    rates: dict[tuple[int, int], tuple[int, float, float]],
    n: int,
    collective: Collective | None = None,
    notes: tuple[str, ...] = (),
) -> LinkedTopology:
    """The :class:`LinkedTopology` of ``rates``: (u, v) -> (links, alpha_s, bandwidth_Bps) per direction."""
    matrix = np.zeros((n, n), dtype=np.int64)
    for (u, v), (count, _, _) in rates.items():
        matrix[u, v] = count
    fastest = max((b for _, _, b in rates.values()), default=1.0)
    arcs = tuple((u, v, a, b) for (u, v), (_, a, b) in sorted(rates.items()))
    least_alpha = min((a for _, a, _ in rates.values()), default=0.0)
    return LinkedTopology(source, kind, matrix, LinkModel(least_alpha, fastest, arcs), collective, notes)


def _number(text: str, what: str, high: float, *, positive: bool) -> float:
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"{what} must be a number, got {text[:20]!r}") from None
    low = MIN_GBPS if positive else 0.0
    if not math.isfinite(value) or value < low or (positive and value == 0) or value > high:
        raise InputError(
            f"{what} must be {'> 0' if positive else '>= 0'}, within [{low:g}, {high:g}], got {text[:20]!r}"
        )
    return value


def read_link_list(
    path: str | os.PathLike,
    *,
    gbps: float | None = None,
    latency_us: float | None = None,
    directed: bool = False,
) -> LinkedTopology:
    """The link list at ``path`` (module docstring); ``gbps`` and ``latency_us``: the rate and latency
    of a line that gives none (no ``gbps``: every line must give its rate)."""
    source = str(path)
    if gbps is not None:
        _number(str(gbps), "--gbps", MAX_LINK_GBPS, positive=True)
    if latency_us is not None:
        _number(str(latency_us), "--latency-us", MAX_LATENCY_US, positive=False)
    text = read_text(path, InputError)
    rates: dict[tuple[int, int], tuple[int, float, float]] = {}
    first_line: dict[tuple[int, int], int] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        fields = [f for f in _SPLIT.split(raw.split("#", 1)[0].strip()) if f]
        if not fields:
            continue
        try:
            if len(fields) < 2 or len(fields) > 4:
                raise InputError(f"expected 'src dst [gbps] [latency_us]', got {len(fields)} field(s)")
            ids = []
            for name, value in zip(("src", "dst"), fields[:2]):
                if not _ID.fullmatch(value) or int(value) >= MAX_SERVERS:
                    raise InputError(f"{name} must be a server id 0..{MAX_SERVERS - 1}, got {value[:20]!r}")
                ids.append(int(value))
            u, v = ids
            if u == v:
                raise InputError(f"a link from server {u} to itself")
            given = fields[2:] + ["-"] * (4 - len(fields))
            if given[0] == "-":
                if gbps is None:
                    raise InputError(f"the link {u} - {v} has no rate: give gbps on the line or a default (--gbps)")
                rate = float(gbps)
            else:
                rate = _number(given[0], "gbps", MAX_LINK_GBPS, positive=True)
            if given[1] == "-":
                latency = 0.0 if latency_us is None else float(latency_us)
            else:
                latency = _number(given[1], "latency_us", MAX_LATENCY_US, positive=False)
            alpha, bandwidth = latency * 1e-6, rate * 1e9 / 8.0
            for arc in ((u, v),) if directed else ((u, v), (v, u)):
                count, *had = rates.get(arc, (0, alpha, bandwidth))
                if tuple(had) != (alpha, bandwidth):
                    raise InputError(
                        f"the link {u} - {v} repeats line {first_line[arc]} with another rate or latency: "
                        "parallel links share one"
                    )
                rates[arc] = (count + 1, alpha, bandwidth)
                first_line.setdefault(arc, number)
            if len(first_line) > MAX_LINKS:
                raise InputError(f"more than {MAX_LINKS} links")
        except InputError as exc:
            raise InputError(exc.reason, source=source, field=f"line {number}") from None
    if not rates:
        raise InputError("no link in the file", source=source)
    n = 1 + max(max(u, v) for u, v in rates)
    linked = {s for arc in rates for s in arc}
    missing = sorted(set(range(n)) - linked)
    if missing:
        raise InputError(
            f"server {missing[0]} has no link (servers are 0..{n - 1}, the largest id plus one)", source=source
        )
    return linked_topology(source, "link list", rates, n)
