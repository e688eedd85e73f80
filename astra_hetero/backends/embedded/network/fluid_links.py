"""What the DCQCN fluid model (`network.dcqcn`) knows of each link: whether it leaves a switch (a queue
with ECN and PFC), its thresholds from `ns3/config.txt` by the link's own rate, and its place on the
up-then-down paths of the fabric; for `link_model: auto` also which links get the fluid model at all.

Per directed link of `ns3/topology.txt` first (`directed_fluid_links`), then per engine link: a bundle
of parallel links (twin spines) sums its members' thresholds, as its queue is the sum of theirs; a
folded link class is one of its bundles (the quotient's loads are per bundle).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Iterable, Mapping, Sequence

from astra_hetero.backends.embedded.network.dcqcn import DcqcnNetwork, FluidLink
from astra_hetero.backends.embedded.network.routing import Router
from astra_hetero.backends.embedded.rundir.dcqcn_config import DcqcnParams
from astra_hetero.backends.embedded.rundir.reader import DcqcnInputs
from astra_hetero.backends.embedded.rundir.topology import Topology

# ns-3's dynamic PFC threshold is (buffer − headroom − reserve − shared use) >> pfc_a_shift with
# pfc_a_shift 3 (astra-network-ns3 scratch/common.h, SwitchMmu::GetPfcThreshold): one congested
# ingress pauses at q = (B − q)/8, i.e. q = B/9.
PFC_SHIFT = 3


def heights(topo: Topology) -> list[int]:
    """Hops from the nearest host (hosts 0, their switches 1, ...)."""
    height = [-1] * topo.num_nodes
    todo: deque[int] = deque()
    for node in range(topo.num_nodes):
        if not topo.is_switch[node]:
            height[node] = 0
            todo.append(node)
    while todo:
        node = todo.popleft()
        for nxt in topo.neighbours(node):
            if height[nxt] < 0:
                height[nxt] = height[node] + 1
                todo.append(nxt)
    return [max(h, 0) for h in height]


def fluid_link_set(topo: Topology) -> set[int]:
    """The directed links `link_model: auto` gives the fluid model: out of a switch where one sender
    can arrive faster than the link runs (a rate step-down: a 100G NIC behind 400G spines, not a 400G
    NIC behind a bundled 800G uplink that only 400G senders feed), or up from a switch whose links
    from below carry more than its links upwards (an oversubscribed leaf)."""
    height = heights(topo)
    into: dict[int, list[int]] = {}
    for k in range(topo.num_links):
        into.setdefault(topo.link_dst[k], []).append(k)
    feed = _fastest_sender(topo, into)
    chosen = set()
    for k in range(topo.num_links):
        src, dst, rate = topo.link_src[k], topo.link_dst[k], topo.link_bytes_per_ns[k]
        if not topo.is_switch[src]:
            continue
        if any(feed[j] > rate * (1 + 1e-9) for j in into[src] if topo.link_src[j] != dst):
            chosen.add(k)
            continue
        if height[dst] > height[src]:
            below = sum(
                topo.link_bytes_per_ns[j] for j in into[src] if height[topo.link_src[j]] < height[src]
            )
            above = sum(
                topo.link_bytes_per_ns[j]
                for j in topo.out_links[src]
                if height[topo.link_dst[j]] > height[src]
            )
            if below > above * (1 + 1e-9):
                chosen.add(k)
    return chosen


def _fastest_sender(topo: Topology, into: dict[int, list[int]]) -> list[float]:
    """Per directed link, the fastest single sender that can cross it: a host's own rate, capped by
    each link on the way (a fixpoint over the links into each link's source)."""
    feed = [
        rate if not topo.is_switch[topo.link_src[k]] else 0.0 for k, rate in enumerate(topo.link_bytes_per_ns)
    ]
    changed = True
    while changed:
        changed = False
        for k in range(topo.num_links):
            src, dst = topo.link_src[k], topo.link_dst[k]
            if not topo.is_switch[src]:
                continue
            best = max((feed[j] for j in into.get(src, ()) if topo.link_src[j] != dst), default=0.0)
            value = min(topo.link_bytes_per_ns[k], best)
            if value > feed[k]:
                feed[k], changed = value, True
    return feed


def directed_fluid_links(
    topo: Topology, params: DcqcnParams, source: str, fluid: set[int] | None = None
) -> list[FluidLink]:
    """One `FluidLink` per directed link of `topo` (read at the file's own rates); `fluid`: the links
    that get queues (None: every link leaving a switch)."""
    height = heights(topo)
    top = max(height, default=0) + 1
    pfc = params.buffer_bytes / (1 + 2**PFC_SHIFT)
    links = []
    for k in range(topo.num_links):
        src, dst = topo.link_src[k], topo.link_dst[k]
        hs, hd = height[src], height[dst]
        level = float(hs) if hd > hs else (2 * top - hd if hd < hs else hs + 0.5)
        if not topo.is_switch[src] or (fluid is not None and k not in fluid):
            links.append(FluidLink(False, level))
            continue
        e = params.thresholds(round(topo.link_bytes_per_ns[k] * 8e9), source)
        ingress = max(1, sum(1 for j in topo.out_links[src] if topo.link_dst[j] != dst))
        links.append(FluidLink(True, level, e.kmin_bytes, e.kmax_bytes, e.pmax, pfc, ingress))
    return links


def engine_fluid_links(per_link: Sequence[FluidLink], members: Sequence[Iterable[int]]) -> list[FluidLink]:
    """Per engine link, from the directed links it stands for (`members[i]`: one bundle's links)."""
    out = []
    for links in members:
        specs = [per_link[k] for k in links]
        if not specs:
            out.append(FluidLink(False, -1.0))
            continue
        first = specs[0]
        if not first.queued:
            out.append(first)
            continue
        out.append(
            FluidLink(
                True,
                first.level,
                sum(s.kmin for s in specs),
                sum(s.kmax for s in specs),
                first.pmax,
                sum(s.pfc for s in specs),
                sum(s.ingress for s in specs),
            )
        )
    return out


def bundle_members(bundle_of: Sequence[int], num_bundles: int) -> list[list[int]]:
    members: list[list[int]] = [[] for _ in range(num_bundles)]
    for k, bundle in enumerate(bundle_of):
        members[bundle].append(k)
    return members


def fluid_network(
    inputs: DcqcnInputs, capacities: Sequence[float], router: Router, link_class: Mapping[int, int] | None
) -> DcqcnNetwork | None:
    """The DCQCN network over the engine's links: bundles of `router`, or what `link_class` maps them
    to (bundle -> engine link: folded link classes); None when `auto` finds no link for the fluid
    model (the flow model then runs alone). Engine links past the mapped ones (background flows' caps)
    are queue-less."""
    topo = inputs.file_topology
    fluid = fluid_link_set(topo) if inputs.mode == "auto" else None
    if fluid is not None and not fluid:
        return None
    per_link = directed_fluid_links(topo, inputs.params, inputs.config_path, fluid)
    bundles = bundle_members(router.bundle_of, len(router.bundle_bytes_per_ns))
    if link_class is None:
        members: list[list[int]] = bundles
    else:
        members = [[] for _ in capacities]
        for bundle, cls in link_class.items():
            if not members[cls]:
                members[cls] = bundles[bundle]
    # ACKs return over the reverse of each directed link (topology.txt's line j gives links 2j, 2j+1)
    engine_of = (lambda b: b) if link_class is None else (lambda b: link_class.get(b, -1))
    reverse = [engine_of(router.bundle_of[group[0] ^ 1]) if group else -1 for group in members]
    return DcqcnNetwork(
        list(capacities),
        engine_fluid_links(per_link, members),
        inputs.params,
        dict(link_class) if link_class is not None else None,
        reverse + [-1] * (len(capacities) - len(reverse)),
    )


def fluid_link_keys(inputs: DcqcnInputs, router: Router) -> dict[int, Hashable]:
    """Bundle -> what the fluid model sees of it, for folding (`fold(link_keys=...)`): link classes
    must not mix a host's link with a switch's queue, or queues at different places on the path."""
    topo = inputs.file_topology
    fluid = fluid_link_set(topo) if inputs.mode == "auto" else None
    per_link = directed_fluid_links(topo, inputs.params, inputs.config_path, fluid)
    members = bundle_members(router.bundle_of, len(router.bundle_bytes_per_ns))
    return {bundle: engine_fluid_links(per_link, [links])[0] for bundle, links in enumerate(members)}
