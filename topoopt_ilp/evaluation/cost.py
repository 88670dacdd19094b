"""Cost model: what a direct-connect cluster and a Fat-tree cost, and the equal-cost Fat-tree.

TopoOpt compares against *similar-cost* Fat-trees (abstract: "up to 3.4x"); the authors' scripts sweep
the Fat-tree bandwidth so that one point matches the direct-connect cluster's cost. This module makes
that matching explicit: per-port prices, a component count per architecture, and
:func:`equal_cost_bandwidth`, the per-server Fat-tree bandwidth whose cost equals the cluster's.

Counting
--------
Direct connect (TopoOpt): ``n`` servers with ``d`` interfaces of rate ``B``. Each interface is one NIC
port with one transceiver, and its fibre pair ends on one port of the patch panel (``fabric:
patch_panel``, TopoOpt's one-shot reconfiguration) or of an optical circuit switch (``fabric: ocs``).
Cost = ``n d (NIC(B) + XCVR(B) + PANEL)``.

Fat-tree: one NIC port of rate ``b`` per server, racks of ``k`` servers under a ToR, ``tiers`` switch
levels (3 by default: ToR, aggregation, core - the 6-hop path the evaluator in ``architectures.py``
charges). Every link has a transceiver at both ends (server links too: the paper's Fat-tree is optical
like the direct-connect cluster) and every switch-side end takes a switch port, all at rate ``b``:

* server links: ``n`` NIC ports, ``n`` ToR ports, ``2n`` transceivers;
* a rack with oversubscription 1:r has ``u = ceil(k / r)`` uplinks of rate ``b``; above the ToRs the tree
  keeps full bisection, so each of the ``tiers - 1`` upper link levels has ``(n / k) u`` links, each
  with 2 switch ports and 2 transceivers (none when all servers fit one rack: a single switch).

Cost = ``n NIC(b) + (n + 2(tiers-1)(n/k)u) SWITCH(b) + (2n + 2(tiers-1)(n/k)u) XCVR(b)``. For a
full-bisection 3-tier tree that is the textbook 5 switch ports per server. Cables (fibre) are left out
of both sides. Prices at a rate between two table entries are interpolated linearly; beyond the last
entry (and below the first) the price per Gbps of that entry is kept, so a one-entry table means
"price proportional to rate". The Fat-tree cost is then continuous and increasing in ``b`` and the
equal-cost bandwidth is unique; it is found by bisection.

Rails (``evaluation/rails.py``): a server with ``g`` accelerators has ``g`` NIC ports of rate ``r``, one
per rail. A **rail-optimised** Fat-tree is one Fat-tree of ``g n`` endpoints whose leaves are rail
switches (a leaf joins the rail-``i`` ports of ``k`` servers) under the same ``tiers`` (3) with the
oversubscription above the leaves: ``fat_tree_cost(g n, r, racks of k)``. A **rail-only** network
(Wang et al., arXiv 2307.12169) is ``g`` separate rails of ``n`` endpoints, each a 2-tier leaf-spine
(``RAIL_ONLY_TIERS``; one switch when a rail fits one leaf): ``g fat_tree_cost(n, r, racks of k,
tiers 2)``; it has no tier joining the rails, which is where it saves. :func:`equal_cost_rail_bandwidth`
gives the ``r`` at which either costs as much as the direct-connect cluster.

Default prices and their sources
--------------------------------
The TopoOpt paper's own cost table could NOT be found in the sources available to this project (the
paper PDF was not at hand; the authors' repository github.com/hipersys-team/TopoOpt has no cost
script). No figure below is taken from it. The defaults are:

* NIC port 400 USD, electrical switch port 500 USD and SR optical transceiver 200 USD, **at 10 Gbps**:
  the end-user 10GbE prices listed in "Optical Lock Down", 10gbe.blogspot.com, 26 Feb 2013
  (http://10gbe.blogspot.com/2013/02/optical-lock-down.html): "10GbE Network adapters, roughly
  $400/port; 10GbE Switches, roughly $500/port; 10GbE SR SFP+ Optics from NIC vendor $200/port"
  (the same post lists $800 for switch-vendor optics; we charge the $200 third-party price at both
  ends). These are 10G-era prices.
* ASSUMPTION (no public source found): the price of a NIC port, switch port and transceiver is
  proportional to its rate (one-entry tables), i.e. 40, 50 and 20 USD per Gbps. This overstates
  absolute 100G prices but keeps their ratios, and only ratios decide the equal-cost bandwidth
  (except for the rate-independent panel ports below).
* ASSUMPTION (no public source found): 100 USD per patch-panel port, 500 USD per OCS port.

Every price can be overridden by the instance's ``cost`` section, e.g.
``"cost": {"transceiver_usd": {"100": 250, "400": 900}, "patch_panel_port_usd": 80, "fabric": "ocs"}``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from topoopt_ilp.core.instance import DIRECT_FABRICS, CostModel, Instance, PriceTable
from topoopt_ilp.errors import InputError

__all__ = [
    "DEFAULT_PRICES",
    "Prices",
    "CostBreakdown",
    "prices_for",
    "port_price",
    "direct_connect_cost",
    "fat_tree_cost",
    "equal_cost_bandwidth",
    "rail_cost",
    "equal_cost_rail_bandwidth",
    "DEFAULT_TIERS",
    "RAIL_ONLY_TIERS",
]

DEFAULT_TIERS = 3  # ToR, aggregation, core: the 6-hop inter-rack path of architectures.py
RAIL_ONLY_TIERS = 2  # a rail-only rail: rail leaf and rail spine, no tier joining the rails (rails.py)


@dataclass(frozen=True)
class Prices:
    """A complete price list (USD): rate-dependent tables ``((rate_gbps, usd), ...)`` and per-port prices."""

    transceiver_usd: PriceTable
    nic_port_usd: PriceTable
    switch_port_usd: PriceTable
    patch_panel_port_usd: float
    ocs_port_usd: float
    fabric: str = "patch_panel"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# Sources and assumptions: see the module docstring.
DEFAULT_PRICES = Prices(
    transceiver_usd=((10.0, 200.0),),
    nic_port_usd=((10.0, 400.0),),
    switch_port_usd=((10.0, 500.0),),
    patch_panel_port_usd=100.0,
    ocs_port_usd=500.0,
    fabric="patch_panel",
)


@dataclass(frozen=True)
class CostBreakdown:
    """Component counts (whole numbers, kept as floats for the arithmetic) and the total in USD.
    ``panel_ports`` are patch-panel or OCS ports (``panel_kind``), which only direct connect has."""

    architecture: str
    server_bandwidth_gbps: float
    nic_ports: float
    transceivers: float
    switch_ports: float
    panel_ports: float
    panel_kind: str
    total_usd: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def prices_for(source: Instance | CostModel | Prices | None = None) -> Prices:
    """The default prices with an instance's (or a :class:`CostModel`'s) overrides applied."""
    if isinstance(source, Prices):
        return source
    model = source.cost if isinstance(source, Instance) else source
    if model is None:
        return DEFAULT_PRICES
    fields = {k: v for k, v in asdict(model).items() if v is not None}
    for name in ("transceiver_usd", "nic_port_usd", "switch_port_usd"):
        if name in fields:  # asdict turns the inner tuples into lists; keep them hashable pairs
            fields[name] = tuple((float(r), float(u)) for r, u in fields[name])
    base = asdict(DEFAULT_PRICES)
    base.update(fields)
    return Prices(**base)


def port_price(table: PriceTable, rate_gbps: float) -> float:
    """USD of one port of ``rate_gbps``: linear between table entries, proportional to the rate
    outside them (the price per Gbps of the nearest entry)."""
    if not rate_gbps > 0:
        return 0.0
    rates = [r for r, _ in table]
    usds = [u for _, u in table]
    if rate_gbps <= rates[0]:
        return usds[0] * rate_gbps / rates[0]
    if rate_gbps >= rates[-1]:
        return usds[-1] * rate_gbps / rates[-1]
    for (r0, u0), (r1, u1) in zip(table, table[1:]):
        if r0 <= rate_gbps <= r1:
            return u0 + (u1 - u0) * (rate_gbps - r0) / (r1 - r0)
    raise AssertionError("unreachable: the rate lies inside the table")  # pragma: no cover


def _check_fabric(fabric: str) -> str:
    if fabric not in DIRECT_FABRICS:
        raise InputError(f"fabric must be one of {', '.join(DIRECT_FABRICS)}, got {fabric!r}")
    return fabric


def direct_connect_cost(
    n: int, d: int, link_gbps: float, prices: Prices = DEFAULT_PRICES, *, fabric: str | None = None
) -> CostBreakdown:
    """Cost of ``n`` servers x ``d`` interfaces of ``link_gbps``: NIC port + transceiver per interface,
    plus one patch-panel (or OCS) port per interface."""
    fabric = _check_fabric(fabric or prices.fabric)
    interfaces = float(n * d)
    panel = prices.patch_panel_port_usd if fabric == "patch_panel" else prices.ocs_port_usd
    total = interfaces * (
        port_price(prices.nic_port_usd, link_gbps) + port_price(prices.transceiver_usd, link_gbps) + panel
    )
    return CostBreakdown("direct_connect", float(d * link_gbps), interfaces, interfaces, 0.0, interfaces, fabric, total)


def _fat_tree_counts(n: int, oversubscription: float, rack_size: int, tiers: int) -> tuple[float, float, float]:
    """(NIC ports, switch ports, transceivers) of a Fat-tree; none depends on the link rate."""
    if not oversubscription >= 1.0 or not math.isfinite(oversubscription):
        raise InputError(f"oversubscription must be a finite number >= 1, got {oversubscription}")
    if not 1 <= rack_size <= n or n % rack_size:
        raise InputError(f"rack size must divide the {n} servers, got {rack_size}")
    if tiers not in (2, 3):
        raise InputError(f"a Fat-tree here has 2 or 3 switch tiers, got {tiers}")
    racks = n // rack_size
    upper_links = 0.0 if racks == 1 else float((tiers - 1) * racks * math.ceil(rack_size / oversubscription))
    return float(n), n + 2.0 * upper_links, 2.0 * n + 2.0 * upper_links


def fat_tree_cost(
    n: int,
    server_gbps: float,
    prices: Prices = DEFAULT_PRICES,
    *,
    oversubscription: float = 1.0,
    rack_size: int | None = None,
    tiers: int = DEFAULT_TIERS,
) -> CostBreakdown:
    """Cost of a Fat-tree giving each of ``n`` servers ``server_gbps`` (counting in the module docstring)."""
    rack_size = min(n, 16) if rack_size is None else rack_size
    nics, switch_ports, xcvrs = _fat_tree_counts(n, oversubscription, rack_size, tiers)
    total = (
        nics * port_price(prices.nic_port_usd, server_gbps)
        + switch_ports * port_price(prices.switch_port_usd, server_gbps)
        + xcvrs * port_price(prices.transceiver_usd, server_gbps)
    )
    return CostBreakdown(
        f"fat_tree 1:{oversubscription:g}", float(server_gbps), nics, xcvrs, switch_ports, 0.0, "none", total
    )


def _equal_cost_rate(target: float, cost, start_gbps: float, rel_tol: float, what: str) -> float:
    """The smallest rate whose ``cost(rate)`` reaches ``target``, by bisection (``cost`` continuous
    and non-decreasing, 0 at rate 0)."""
    if target <= 0:
        return 0.0
    hi = max(float(start_gbps), 1.0)
    for _ in range(200):
        if cost(hi) >= target:
            break
        hi *= 2.0
    else:
        raise InputError(
            f"the {what}'s cost does not grow with its bandwidth (all NIC, switch and transceiver "
            "prices are 0); no equal-cost bandwidth exists"
        )
    lo = 0.0
    while hi - lo > rel_tol * hi:
        mid = 0.5 * (lo + hi)
        if cost(mid) >= target:
            hi = mid
        else:
            lo = mid
    return hi


def equal_cost_bandwidth(
    n: int,
    d: int,
    link_gbps: float,
    prices: Prices = DEFAULT_PRICES,
    *,
    oversubscription: float = 1.0,
    rack_size: int | None = None,
    tiers: int = DEFAULT_TIERS,
    fabric: str | None = None,
    rel_tol: float = 1e-12,
) -> float:
    """The per-server bandwidth (Gbps) of the Fat-tree that costs as much as the direct-connect cluster.

    The Fat-tree cost is continuous and non-decreasing in its bandwidth (tables with non-decreasing
    prices) and 0 at bandwidth 0, so bisection finds the unique smallest crossing."""
    target = direct_connect_cost(n, d, link_gbps, prices, fabric=fabric).total_usd

    def cost(b: float) -> float:
        return fat_tree_cost(
            n, b, prices, oversubscription=oversubscription, rack_size=rack_size, tiers=tiers
        ).total_usd

    return _equal_cost_rate(target, cost, link_gbps, rel_tol, "Fat-tree")


def rail_cost(
    n: int,
    g: int,
    rail_gbps: float,
    prices: Prices = DEFAULT_PRICES,
    *,
    rail_only: bool = False,
    oversubscription: float = 1.0,
    rack_size: int | None = None,
) -> CostBreakdown:
    """Cost of ``g`` rails among ``n`` servers, one NIC port of ``rail_gbps`` per accelerator (module
    docstring, **Rails**): rail-optimised, one 3-tier Fat-tree of ``g n`` endpoints with rail leaves;
    rail-only, ``g`` separate 2-tier rails."""
    if not 1 <= g:
        raise InputError(f"a server has at least one rail, got {g}")
    rack_size = min(n, 16) if rack_size is None else rack_size
    if rail_only:
        one = fat_tree_cost(
            n, rail_gbps, prices, oversubscription=oversubscription, rack_size=rack_size, tiers=RAIL_ONLY_TIERS
        )
        nics, xcvrs, switch_ports, total = (
            g * one.nic_ports,
            g * one.transceivers,
            g * one.switch_ports,
            g * one.total_usd,
        )
        name = "rail_only"
    else:
        _check_rack(n, rack_size)
        whole = fat_tree_cost(g * n, rail_gbps, prices, oversubscription=oversubscription, rack_size=rack_size)
        nics, xcvrs, switch_ports, total = whole.nic_ports, whole.transceivers, whole.switch_ports, whole.total_usd
        name = "rail_optimised"
    return CostBreakdown(
        f"{name} 1:{oversubscription:g}", float(g * rail_gbps), nics, xcvrs, switch_ports, 0.0, "none", total
    )


def equal_cost_rail_bandwidth(
    n: int,
    d: int,
    link_gbps: float,
    g: int,
    prices: Prices = DEFAULT_PRICES,
    *,
    rail_only: bool = False,
    oversubscription: float = 1.0,
    rack_size: int | None = None,
    fabric: str | None = None,
    rel_tol: float = 1e-12,
) -> float:
    """The rate of one rail port (Gbps) at which the ``g`` rails cost as much as the direct-connect
    cluster (:func:`rail_cost`; bisection as in :func:`equal_cost_bandwidth`)."""
    target = direct_connect_cost(n, d, link_gbps, prices, fabric=fabric).total_usd

    def cost(r: float) -> float:
        return rail_cost(
            n, g, r, prices, rail_only=rail_only, oversubscription=oversubscription, rack_size=rack_size
        ).total_usd

    return _equal_cost_rate(target, cost, link_gbps / g, rel_tol, "rail network")


def _check_rack(n: int, rack_size: int) -> None:
    """A rail-optimised leaf joins ``rack_size`` servers' ports of one rail: the racks divide the
    servers (not only the ``g n`` endpoints)."""
    if not 1 <= rack_size <= n or n % rack_size:
        raise InputError(f"rack size must divide the {n} servers, got {rack_size}")
