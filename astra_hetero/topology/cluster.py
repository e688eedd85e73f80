"""The cluster as a graph: GPUs, intra-node switches, NICs, and the scale-out network.

Node ids are integers. GPUs come first and are numbered by rank exactly as
`spec.devices.enumerate_devices` numbers them, so the ns-3 NPU ids 0..N-1 are the trace ranks. Every
other node forwards packets and is a switch to ns-3 (`role` says what it stands for):

    gpu     an accelerator (an ns-3 host: hosts never forward traffic for others)
    intra   a node's NVSwitch / PCIe switch; each GPU links to it at the fabric's per-GPU rate. In a
            scale-up domain (several nodes on one switch fabric, e.g. the 18 trays of a GB200 NVL72)
            one such switch serves every GPU of the domain
    nic     a network adapter, at the NIC rate on both of its links
    leaf    a top-of-rack switch (spine_leaf), `rail` a rail switch (rail_optimized),
    core    the one switch of single_switch, `spine` the tier that joins leaves or rails

NICs are always nodes of their own, also with one NIC per GPU (GPU - NIC - leaf). Linking a GPU straight
to its leaf would give two GPUs of one node two equally short paths, through the NVSwitch and through
the leaf, and ns-3's hop-count ECMP would send about half of the intra-node traffic over the NIC. With
fewer (or more) NICs than GPUs, the NICs hang off the intra-node switch (GPU - NVSwitch - NIC - leaf).

Edge attributes: `rate_gbps`, `latency_ns`, `kind` (the fabric family "nvlink", "pcie" or "xgmi" for
GPU links inside a node, "nic" for every NIC link, "uplink" for leaf/rail-to-spine links). The kinds go
into the run directory (`ns3/link_kinds.json`) for the embedded engine's NCCL model.
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx

from astra_hetero.spec.devices import enumerate_devices
from astra_hetero.spec.schema import NetworkSpec, NodeGroupSpec, Spec
from astra_hetero.units import gbytes_per_s_to_gbps


@dataclass(frozen=True)
class _Nic:
    node_id: int  # graph node
    host: int  # global node index
    index: int  # NIC index inside its host
    group: NodeGroupSpec


def fabric_kind(group: NodeGroupSpec) -> str:
    """Link kind of a group's intra-node fabric: its family (nvlink, pcie, xgmi)."""
    return group.intra_node_fabric.kind


def build_cluster_graph(spec: Spec) -> nx.Graph:
    """The cluster of `spec` with the network shape `spec.network.topology`."""
    graph = nx.Graph(topology=spec.network.topology, name=spec.name)
    devices = enumerate_devices(spec.cluster)
    for device in devices:
        group = device.spec
        graph.add_node(
            device.rank,
            role="gpu",
            host=device.node,
            group=device.group_name,
            gpu=device.gpu_type,
            local=device.local_gpu,
            domain=device.domain,
            domain_local=device.domain_local,
            scale_up_gbps=_fabric_gbps(group),
            scale_out_gbps=group.nic.gbps * group.nics_per_node / group.gpus_per_node,
        )
    nics: list[_Nic] = []
    on_host: dict[int, list[int]] = {}
    for d in devices:  # each node's ranks, gathered once rather than by a scan of every device per node
        on_host.setdefault(d.node, []).append(d.rank)
    host = 0
    for group, name in zip(spec.cluster.node_groups, spec.cluster.group_names, strict=True):
        intra: int | None = None
        for index in range(group.count):
            ranks = on_host.get(host, [])
            if index % group.nodes_per_domain == 0:  # a node, or the first node of a domain
                intra = _scale_up_switch(graph, host, name, group)
            nics.extend(_add_node_internals(graph, host, name, group, ranks, intra))
            host += 1
    builders = {"single_switch": _single_switch, "spine_leaf": _spine_leaf, "rail_optimized": _rail_optimized}
    builders[spec.network.topology](graph, nics, spec.network)
    return graph


def _fabric_gbps(group: NodeGroupSpec) -> float:
    return gbytes_per_s_to_gbps(group.intra_node_fabric.gbytes_per_s)


def _new_node(graph: nx.Graph, role: str, **attrs: object) -> int:
    node_id = graph.number_of_nodes()
    graph.add_node(node_id, role=role, **attrs)
    return node_id


def _scale_up_switch(graph: nx.Graph, host: int, name: str, group: NodeGroupSpec) -> int | None:
    """The switch of a node's (or a domain's, from its first node `host`) scale-up fabric; None for a
    single GPU with a NIC of its own, which needs none."""
    per_gpu = group.nics_per_node == group.gpus_per_node
    if group.scale_up_gpus == 1 and per_gpu:
        return None
    fabric = group.intra_node_fabric
    attrs = {"domain_nodes": group.nodes_per_domain} if group.scale_up_domain is not None else {}
    return _new_node(graph, "intra", host=host, group=name, fabric=fabric.preset or fabric.name, **attrs)


def _add_node_internals(
    graph: nx.Graph, host: int, name: str, group: NodeGroupSpec, ranks: list[int], intra: int | None
) -> list[_Nic]:
    """The GPUs' links to their scale-up switch `intra` and the NICs of one node; returns its NICs in
    index order."""
    per_gpu = group.nics_per_node == group.gpus_per_node
    if intra is not None:
        fabric = group.intra_node_fabric
        graph.add_edges_from(
            ((rank, intra) for rank in ranks),
            rate_gbps=_fabric_gbps(group),
            latency_ns=fabric.latency_ns,
            kind=fabric_kind(group),
        )
    nics = []
    for index in range(group.nics_per_node):
        nic = _new_node(graph, "nic", host=host, group=name, index=index)
        inner = ranks[index] if per_gpu else intra
        graph.add_edge(inner, nic, rate_gbps=group.nic.gbps, latency_ns=group.nic.latency_ns, kind="nic")
        nics.append(_Nic(nic, host, index, group))
    return nics


def _attach(graph: nx.Graph, nic: _Nic, switch: int, network: NetworkSpec) -> None:
    graph.add_edge(
        nic.node_id, switch, rate_gbps=nic.group.nic.gbps, latency_ns=network.link_latency_ns, kind="nic"
    )


def _single_switch(graph: nx.Graph, nics: list[_Nic], network: NetworkSpec) -> None:
    core = _new_node(graph, "core")
    for nic in nics:
        _attach(graph, nic, core, network)


def _spine_leaf(graph: nx.Graph, nics: list[_Nic], network: NetworkSpec) -> None:
    """Leaves take `nodes_per_leaf` nodes in order; a new leaf starts where a node group starts."""
    leaves: list[int] = []
    down: dict[int, float] = {}
    hosts_on_leaf: dict[int, set[int]] = {}
    last_group: str | None = None
    for nic in nics:
        group_name = graph.nodes[nic.node_id]["group"]
        full = leaves and len(hosts_on_leaf[leaves[-1]] | {nic.host}) > network.nodes_per_leaf
        if not leaves or full or group_name != last_group:
            leaves.append(_new_node(graph, "leaf"))
            hosts_on_leaf[leaves[-1]] = set()
            down[leaves[-1]] = 0.0
        last_group = group_name
        hosts_on_leaf[leaves[-1]].add(nic.host)
        down[leaves[-1]] += nic.group.nic.gbps
        _attach(graph, nic, leaves[-1], network)
    _add_spines(graph, leaves, down, network, nics)


def _rail_optimized(graph: nx.Graph, nics: list[_Nic], network: NetworkSpec) -> None:
    """NIC i of every node on rail switch i; spines join the rails."""
    num_rails = max(nic.index for nic in nics) + 1
    rails = [_new_node(graph, "rail", index=i) for i in range(num_rails)]
    down = dict.fromkeys(rails, 0.0)
    for nic in nics:
        _attach(graph, nic, rails[nic.index], network)
        down[rails[nic.index]] += nic.group.nic.gbps
    _add_spines(graph, rails, down, network, nics)


def _add_spines(
    graph: nx.Graph, access: list[int], down: dict[int, float], network: NetworkSpec, nics: list[_Nic]
) -> None:
    """Join the access switches (leaves or rails) through one spine tier, one link per pair, as many
    spines at such rates as `NetworkSpec.uplinks` says. A single access switch needs no spines."""
    if len(access) < 2:
        return
    fastest_nic = max(nic.group.nic.gbps for nic in nics)  # the rate of every NIC link
    num_spines, uplinks = network.uplinks([down[a] / network.oversubscription for a in access], fastest_nic)
    rates = dict(zip(access, uplinks, strict=True))
    spines = [_new_node(graph, "spine", index=i) for i in range(num_spines)]
    for a in access:
        for spine in spines:
            graph.add_edge(
                a, spine, rate_gbps=float(rates[a]), latency_ns=network.link_latency_ns, kind="uplink"
            )


def gpu_ids(graph: nx.Graph) -> list[int]:
    return sorted(n for n, role in graph.nodes(data="role") if role == "gpu")


def switch_ids(graph: nx.Graph) -> list[int]:
    return sorted(n for n, role in graph.nodes(data="role") if role != "gpu")
