"""Each `dynamics:` event resolved against the cluster: the ranks and topology links it touches.

Links are named by their index among the link lines of `ns3/topology.txt` (0 = the first link line),
the order `topology.ns3` writes the graph's edges in. The resolved list is what the run directory
carries (`dynamics.json`) and what the embedded engine reads; nothing downstream sees the spec.
"""

from __future__ import annotations

from typing import Any

import networkx as nx

from astra_hetero.dynamics.events import BackgroundTraffic, DeviceSlowdown, DynamicEvent, Jitter, LinkRate
from astra_hetero.errors import SpecError
from astra_hetero.spec.schema import Spec
from astra_hetero.topology.ns3 import _ordered_edges as ordered_edges  # topology.txt's line order

FORMAT = 1
_INTRA_KINDS = ("nvlink", "pcie", "xgmi")
_ACCESS_ROLES = ("leaf", "rail")


def check_dynamics(spec: Spec) -> None:
    """The checks that need the cluster but not its graph: groups, node and rank indices."""
    for i, event in enumerate(spec.dynamics):
        where = f"dynamics[{i}]"
        if isinstance(event, BackgroundTraffic):
            for side, end in (("from", event.from_), ("to", event.to)):
                _hosts(spec, end.node_group, end.node, f"{where}.{side}")
            if (event.from_.node_group, event.from_.node) == (event.to.node_group, event.to.node):
                raise SpecError(f"{where}.to", "background traffic needs two different nodes")
        elif isinstance(event, LinkRate | DeviceSlowdown) and event.node_group is not None:
            _hosts(spec, event.node_group, event.node, where)
        if isinstance(event, DeviceSlowdown) and event.ranks is not None:
            for k, rank in enumerate(event.ranks):
                if rank >= spec.cluster.num_gpus:
                    raise SpecError(
                        f"{where}.ranks[{k}]", f"rank {rank} outside 0..{spec.cluster.num_gpus - 1}"
                    )


def resolve_events(spec: Spec, graph: nx.Graph) -> list[dict[str, Any]]:
    """Every event as plain data: times in ns, the ranks and link lines it touches."""
    check_dynamics(spec)
    lines = {_key(u, v): j for j, (u, v, _) in enumerate(ordered_edges(graph))}
    resolved = []
    for i, event in enumerate(spec.dynamics):
        record = {
            "index": i,
            "event": event.event,
            "start_ns": round(event.start_ms * 1e6),
            "end_ns": None if event.end_ms is None else round(event.end_ms * 1e6),
        }
        record.update(_resolve(spec, graph, lines, event, f"dynamics[{i}]"))
        resolved.append(record)
    return resolved


def dynamics_document(spec: Spec, graph: nx.Graph) -> dict[str, Any]:
    return {"format": FORMAT, "iterations": spec.iterations, "events": resolve_events(spec, graph)}


def _resolve(
    spec: Spec, graph: nx.Graph, lines: dict[tuple[int, int], int], event: DynamicEvent, where: str
) -> dict[str, Any]:
    if isinstance(event, Jitter):
        ranks = list(range(spec.cluster.num_gpus))
        return {"distribution": event.distribution, "sigma": event.sigma, "seed": event.seed, "ranks": ranks}
    if isinstance(event, DeviceSlowdown):
        if event.ranks is not None:
            ranks = sorted(set(event.ranks))
        else:
            ranks = _gpus_on(graph, _hosts(spec, event.node_group, event.node, where))
        return {"factor": event.factor, "ranks": ranks}
    if isinstance(event, BackgroundTraffic):
        src = _gpus_on(graph, _hosts(spec, event.from_.node_group, event.from_.node, f"{where}.from"))[0]
        dst = _gpus_on(graph, _hosts(spec, event.to.node_group, event.to.node, f"{where}.to"))[0]
        return {"gbps": event.gbps, "src_rank": src, "dst_rank": dst, "ranks": [src, dst]}
    edges, ranks = _link_selection(spec, graph, event, where)
    if not edges:
        raise SpecError(where, f"selects no {event.kind} link in this cluster ({_describe(event)})")
    return {
        "factor": event.factor,
        "kind": event.kind,
        "links": sorted(lines[_key(*e)] for e in edges),
        "ranks": ranks,
    }


def _link_selection(
    spec: Spec, graph: nx.Graph, event: LinkRate, where: str
) -> tuple[list[tuple[int, int]], list[int]]:
    nodes = graph.nodes
    if event.kind == "uplink":
        access = _access_switches(spec, graph, event, where)
        spines = sorted(
            (n for n in graph if nodes[n].get("role") == "spine"), key=lambda n: nodes[n]["index"]
        )
        if event.spine is not None and event.spine >= len(spines):
            raise SpecError(
                f"{where}.spine",
                f"spine {event.spine} outside 0..{len(spines) - 1}"
                if spines
                else "this cluster has no spines",
            )
        chosen = set(spines if event.spine is None else [spines[event.spine]])
        edges = [(a, s) for a in access for s in graph[a] if s in chosen]
        hosts = {nodes[n]["host"] for a in access for n in graph[a] if "host" in nodes[n]}
        return edges, _gpus_on(graph, hosts)
    hosts = set(_hosts(spec, event.node_group, event.node, where))
    kinds = ("nic",) if event.kind == "nic" else _INTRA_KINDS
    edges = [
        (u, v)
        for u, v, kind in graph.edges(data="kind")
        if kind in kinds and (nodes[u].get("host") in hosts or nodes[v].get("host") in hosts)
    ]
    return edges, _gpus_on(graph, hosts)


def _access_switches(spec: Spec, graph: nx.Graph, event: LinkRate, where: str) -> list[int]:
    nodes = graph.nodes
    access = [n for n in graph if nodes[n].get("role") in _ACCESS_ROLES]
    if event.node_group is None:
        return sorted(access)
    hosts = set(_hosts(spec, event.node_group, event.node, where))
    return sorted(a for a in access if any(nodes[n].get("host") in hosts for n in graph[a]))


def _hosts(spec: Spec, group: str | None, node: int | None, where: str) -> list[int]:
    """Global node (host) indices of `group` (node `node` only, if given)."""
    names = spec.cluster.group_names
    if group not in names:
        raise SpecError(f"{where}.node_group", f"unknown node group {group!r}; known: {', '.join(names)}")
    k = names.index(group)
    first = sum(g.count for g in spec.cluster.node_groups[:k])
    count = spec.cluster.node_groups[k].count
    if node is None:
        return list(range(first, first + count))
    if node >= count:
        raise SpecError(
            f"{where}.node", f"node {node} outside 0..{count - 1} (group {group!r} has {count} nodes)"
        )
    return [first + node]


def _gpus_on(graph: nx.Graph, hosts: Any) -> list[int]:
    wanted = set(hosts)
    return sorted(
        n for n, data in graph.nodes(data=True) if data.get("role") == "gpu" and data["host"] in wanted
    )


def _describe(event: LinkRate) -> str:
    parts = [f"node_group {event.node_group}" if event.node_group else "every leaf"]
    if event.node is not None:
        parts.append(f"node {event.node}")
    if event.spine is not None:
        parts.append(f"spine {event.spine}")
    return ", ".join(parts)


def _key(u: int, v: int) -> tuple[int, int]:
    return (min(u, v), max(u, v))
