"""Figures of a cluster graph, and the check that every GPU can reach every other one.

Bisection bandwidth here is the maximum flow, in Gbit/s one way, from the first half of the ranks to
the second half (ranks in cluster order, so the cut falls between nodes and, where the shape has
them, between leaves). Link rates are capacities in each direction and GPUs never carry transit
traffic, as in ns-3, where hosts do not forward. This is the bandwidth of that one balanced cut,
not the minimum over all balanced cuts (finding that is NP-hard); for the shapes built here, whose
leaves and rails are filled in rank order, it is the cut a data-parallel exchange between the two
halves of the cluster meets.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import networkx as nx

from astra_hetero.errors import InfeasiblePlan
from astra_hetero.topology.cluster import gpu_ids, switch_ids


@dataclass(frozen=True)
class GroupInjection:
    group: str
    scale_up_gbps: float  # per GPU, into the intra-node fabric
    scale_out_gbps: float  # per GPU: the node's NIC bandwidth shared by its GPUs


@dataclass(frozen=True)
class Figures:
    num_nodes: int
    num_gpus: int
    num_switches: int
    num_links: int
    switches_by_role: dict[str, int]
    links_by_kind: dict[str, int]
    injection: tuple[GroupInjection, ...]
    bisection_gbps: float

    def lines(self) -> list[str]:
        roles = ", ".join(f"{n} {r}" for r, n in self.switches_by_role.items())
        kinds = ", ".join(f"{n} {k}" for k, n in self.links_by_kind.items())
        rows = [
            f"nodes       {self.num_nodes} ({self.num_gpus} GPUs, {self.num_switches} switches: {roles})",
            f"links       {self.num_links} ({kinds})",
        ]
        for item in self.injection:
            rows.append(
                f"injection   {item.group}: {item.scale_up_gbps:g} Gbit/s scale-up, "
                f"{item.scale_out_gbps:g} Gbit/s scale-out per GPU"
            )
        rows.append(f"bisection   {self.bisection_gbps:g} Gbit/s (first half of the ranks to the second)")
        return rows


def figures(graph: nx.Graph) -> Figures:
    gpus = gpu_ids(graph)
    injection: dict[str, GroupInjection] = {}
    for gpu in gpus:
        attrs = graph.nodes[gpu]
        injection.setdefault(
            attrs["group"], GroupInjection(attrs["group"], attrs["scale_up_gbps"], attrs["scale_out_gbps"])
        )
    return Figures(
        num_nodes=graph.number_of_nodes(),
        num_gpus=len(gpus),
        num_switches=len(switch_ids(graph)),
        num_links=graph.number_of_edges(),
        switches_by_role=dict(Counter(r for _, r in graph.nodes(data="role") if r != "gpu")),
        links_by_kind=dict(Counter(k for _, _, k in graph.edges(data="kind"))),
        injection=tuple(injection.values()),
        bisection_gbps=bisection_gbps(graph),
    )


def bisection_gbps(graph: nx.Graph) -> float:
    gpus = gpu_ids(graph)
    if len(gpus) < 2:
        return 0.0
    first = set(gpus[: len(gpus) // 2])
    second = set(gpus) - first
    flow = nx.DiGraph()
    for u, v, rate in graph.edges(data="rate_gbps"):
        for a, b in ((u, v), (v, u)):
            # A GPU only sends (first half) or only receives (second half): no transit through hosts.
            if b in first or a in second:
                continue
            flow.add_edge(a, b, capacity=rate)
    for gpu in gpus:
        if gpu in first:
            flow.add_edge("source", gpu)  # no capacity attribute: unbounded
        else:
            flow.add_edge(gpu, "sink")
    value, _ = nx.maximum_flow(flow, "source", "sink")
    return float(value)


def check_connected(graph: nx.Graph) -> None:
    """Raise InfeasiblePlan unless every pair of GPUs has a path whose inner nodes are all switches."""
    gpus = gpu_ids(graph)
    switches = graph.subgraph(switch_ids(graph))
    component_of = {n: i for i, comp in enumerate(nx.connected_components(switches)) for n in comp}
    reach: dict[int, frozenset[int]] = {}
    for gpu in gpus:
        reach[gpu] = frozenset(component_of[n] for n in graph.neighbors(gpu) if n in component_of)
    if len(gpus) == 1:
        return
    by_reach: dict[frozenset[int], int] = {}
    for gpu in gpus:
        by_reach.setdefault(reach[gpu], gpu)
    if frozenset.intersection(*by_reach):  # one switch component every GPU reaches: connected
        return
    items = list(by_reach.items())
    for i, (reach_a, gpu_a) in enumerate(items):
        for reach_b, gpu_b in items[i:]:
            if not reach_a & reach_b:
                raise InfeasiblePlan(
                    "cluster",
                    f"the network is disconnected: GPU rank {gpu_a} cannot reach rank {gpu_b} "
                    "through switches (hosts do not forward traffic)",
                )
