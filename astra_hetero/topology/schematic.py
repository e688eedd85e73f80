"""The cluster as a schematic that a cluster architect reads at a glance (plain data; draw.py renders it).

Bottom to top: each node as a box holding its GPUs (coloured by GPU type), its intra-node switch
(NVSwitch or PCIe switch) and its NICs, the boxes of a node group inside one labelled frame; above
them the access switches (leaves, rails or the single core switch), and the spines on top.

Large clusters stay legible because repeated nodes collapse: per node group the first `max_nodes`
nodes are drawn and the others become one box "×N identical nodes"; access switches that serve only
collapsed nodes become one "×M" switch per node group, and spines past `max_spines` one "×K" spine.
A segment drawn for collapsed links stands for all of them (`count`), which all have its kind and rate.

Bottleneck links: in a tier whose links differ between node groups, the slowest ones (the intra-node
fabric per GPU; the NICs compared by each GPU's share of its node's NICs), and the uplinks of every
leaf or rail that is oversubscribed (more bandwidth down than up).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

import networkx as nx

ACCESS_ROLES = ("leaf", "rail", "core")
NETWORK_KINDS = ("nic", "uplink")  # rates in Gbit/s; every other kind is an intra-node fabric (GB/s)
# Vertical tiers (one unit = one GPU column).
Y_GPU, Y_INNER, Y_NIC_SHARED, Y_INTRA_BELOW = 0.0, 1.4, 2.8, -1.4
Y_NODE_BOTTOM, Y_NODE_TOP = -2.2, 3.5
Y_ACCESS, Y_SPINE = 6.5, 9.5
NODE_GAP, GROUP_GAP, COLLAPSED_WIDTH = 0.8, 2.0, 3.2


@dataclass(frozen=True)
class Mark:
    """One drawn device or switch; `count` > 1 stands for that many identical switches."""

    x: float
    y: float
    role: str  # gpu | intra | nic | leaf | rail | core | spine
    label: str = ""
    gpu_type: str | None = None
    count: int = 1


@dataclass(frozen=True)
class Segment:
    """One drawn link, or `count` identical links (same kind and rate) drawn as one."""

    start: tuple[float, float]
    end: tuple[float, float]
    kind: str
    rate_gbps: float
    bottleneck: bool
    count: int = 1


@dataclass(frozen=True)
class Frame:
    x0: float
    y0: float
    x1: float
    y1: float
    label: str
    style: str  # node | collapsed | group


@dataclass(frozen=True)
class LinkKind:
    kind: str
    rate_gbps: float
    count: int  # links of this kind and rate in the whole cluster

    @property
    def label(self) -> str:
        if self.kind in NETWORK_KINDS:
            return f"{self.kind} {self.rate_gbps:g} Gbit/s"
        return f"{self.kind} {self.rate_gbps / 8:g} GB/s per GPU"


@dataclass(frozen=True)
class Schematic:
    marks: tuple[Mark, ...]
    segments: tuple[Segment, ...]
    frames: tuple[Frame, ...]
    gpu_types: dict[str, int]  # GPU type -> number of GPUs, in cluster order
    link_kinds: tuple[LinkKind, ...]
    bottlenecks: tuple[str, ...]  # one line per bottleneck found, for the caption
    width: float
    num_nodes: int


@dataclass(frozen=True)
class GroupFigures:
    """A node group as the graph shows it (all its nodes are built alike)."""

    name: str
    count: int  # nodes
    gpus_per_node: int
    gpu: str  # GPU type
    fabric: str  # intra-node fabric name ("" without an intra-node switch)
    fabric_gbytes_per_s: float  # per GPU
    nics_per_node: int
    nic_gbps: float
    scale_out_gbytes_per_s: float  # each GPU's share of its node's NICs
    domain_nodes: int = 1  # nodes on one scale-up switch fabric (NVL72: 18 trays)

    @property
    def label(self) -> str:
        shared = "" if self.nics_per_node == self.gpus_per_node else " shared"
        nics = f"{self.nics_per_node}×{self.nic_gbps:g}G NIC{shared}"
        inside = ", ".join(p for p in (f"{self.gpus_per_node} {self.gpu}", self.fabric, nics) if p)
        label = f"{self.name}: {self.count} × ({inside})"
        if self.domain_nodes > 1:
            gpus = self.domain_nodes * self.gpus_per_node
            label += (
                f"; scale-up domains of {self.domain_nodes} nodes ({gpus} GPUs) on one {self.fabric} switch"
            )
        return label


@dataclass
class _Host:
    group: str
    gpus: list[int] = field(default_factory=list)
    nics: list[int] = field(default_factory=list)
    intra: int | None = None


def schematic(graph: nx.Graph, max_nodes: int = 2, max_spines: int = 4) -> Schematic:
    """The drawing of a cluster graph (topology/cluster.py) with at most `max_nodes` nodes per node group
    and `max_spines` spines drawn one by one."""
    hosts = _hosts(graph)
    groups = group_figures(graph, hosts)
    bottleneck, notes = bottleneck_links(graph, groups)
    marks: dict[object, Mark] = {}  # graph node (or ("more", group)) -> its mark
    frames: list[Frame] = []
    collapsed: dict[int, str] = {}  # host -> group, for hosts drawn as part of a "×N" box
    x = 0.0
    for name, group in groups.items():
        members = sorted(h for h, host in hosts.items() if host.group == name)
        shown = members if len(members) <= max_nodes + 1 else members[:max_nodes]
        start = x
        for host in shown:
            x = _place_node(graph, hosts[host], group, x, marks, frames) + NODE_GAP
        rest = members[len(shown) :]
        if rest:
            frames.append(
                Frame(
                    x,
                    Y_NODE_BOTTOM,
                    x + COLLAPSED_WIDTH,
                    Y_NODE_TOP,
                    f"×{len(rest)} identical\nnodes\n({len(rest) * group.gpus_per_node} GPUs)",
                    "collapsed",
                )
            )
            marks[("more", name)] = Mark(x + COLLAPSED_WIDTH / 2, Y_NODE_TOP, "nic")
            collapsed.update(dict.fromkeys(rest, name))
            x += COLLAPSED_WIDTH + NODE_GAP
        frames.append(
            Frame(
                start - 0.4,
                Y_NODE_BOTTOM - 1.3,
                x - NODE_GAP + 0.4,
                Y_NODE_TOP + 0.4,
                group.label,
                "group",
            )
        )
        x += GROUP_GAP
    width = max(x - GROUP_GAP, 1.0)
    _place_switches(graph, hosts, collapsed, marks, width, max_spines)
    segments = _segments(graph, hosts, collapsed, marks, bottleneck)
    gpu_types = Counter(graph.nodes[g]["gpu"] for g in _gpus(graph))
    kinds = Counter((kind, rate) for _, _, kind, rate in _edges(graph))
    drawn = dict.fromkeys(m for key, m in marks.items() if not (isinstance(key, tuple) and key[0] == "more"))
    return Schematic(
        marks=tuple(drawn),
        segments=tuple(segments),
        frames=tuple(frames),
        gpu_types=dict(gpu_types),
        link_kinds=tuple(LinkKind(k, r, n) for (k, r), n in sorted(kinds.items(), key=_kind_order)),
        bottlenecks=tuple(notes),
        width=width,
        num_nodes=len(hosts),
    )


def bottleneck_links(graph: nx.Graph, groups: dict[str, GroupFigures]) -> tuple[set[frozenset], list[str]]:
    """(links that are bottlenecks, as frozensets of their two ends; one line per kind of bottleneck)."""
    marked: set[frozenset] = set()
    notes: list[str] = []
    fabric = {name: g.fabric_gbytes_per_s for name, g in groups.items()}
    share = {name: g.scale_out_gbytes_per_s for name, g in groups.items()}
    for tier, per_group, kinds in (("scale-up", fabric, None), ("scale-out", share, NETWORK_KINDS[:1])):
        present = {n: v for n, v in per_group.items() if _has_tier(graph, n, kinds)}
        if len(set(present.values())) < 2:
            continue
        slowest = min(present.values())
        slow_groups = {n for n, v in present.items() if v == slowest}
        for u, v, kind, _ in _edges(graph):
            in_tier = kind in kinds if kinds else kind not in NETWORK_KINDS
            if in_tier and _group_of(graph, u, v) in slow_groups:
                marked.add(frozenset((u, v)))
        others = ", ".join(f"{n} {per_group[n]:g}" for n in present if n not in slow_groups)
        notes.append(f"{tier}: {', '.join(sorted(slow_groups))} at {slowest:g} GB/s per GPU ({others})")
    oversubscribed: dict[tuple[str, float], int] = Counter()  # (groups served, down:up) -> switches
    for switch, role in graph.nodes(data="role"):
        if role not in ("leaf", "rail"):
            continue
        up = sum(r for _, _, k, r in _edges(graph, switch) if k == "uplink")
        down = sum(r for _, _, k, r in _edges(graph, switch) if k != "uplink")
        if up and down > up * (1 + 1e-9):
            served = sorted(
                {graph.nodes[o]["group"] for _, o, k, _ in _edges(graph, switch) if k != "uplink"}
            )
            oversubscribed[(", ".join(served), round(down / up, 3))] += 1
            marked.update(frozenset((switch, o)) for _, o, k, _ in _edges(graph, switch) if k == "uplink")
    for (served, ratio), count in oversubscribed.items():
        notes.append(
            f"uplinks: {count} {'switch' if count == 1 else 'switches'} serving {served} "
            f"oversubscribed {ratio:g}:1"
        )
    return marked, notes


def _has_tier(graph: nx.Graph, group: str, kinds: tuple[str, ...] | None) -> bool:
    return any(
        (k in kinds if kinds else k not in NETWORK_KINDS) and _group_of(graph, u, v) == group
        for u, v, k, _ in _edges(graph)
    )


def _group_of(graph: nx.Graph, u: int, v: int) -> str | None:
    """The node group a link belongs to: that of its end inside a node (a NIC-to-leaf link: the NIC's)."""
    for end in (u, v):
        if graph.nodes[end].get("group") is not None and graph.nodes[end]["role"] in ("gpu", "intra", "nic"):
            return graph.nodes[end]["group"]
    return None


def _edges(graph: nx.Graph, node: int | None = None) -> Iterable[tuple[int, int, str, float]]:
    edges = graph.edges(node, data=True) if node is not None else graph.edges(data=True)
    return ((u, v, d["kind"], d["rate_gbps"]) for u, v, d in edges)


def _gpus(graph: nx.Graph) -> list[int]:
    return sorted(n for n, role in graph.nodes(data="role") if role == "gpu")


def _hosts(graph: nx.Graph) -> dict[int, _Host]:
    hosts: dict[int, _Host] = {}
    for node, data in sorted(graph.nodes(data=True)):
        if data["role"] not in ("gpu", "intra", "nic"):
            continue
        host = hosts.setdefault(data["host"], _Host(data["group"]))
        if data["role"] == "gpu":
            host.gpus.append(node)
        elif data["role"] == "nic":
            host.nics.append(node)
        else:
            host.intra = node
    return hosts


def _place_node(
    graph: nx.Graph, host: _Host, group: GroupFigures, x0: float, marks: dict, frames: list[Frame]
) -> float:
    """Marks for one node's GPUs, intra-node switch and NICs from x0; returns the node's right edge."""
    nic_on_gpu = all(any(graph.nodes[n]["role"] == "gpu" for n in graph.neighbors(nic)) for nic in host.nics)
    columns = max(len(host.gpus), len(host.nics), 1)
    for i, gpu in enumerate(host.gpus):
        marks[gpu] = Mark(x0 + 0.5 + i, Y_GPU, "gpu", gpu_type=group.gpu)
    centre = x0 + columns / 2
    if host.intra is not None:
        label = f"{group.fabric} {group.fabric_gbytes_per_s:g} GB/s per GPU"
        marks[host.intra] = Mark(centre, Y_INTRA_BELOW if nic_on_gpu else Y_INNER, "intra", label)
    for i, nic in enumerate(host.nics):
        if nic_on_gpu:
            gpu = next(n for n in graph.neighbors(nic) if graph.nodes[n]["role"] == "gpu")
            marks[nic] = Mark(marks[gpu].x, Y_INNER, "nic")
        else:
            marks[nic] = Mark(x0 + (i + 0.5) * columns / len(host.nics), Y_NIC_SHARED, "nic")
    frames.append(Frame(x0, Y_NODE_BOTTOM, x0 + columns, Y_NODE_TOP, "", "node"))
    return x0 + columns


def _place_switches(
    graph: nx.Graph,
    hosts: dict[int, _Host],
    collapsed: dict[int, str],
    marks: dict,
    width: float,
    max_spines: int,
) -> None:
    access = sorted(n for n, role in graph.nodes(data="role") if role in ACCESS_ROLES)
    hidden: dict[str, list[int]] = defaultdict(list)  # group -> its leaves that serve collapsed nodes only
    for index, switch in enumerate(access):
        role = graph.nodes[switch]["role"]
        served = {graph.nodes[n]["host"] for n in graph.neighbors(switch) if graph.nodes[n]["role"] == "nic"}
        xs = [marks[n].x for n in graph.neighbors(switch) if n in marks]
        xs += [marks[("more", collapsed[h])].x for h in served & collapsed.keys()]
        if role == "leaf" and served <= collapsed.keys():
            hidden[collapsed[min(served)]].append(switch)
        elif role == "rail":
            marks[switch] = Mark((index + 0.5) * width / len(access), Y_ACCESS, role, f"rail {index}")
        else:
            marks[switch] = Mark(
                sum(xs) / len(xs), Y_ACCESS, role, f"{role} {index}" if role == "leaf" else role
            )
    for group, switches in hidden.items():
        x = marks[("more", group)].x
        label = f"×{len(switches)} leaves" if len(switches) > 1 else f"leaf {access.index(switches[0])}"
        marks.update(dict.fromkeys(switches, Mark(x, Y_ACCESS, "leaf", label, count=len(switches))))
    spines = sorted(n for n, role in graph.nodes(data="role") if role == "spine")
    shown = spines if len(spines) <= max_spines else spines[: max_spines - 1]
    slots = len(shown) + (len(spines) > len(shown))
    for i, spine in enumerate(shown):
        marks[spine] = Mark((i + 0.5) * width / slots, Y_SPINE, "spine", f"spine {i}")
    rest = spines[len(shown) :]
    if rest:
        ghost = Mark((slots - 0.5) * width / slots, Y_SPINE, "spine", f"×{len(rest)} spines", count=len(rest))
        marks.update(dict.fromkeys(rest, ghost))


def _segments(
    graph: nx.Graph,
    hosts: dict[int, _Host],
    collapsed: dict[int, str],
    marks: dict,
    bottleneck: set[frozenset],
) -> list[Segment]:
    """Links between drawn marks; links touching collapsed nodes or switches merged by (ends, kind, rate)."""
    merged: Counter = Counter()
    for u, v, kind, rate in _edges(graph):
        ends = []
        for end in (u, v):
            host = graph.nodes[end].get("host")
            if host in collapsed and graph.nodes[end]["role"] in ("gpu", "intra", "nic"):
                ends.append(("more", collapsed[host]))
            else:
                ends.append(end)
        if ends[0] == ends[1]:  # inside a collapsed node: its box stands for it
            continue
        a, b = (marks[ends[0]], marks[ends[1]])
        merged[((a.x, a.y), (b.x, b.y), kind, rate, frozenset((u, v)) in bottleneck)] += 1
    return [
        Segment(start, end, kind, rate, slow, count)
        for (start, end, kind, rate, slow), count in merged.items()
    ]


def group_figures(graph: nx.Graph, hosts: dict[int, _Host] | None = None) -> dict[str, GroupFigures]:
    """Per node group, in rank order, what its first node shows."""
    hosts = _hosts(graph) if hosts is None else hosts
    figures: dict[str, GroupFigures] = {}
    for host in hosts.values():
        if host.group in figures:
            continue
        gpu = graph.nodes[host.gpus[0]]
        nic_rates = [rate for nic in host.nics for *_, kind, rate in _edges(graph, nic) if kind == "nic"]
        intra = graph.nodes[host.intra] if host.intra is not None else {}
        figures[host.group] = GroupFigures(
            name=host.group,
            count=sum(h.group == host.group for h in hosts.values()),
            gpus_per_node=len(host.gpus),
            gpu=gpu["gpu"],
            fabric=intra.get("fabric", ""),
            fabric_gbytes_per_s=gpu["scale_up_gbps"] / 8,
            nics_per_node=len(host.nics),
            nic_gbps=min(nic_rates, default=0.0),
            scale_out_gbytes_per_s=gpu["scale_out_gbps"] / 8,
            domain_nodes=intra.get("domain_nodes", 1),
        )
    return figures


def _kind_order(item: tuple[tuple[str, float], int]) -> tuple[int, str, float]:
    (kind, rate), _ = item
    return (NETWORK_KINDS.index(kind) + 1 if kind in NETWORK_KINDS else 0, kind, -rate)
