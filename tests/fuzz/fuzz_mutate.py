"""Hostile variants of valid files, as hypothesis strategies: a JSON document with keys dropped,
renamed or retyped, numbers made huge, negative, fractional or out of range, lists emptied or
lengthened, values nested deep or made long; and the file's bytes truncated or made invalid UTF-8.

Each strategy draws a short sequence of such edits at random places of a valid document, so that
most variants are wrong in one or two ways (the way real mistakes are) and some are still valid.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import strategies as st

#: Values an attacker puts where a value was.
HOSTILE_VALUES = [
    None,
    True,
    False,
    "",
    "1",
    "x" * 5000,
    "\x1b[31mred\x1b[0m\nnext line",
    0,
    -1,
    1,
    2,
    0.5,
    -0.5,
    1e-300,
    1e300,
    -1e300,
    2**31,
    2**63,
    2**64,
    -(2**63) - 1,
    10**400,
    [],
    [0],
    [-1, 0, 1],
    list(range(3000)),
    {},
    {"a": 1},
]


def _places(doc: Any, path: tuple = ()) -> list[tuple]:
    """Every key path in ``doc`` (objects and lists, leaves included), at most a few thousand: a
    document's long lists (matrices, paths) are sampled at their first and last entries."""
    out = [path]
    if isinstance(doc, dict):
        for key, value in doc.items():
            out += _places(value, (*path, key))
    elif isinstance(doc, list):
        for k in sorted({0, len(doc) - 1} if len(doc) > 4 else range(len(doc))):
            if 0 <= k < len(doc):
                out += _places(doc[k], (*path, k))
    return out


def _parent(doc: Any, path: tuple) -> Any:
    for key in path[:-1]:
        doc = doc[key]
    return doc


def _nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"a": value}
    return value


@st.composite
def mutated(draw, seeds: list[Any], max_edits: int = 3) -> Any:
    """A valid document from ``seeds`` with 1 to ``max_edits`` hostile edits."""
    doc = copy.deepcopy(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(1, max_edits))):
        places = [p for p in _places(doc) if p]
        if not places:
            break
        path = draw(st.sampled_from(places))
        parent, key = _parent(doc, path), path[-1]
        edit = draw(st.sampled_from(["value", "value", "value", "number", "drop", "rename", "nest", "grow"]))
        if edit == "value":
            parent[key] = copy.deepcopy(draw(st.sampled_from(HOSTILE_VALUES)))
        elif edit == "number":
            old = parent[key]
            scale = draw(st.sampled_from([-1, 0, 2, 10**6, 10**30]))
            parent[key] = old * scale if isinstance(old, (int, float)) and not isinstance(old, bool) else scale
        elif edit == "drop":
            del parent[key]
        elif edit == "rename" and isinstance(parent, dict):
            parent[draw(st.sampled_from(["x", key + "s", key.upper(), ""]))] = parent.pop(key)
        elif edit == "nest":
            parent[key] = _nested(draw(st.sampled_from([3, 50, 900])))
        elif edit == "grow" and isinstance(parent[key], list) and parent[key]:
            parent[key] = parent[key] * draw(st.sampled_from([2, 50]))
    return doc


@st.composite
def file_bytes(draw, seeds: list[Any]) -> bytes:
    """A mutated document as a file: usually whole, sometimes cut short or with invalid UTF-8."""
    text = json.dumps(draw(mutated(seeds))).encode()
    damage = draw(st.sampled_from(["none", "none", "none", "none", "truncate", "bad-utf8", "bom", "duplicate"]))
    if damage == "truncate":
        return text[: draw(st.integers(0, max(0, len(text) - 1)))]
    if damage == "bad-utf8":
        cut = draw(st.integers(0, len(text)))
        return text[:cut] + b"\xff\xfe\xc3" + text[cut:]
    if damage == "bom":
        return b"\xef\xbb\xbf" + text
    if damage == "duplicate" and text.startswith(b"{") and len(text) > 2:
        return b'{"version": 1, ' + text[1:]
    return text
