"""Render the cluster as ASTRA-sim analytical inputs: one bandwidth and latency per dimension.

The analytical backend has one bandwidth and one latency (ns) per dimension, so a mixed cluster
can only be approximated, and we approximate pessimistically: each dimension gets the bottleneck
(minimum) bandwidth and the maximum latency over the node groups. In a `Switch` dimension a message
crosses two links (NPU - switch - NPU), so its latency is half the worst one-way path latency.
Bandwidths are decimal GB/s here and are written in the file's own unit (GiB/s, see units.py).

- `network.yml` (congestion-unaware binary): dimension 0 inside a node, dimension 1 across nodes, when
  every group has the same number of GPUs per node (more than one) and there is more than one node;
  otherwise it falls back to one dimension and says so in its comments. A scale-up domain (several
  nodes on one switch fabric, e.g. GB200 NVL72) counts as one node here: dimension 0 is its fabric.
- `network_1d.yml` (congestion-aware binary, which rejects more than one dimension): all NPUs on one
  switch at the scale-out bottleneck, so intra-node traffic is modelled at NIC speed there.

Scale-out bandwidth per GPU is its node's NIC bandwidth shared by its GPUs, divided by the worst
leaf/rail oversubscription wherever the traffic of a dimension crosses the spines.
"""

from __future__ import annotations

import heapq
import json
from dataclasses import dataclass
from pathlib import Path

import networkx as nx
import numpy as np

from astra_hetero import rundir
from astra_hetero.spec.schema import Spec
from astra_hetero.topology.cluster import gpu_ids
from astra_hetero.topology.ns3 import render
from astra_hetero.units import gbps_to_gbytes_per_s, gbytes_per_s_to_analytical_bandwidth

COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")


@dataclass(frozen=True)
class Dimension:
    topology: str  # Ring | FullyConnected | Switch
    npus: int
    bandwidth_gbytes_per_s: float
    latency_ns: float


@dataclass(frozen=True)
class AnalyticalNetwork:
    dims: tuple[Dimension, ...]
    notes: tuple[str, ...]


def oversubscription(graph: nx.Graph) -> dict[str, float]:
    """Per node group, the worst downlink : uplink ratio of a leaf or rail its NICs attach to.

    1 where there are no spines, or where the uplinks exceed the downlinks (no oversubscription).
    """
    worst: dict[str, float] = {group: 1.0 for _, group in graph.nodes(data="group") if group is not None}
    for node, role in graph.nodes(data="role"):
        if role not in ("leaf", "rail"):
            continue
        up = down = 0.0
        groups = set()
        for _, other, data in graph.edges(node, data=True):
            if data["kind"] == "uplink":
                up += data["rate_gbps"]
            else:
                down += data["rate_gbps"]
                groups.add(graph.nodes[other]["group"])
        for group in groups:
            worst[group] = max(worst[group], down / up if up else 1.0)
    return worst


def scale_out_gbps(graph: nx.Graph, across_spines: bool) -> float:
    """Bottleneck per-GPU scale-out bandwidth; `across_spines` divides by each group's oversubscription."""
    ratio = oversubscription(graph) if across_spines else {}
    return min(
        graph.nodes[g]["scale_out_gbps"] / ratio.get(graph.nodes[g]["group"], 1.0) for g in gpu_ids(graph)
    )


def max_latencies_ns(graph: nx.Graph) -> tuple[float, float]:
    """Worst one-way latency between GPUs of different nodes (scale-up domains), through switches
    only: over all pairs, and over pairs with the same index in their domain (dimension 1).

    One source GPU per (group, local index) suffices: the shapes built here treat all nodes of a group
    alike. Each source's last hops to every GPU are taken as arrays (131,072 GPUs, eight sources).
    """
    gpus = gpu_ids(graph)
    is_gpu = {n: role == "gpu" for n, role in graph.nodes(data="role")}
    # the switches' links to other switches as plain lists: hosts never forward, so none is entered
    switch_adj = {
        n: [(other, attrs["latency_ns"]) for other, attrs in graph.adj[n].items() if not is_gpu[other]]
        for n, gpu in is_gpu.items()
        if not gpu
    }
    sources = {}
    domain = np.empty(len(gpus), dtype=np.int64)
    domain_local = np.empty(len(gpus), dtype=np.int64)
    last_hop, last_gpu, last_ns = [], [], []  # every (switch, GPU) link
    for i, gpu in enumerate(gpus):
        attrs = graph.nodes[gpu]
        sources.setdefault((attrs["group"], attrs["local"]), gpu)
        domain[i], domain_local[i] = attrs["domain"], attrs["domain_local"]
        for n, edge in graph.adj[gpu].items():
            last_hop.append(n)
            last_gpu.append(i)
            last_ns.append(edge["latency_ns"])
    hops, owner, hop_ns = np.array(last_hop), np.array(last_gpu), np.array(last_ns, dtype=float)
    order = np.argsort(owner, kind="stable")
    hops, owner, hop_ns = hops[order], owner[order], hop_ns[order]
    starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
    worst, worst_local = 0.0, 0.0
    index = {gpu: i for i, gpu in enumerate(gpus)}
    for source in sources.values():
        src = graph.nodes[source]
        first = [(attrs["latency_ns"], n) for n, attrs in graph.adj[source].items() if not is_gpu[n]]
        dist = _switch_latencies(switch_adj, first)
        reach = np.array([dist.get(n, np.inf) for n in hops.tolist()]) + hop_ns
        best = np.minimum.reduceat(reach, starts)  # per GPU with links, in GPU order
        targets = owner[starts]
        keep = (domain[targets] != domain[index[source]]) & np.isfinite(best)
        local = keep & (domain_local[targets] == src["domain_local"])
        if keep.any():
            worst = max(worst, float(best[keep].max()))
        if local.any():
            worst_local = max(worst_local, float(best[local].max()))
    return worst, worst_local


def _switch_latencies(
    switch_adj: dict[int, list[tuple[int, float]]], first: list[tuple[float, int]]
) -> dict[int, float]:
    """Latency to every switch reachable from a GPU whose links to switches are `first` (latency,
    switch), through switches only (Dijkstra on `switch_adj`)."""
    heap = list(first)
    heapq.heapify(heap)
    dist: dict[int, float] = {}
    pop, push = heapq.heappop, heapq.heappush
    while heap:
        d, node = pop(heap)
        if node in dist:
            continue
        dist[node] = d
        for other, latency in switch_adj[node]:
            if other not in dist:
                push(heap, (d + latency, other))
    return dist


def analytical_networks(spec: Spec, graph: nx.Graph) -> tuple[AnalyticalNetwork, AnalyticalNetwork]:
    """(multi-dimensional network, one-dimensional network)."""
    groups = spec.cluster.node_groups
    num_gpus = spec.cluster.num_gpus
    num_nodes = spec.cluster.num_scale_up_domains
    fabric_bw = min(g.intra_node_fabric.gbytes_per_s for g in groups)
    fabric_latency = max(g.intra_node_fabric.latency_ns for g in groups)
    oversubscribed = max(oversubscription(graph).values()) > 1
    mixed = len({(g.gpu.type_key, g.intra_node_fabric, g.nic) for g in groups}) > 1
    notes = [
        "Generated by astra-hetero; one bandwidth (GiB/s, which ASTRA-sim calls GB/s; per link and",
        "direction) and one latency (ns, per link) per dimension, so differing node groups are approximated:",
    ]
    if mixed:
        notes.append("node groups differ: each dimension takes the minimum bandwidth and maximum latency.")
    if num_nodes == 1:
        one = Dimension("Switch", num_gpus, fabric_bw, fabric_latency)
        notes.append("a single node (or scale-up domain): one dimension, its switch fabric.")
        return AnalyticalNetwork((one,), tuple(notes)), AnalyticalNetwork((one,), tuple(notes))
    flat_bw = gbps_to_gbytes_per_s(scale_out_gbps(graph, across_spines=True))
    latency_ns, local_latency_ns = max_latencies_ns(graph)
    flat = Dimension("Switch", num_gpus, flat_bw, latency_ns / 2)
    flat_notes = (
        *notes,
        "one dimension: every pair at the scale-out bottleneck (intra-node traffic at NIC speed)"
        + (", through oversubscribed leaves." if oversubscribed else "."),
    )
    per_node = {g.scale_up_gpus for g in groups}
    if len(per_node) > 1 or per_node == {1}:
        reason = (
            "node groups differ in gpus_per_node (or scale_up_domain.gpus)"
            if len(per_node) > 1
            else "one GPU per node"
        )
        fallback = (*flat_notes, f"{reason}: no intra/inter-node split, so network.yml is 1-D too.")
        return AnalyticalNetwork((flat,), fallback), AnalyticalNetwork((flat,), flat_notes)
    rail = spec.network.topology == "rail_optimized"
    inter_bw = gbps_to_gbytes_per_s(scale_out_gbps(graph, across_spines=not rail))
    inter = Dimension("Switch", num_nodes, inter_bw, local_latency_ns / 2)
    intra = Dimension("Switch", per_node.pop(), fabric_bw, fabric_latency)
    if rail:
        where = " (same rail: no spine crossed)."
    else:
        where = " (divided by each group's leaf oversubscription)." if oversubscribed else "."
    domains = any(g.scale_up_domain is not None for g in groups)
    notes += [
        "dim 0: the intra-node switch (NVSwitch or PCIe switch) at the per-GPU fabric rate"
        + (f", one per scale-up domain of {intra.npus} GPUs;" if domains else ";"),
        "dim 1: GPUs with the same local index across nodes, at each GPU's share of its node's NICs" + where,
    ]
    return AnalyticalNetwork((intra, inter), tuple(notes)), AnalyticalNetwork((flat,), flat_notes)


def network_yaml(network: AnalyticalNetwork) -> str:
    bandwidths = [gbytes_per_s_to_analytical_bandwidth(d.bandwidth_gbytes_per_s) for d in network.dims]
    return render("network.yml.j2", notes=network.notes, dims=network.dims, bandwidths=bandwidths)


def system_config(spec: Spec, num_dims: int) -> dict[str, object]:
    """ASTRA-sim system file: ring collectives in every dimension, durations taken from the traces.

    Roofline is off because our traces carry per-rank `duration_micros` (the system file is one for
    all NPUs, so it cannot describe different GPUs); `peak-perf` is the slowest group's and only
    matters if a user turns roofline on. `local-mem-bw` (the slowest group's HBM) also prices the
    reductions inside collectives. One dataset split: with one active chunk per dimension ASTRA-sim runs
    split chunks one after another, which only multiplies the per-step latencies; the embedded engine
    does the same (measured on real ASTRA-sim: 0.2 % apart on gpt3_13b_16xh100 this way, 12 % with 4).
    """
    gpus = [g.gpu for g in spec.cluster.node_groups]
    system: dict[str, object] = {
        "scheduling-policy": "LIFO",
        "endpoint-delay": 10,
        "active-chunks-per-dimension": 1,
        "preferred-dataset-splits": 1,
    }
    system.update({f"{name}-implementation": ["ring"] * num_dims for name in COLLECTIVES})
    system.update(
        {
            "collective-optimization": "localBWAware",
            "local-mem-bw": round(min(g.hbm_tbps * g.compute_multiplier for g in gpus) * 1000, 3),
            "boost-mode": 0,
            "roofline-enabled": 0,
            "peak-perf": round(min(g.bf16_tflops * g.compute_multiplier for g in gpus), 3),
        }
    )
    return system


def write_analytical(spec: Spec, graph: nx.Graph, root: Path) -> int:
    """Write the analytical inputs under `root` (a staging run directory); return the number of
    dimensions of `network.yml`."""
    (root / rundir.ANALYTICAL_DIR).mkdir(parents=True, exist_ok=True)
    multi, flat = analytical_networks(spec, graph)
    files = {
        rundir.ANALYTICAL_NETWORK: network_yaml(multi),
        rundir.ANALYTICAL_NETWORK_1D: network_yaml(flat),
        rundir.ANALYTICAL_SYSTEM: json.dumps(system_config(spec, len(multi.dims)), indent=4) + "\n",
        rundir.ANALYTICAL_SYSTEM_1D: json.dumps(system_config(spec, 1), indent=4) + "\n",
        rundir.REMOTE_MEMORY: json.dumps({"memory-type": "NO_MEMORY_EXPANSION"}, indent=4) + "\n",
    }
    for relative, text in files.items():
        (root / relative).write_text(text)
    return len(multi.dims)
