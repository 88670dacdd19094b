"""Pictures of topologies: nodes on a circle, circulant links coloured by jump, MP links apart."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless; must precede pyplot
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

__all__ = ["draw_topology", "draw_convergence", "draw_architectures"]

_MP_COLOR = "#d62728"
_OTHER_COLOR = "#7f7f7f"
_JUMP_COLORS = ["#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#17becf", "#8c564b", "#e377c2", "#bcbd22"]


def draw_topology(
    X: np.ndarray,
    path: str | Path,
    *,
    jumps: Sequence[int] | None = None,
    n_mp_links: np.ndarray | None = None,
    title: str | None = None,
    directed: bool = False,
) -> Path:
    """Draw topology ``X`` on a circle and save it (PNG/SVG/PDF chosen by the file extension).

    Parameters
    ----------
    X : numpy.ndarray
        ``(n, n)`` link counts (symmetric for undirected topologies).
    path : str or Path
        Output file.
    jumps : sequence of int, optional
        Circulant jumps; a link ``i - j`` whose offset ``+-(j - i) mod n`` is one of them is drawn in
        that jump's colour. Without ``jumps`` every non-MP link is grey.
    n_mp_links : numpy.ndarray, optional
        ``(n, n)`` counts of the links of ``X`` that are MP (matching) links, e.g.
        ``TopologyFinderResult.mp_matrix``; drawn dashed in red.
    title : str, optional
        Figure title.
    directed : bool
        Draw each link ``i -> j`` as an arrow, bowed to its right so that ``i -> j`` and ``j -> i``
        stay apart, and colour it by its jump ``+j`` (directed jumps have no ``-j`` twin). Without
        it, the links are drawn by their symmetrised support.

    Returns
    -------
    Path
        The written file.

    Notes
    -----
    Parallel links are drawn once, with line width growing with the count and a ``xN`` label.
    """
    X = np.asarray(X)
    n = X.shape[0]
    mp = np.zeros_like(X) if n_mp_links is None else np.asarray(n_mp_links)
    base = X - mp
    if directed:  # every arc on its own (the lower triangle too)
        U, Ump = base * ~np.eye(n, dtype=bool), mp * ~np.eye(n, dtype=bool)
    else:
        U = np.triu(base + base.T if not np.array_equal(base, base.T) else base, 1)
        Ump = np.triu(mp + mp.T if not np.array_equal(mp, mp.T) else mp, 1)
    ang = np.pi / 2 - 2 * np.pi * np.arange(n) / n  # node 0 on top, clockwise
    pos = np.c_[np.cos(ang), np.sin(ang)]
    classes = []
    if jumps is not None:
        for j in jumps:
            c = int(j) % n if directed else min(int(j) % n, (-int(j)) % n)
            if c and c not in classes:
                classes.append(c)
    color_of = {c: _JUMP_COLORS[i % len(_JUMP_COLORS)] for i, c in enumerate(classes)}

    def jump_label(c: int) -> str:
        return f"jump +{c}" if directed else (f"jump ±{c}" if 2 * c != n else f"jump {c}")

    size = 6 if n <= 32 else 8
    fig, ax = plt.subplots(figsize=(size, size))
    used: dict[str, tuple[str, str]] = {}

    def seg(a: int, b: int, cnt: int, color: str, style: str, label: str, curve: float) -> None:
        p, q = pos[a], pos[b]
        # quadratic Bezier: MP links bowed towards the centre so they are not hidden under chords;
        # directed links also bowed to the right of p -> q, so that q -> p takes the other side
        mid = (p + q) / 2 * (1 - curve)
        if directed:
            mid = mid + 0.12 * np.array([q[1] - p[1], p[0] - q[0]])
        if curve or directed:
            t = np.linspace(0, 1, 30)[:, None]
            pts = (1 - t) ** 2 * p + 2 * (1 - t) * t * mid + t**2 * q
        else:
            pts = np.vstack([p, q])
        lw = (1.2 if n <= 64 else 0.5) * (1 + 0.6 * (min(cnt, 4) - 1))  # capped: the xN label carries the count
        # shorter chords on top: on a large circle the long ones would hide them
        off = min((b - a) % n, (a - b) % n)
        ax.plot(pts[:, 0], pts[:, 1], color=color, ls=style, lw=lw, alpha=0.85, zorder=1 + 1 / (1 + off))
        if directed:  # the head just outside the target's circle
            k = max(1, len(pts) - (4 if n <= 32 else 2))
            ax.annotate(
                "",
                xy=pts[k],
                xytext=pts[k - 1],
                zorder=2,
                arrowprops=dict(arrowstyle="-|>", color=color, lw=0, mutation_scale=10 if n <= 64 else 5),
            )
        if cnt > 1 and n <= 64:
            m = pts[len(pts) // 2]
            ax.text(
                m[0],
                m[1],
                f"x{cnt}",
                fontsize=7,
                color=color,
                ha="center",
                va="center",
                bbox=dict(boxstyle="round,pad=0.1", fc="white", ec="none", alpha=0.8),
                zorder=3,
            )
        used.setdefault(label, (color, style))

    for a, b in zip(*np.nonzero(U)):
        off = (b - a) % n if directed else min((b - a) % n, (a - b) % n)
        if off in color_of:
            seg(a, b, int(U[a, b]), color_of[off], "-", jump_label(off), 0.0)
        else:
            seg(a, b, int(U[a, b]), _OTHER_COLOR, "-", "other links", 0.0)
    for a, b in zip(*np.nonzero(Ump)):
        seg(a, b, int(Ump[a, b]), _MP_COLOR, "--", "MP links", 0.25)

    ns = 300 if n <= 32 else (60 if n <= 64 else 8)  # small nodes on large circles, so jump 1 stays visible
    ax.scatter(pos[:, 0], pos[:, 1], s=ns, c="white", edgecolors="black", zorder=4)
    if n <= 64:
        for i, (x, y) in enumerate(pos):
            ax.text(x, y, str(i), ha="center", va="center", fontsize=9 if n <= 32 else 6, zorder=5)
    order = [jump_label(c) for c in classes] + ["other links", "MP links"]
    handles = [Line2D([0], [0], color=used[k][0], ls=used[k][1], lw=2, label=k) for k in order if k in used]
    if handles:
        # below the circle, so it never covers nodes or the title
        ax.legend(
            handles=handles,
            loc="upper center",
            bbox_to_anchor=(0.5, 0.0),
            ncol=min(4, len(handles)),
            fontsize=9,
            frameon=False,
        )
    deg = X.sum(axis=1)
    ax.set_title(
        title
        or f"n={n}, degree {int(deg.max()) if deg.min() == deg.max() else f'{deg.min()}-{deg.max()}'}"
        + (", directed" if directed else "")
    )
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_xlim(-1.2, 1.2)
    ax.set_ylim(-1.2, 1.2)
    path = Path(path)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path


def draw_convergence(rounds: Sequence[dict], path: str | Path, *, title: str | None = None) -> Path:
    """Plot an alternating run: iteration time of every phase (log scale) and the incumbent.

    ``rounds`` is ``Solution.details["rounds"]`` of ``--method alternating``: entries with ``round``,
    ``phase``, ``iteration_time_s``, ``compute_time_s``, ``comm_time_s`` and ``accepted``.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    entries = [e for e in rounds if e.get("iteration_time_s") is not None]
    if not entries:
        raise ValueError("no rounds with an iteration time to plot")
    xs = np.arange(len(entries))
    it = np.array([e["iteration_time_s"] for e in entries]) * 1e3
    comp = np.array([e.get("compute_time_s") or 0.0 for e in entries]) * 1e3
    comm = np.array([e.get("comm_time_s") or 0.0 for e in entries]) * 1e3
    best = np.minimum.accumulate(it)
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    ax.plot(xs, it, "o-", color="#888888", label="candidate iteration time")
    ax.step(xs, best, where="post", color="#1f77b4", linewidth=2.2, label="incumbent")
    ax.plot(xs, comp, "s--", color="#2ca02c", markersize=4, label="compute (max server)")
    ax.plot(xs, comm, "^--", color="#d62728", markersize=4, label="communication")
    for x, e in zip(xs, entries):
        if e.get("accepted"):
            ax.annotate("*", (x, it[x]), textcoords="offset points", xytext=(0, 6), ha="center", color="#1f77b4")
    ax.set_xticks(xs)
    ax.set_xticklabels([f"{e['round']}\n{str(e['phase']).split(':')[0][:9]}" for e in entries], fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("time per iteration (ms)")
    ax.set_xlabel("round / phase")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper right")
    ax.set_title(title or "alternating placement <-> topology")
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


# Direct-connect designs in saturated colours, switched baselines in muted ones (Fat-trees hatched).
_ARCH_STYLE = {
    "topoopt": ("#1f77b4", ""),
    "alternating": ("#2ca02c", ""),
    "expander": ("#9467bd", ""),
    "big_switch": ("#7f7f7f", ""),
    "fat_tree_1": ("#ff7f0e", "//"),
    "fat_tree_2": ("#e6a35c", ".."),
    "fat_tree_4": ("#f3d2a8", "xx"),
}


def draw_architectures(
    groups: Sequence[str],
    times_s: dict[str, Sequence[float]],
    path: str | Path,
    *,
    legend: dict[str, str] | None = None,
    title: str | None = None,
) -> Path:
    """Grouped bar chart: one group per workload, one bar per architecture (iteration time, log scale).

    Parameters
    ----------
    groups : sequence of str
        Group labels (instance names), left to right.
    times_s : dict
        Architecture key -> iteration time in seconds per group (same order as ``groups``); bars are
        drawn in the dict's order. Non-finite times are left out (no bar).
    path : str or Path
        Output file; PNG/SVG/PDF by extension.
    legend : dict, optional
        Architecture key -> legend label (default: the key).
    title : str, optional
        Figure title.
    """
    keys = list(times_s)
    if not groups or not keys:
        raise ValueError("nothing to draw: no groups or no architectures")
    legend = legend or {}
    n_groups, n_bars = len(groups), len(keys)
    width = 0.8 / n_bars
    x = np.arange(n_groups)
    fig, ax = plt.subplots(figsize=(max(8.0, 1.45 * n_groups + 2.5), 4.8))
    for b, key in enumerate(keys):
        vals = np.array([float(v) for v in times_s[key]]) * 1e3
        ok = np.isfinite(vals) & (vals > 0)
        color, hatch = _ARCH_STYLE.get(key, (_JUMP_COLORS[b % len(_JUMP_COLORS)], ""))
        ax.bar(
            x[ok] + (b - (n_bars - 1) / 2) * width,
            vals[ok],
            width * 0.92,
            color=color,
            hatch=hatch,
            edgecolor="#333333",
            linewidth=0.4,
            label=legend.get(key, key),
            zorder=2,
        )
    ax.set_yscale("log")
    ax.set_ylabel("iteration time (ms, log scale; lower is better)")
    ax.set_xticks(x)
    ax.set_xticklabels(groups, fontsize=9)
    ax.set_xlim(-0.55, n_groups - 0.45)
    for g in range(1, n_groups):  # thin separators keep the groups apart
        ax.axvline(g - 0.5, color="#dddddd", lw=0.8, zorder=1)
    ax.grid(True, axis="y", which="both", alpha=0.3, zorder=0)
    # legend above the axes in columns, so it never hides a bar
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.01), ncol=min(4, n_bars), fontsize=8.5, frameon=False)
    if title:
        fig.suptitle(title, fontsize=11, y=1.0)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return out
