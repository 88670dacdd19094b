from __future__ import annotations

import numpy as np

from topoopt_ilp.draw import draw_topology
from topoopt_ilp.heuristic import random_expander, topology_finder


def test_draw_png_and_svg(tmp_path):
    res = topology_finder(12, 4, [(np.arange(12), 1.0)], None)
    png = draw_topology(res.X, tmp_path / "t.png", jumps=res.jumps[12], title="testbed")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    mp = np.zeros((12, 12))
    mp[0, 6] = 1e9
    res = topology_finder(12, 6, [(np.arange(12), 1e6)], mp)
    svg = draw_topology(
        res.X, tmp_path / "t.svg", jumps=[j for js in res.jumps.values() for j in js], n_mp_links=res.mp_matrix
    )
    text = svg.read_text()
    assert text.lstrip().startswith("<?xml") and "<svg" in text
    # matplotlib writes each text item as an SVG comment: title, legend, parallel-link labels
    assert "<!-- n=12, degree 6 -->" in text
    assert "<!-- jump ±1 -->" in text and "<!-- MP links -->" in text
    assert res.mp_matrix[0, 6] == 4 and "<!-- x4 -->" in text


def test_draw_other_links(tmp_path):
    X = random_expander(40, 4, seed=1)
    p = draw_topology(X, tmp_path / "x.png")
    assert p.stat().st_size > 1000


def test_draw_directed_links_as_arrows(tmp_path):
    """A directed topology was drawn as plain lines (its symmetrised support): direction unreadable."""
    n = 8
    X = np.zeros((n, n), dtype=int)
    for i in range(n):
        X[i, (i + 1) % n] += 1
        X[i, (i + 3) % n] += 1
    svg = draw_topology(X, tmp_path / "d.svg", jumps=[1, 3], directed=True).read_text()
    assert "<!-- n=8, degree 2, directed -->" in svg
    assert "<!-- jump +1 -->" in svg and "<!-- jump +3 -->" in svg and "±" not in svg
    undirected = draw_topology(X, tmp_path / "u.svg", jumps=[1, 3]).read_text()
    assert svg.count("<path") > undirected.count("<path")  # one arrow head per arc on top of its line
