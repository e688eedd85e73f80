"""How much work a spec asks for, estimated from the spec alone before any of it is done.

A valid spec can still ask for more than a machine can do: `global_batch_size: 1e12` on 8 GPUs is a
trillion micro-batches, `num_spines: 1000000` a million switches. The estimate costs microseconds;
past a limit the user can raise (`--max-nodes`, `--max-links`, `--max-flows`) the spec is refused with
the numbers and the field that drives them, instead of running for hours or dying of MemoryError.

Trace nodes: summed over ranks, a rank's work is its micro-batches times its layers, and over all
ranks Σ micro-batches(replica) × layers(stage) = tp × micro-batches × layers whatever the partition,
so the estimate is exact in its shape; the per-layer and per-micro-batch constants are those of the
generator (workload/graph.py), checked against real generation in tests/test_bounds.py.
Network: nodes and links are counted the way topology/cluster.py builds them.
Flows: every collective step is one transfer; a ring over g ranks takes 2(g−1) steps per rank (an
upper bound for the hierarchical algorithm).

Classes: the generator writes one trace per class of alike ranks and the embedded engine simulates one
representative per class, so `--max-nodes` and `--max-flows` bound the class traces' nodes and the
representatives' transfers: the per-rank totals scaled by classes / ranks. Classes are estimated from
what makes ranks differ: pipeline stage, GPU type, how many micro-batches a replica gets, the ranks a
device slowdown touches; jitter draws per rank, so every rank is its own class. Written per rank
(`generate --per-rank`, ASTRA-sim's backends, several jobs on one cluster) the totals are checked.

Some limits are formats', not resources', and cannot be raised: pipeline message tags are int32 and
number micro-batches below 10^6 (workload/graph.py `p2p_tag`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from astra_hetero.errors import FieldError

if TYPE_CHECKING:  # annotations only: the CLI imports this module to declare its options
    from astra_hetero.spec.schema import Spec

# Trace nodes per layer per micro-batch on a rank with tp > 1: compute and TP collective alternate,
# 8 without sequence parallelism, 16 with it; full recompute adds half as many again, `selective_op`
# 4 (its recomputation re-runs two collectives: SP's all-gathers or, without SP, the all-reduces).
# With sequence parallelism the backward also re-gathers the input of the layer's two column-parallel GEMMs
# (workload/costs.py `_regather`): an all-gather and the compute it splits, twice.
NODES_PER_LAYER = 8
NODES_PER_LAYER_SP_REGATHER = 4
# Per micro-batch (pipeline send/recv, embedding, head, loss) and per layer once (gradient buckets).
NODES_PER_MICRO_BATCH = 4
NODES_PER_LAYER_ONCE = 2
NODES_PER_RANK = 12  # optimizer step, tail bucket, embedding sync

MAX_SWEEP_POINTS = 10_000  # points a sweep may expand to (`sweep --max-points`)
MAX_MICRO_BATCHES = 1_000_000  # pipeline tags number micro-batches below this (graph.p2p_tag)
MAX_TAG = 2**31 - 1


class WorkTooLarge(FieldError):
    """The spec asks for more work than the limits allow (exit code 2: change the spec or the limit)."""


@dataclass(frozen=True)
class WorkLimits:
    # trace nodes over all ranks (estimated): GPT-3 175B on 1024 GPUs 2 M, on 8192 GPUs 16 M, a 1T model
    # on 512 GPUs with 512 micro-batches 16 M; generating 50 M takes minutes and GBs of traces
    max_nodes: int = 50_000_000
    # trace nodes on one rank: the engine simulates each distinct rank's trace, so this bounds its time
    # (the 1T model with 512 micro-batches has 31 k per rank; 1,000,000 take a minute or two)
    max_rank_nodes: int = 1_000_000
    # network links (1024 GPUs in spine-leaf: about 5,000; 131,072 GPUs about 400,000, built in seconds)
    max_links: int = 1_000_000
    max_flows: int = 200_000_000  # network transfers the collectives make (same run: about 10^7)


@dataclass(frozen=True)
class WorkEstimate:
    ranks: int
    micro_batches: int
    trace_nodes: int
    network_nodes: int
    network_links: int
    flows: int
    links_field: str  # the spec field that most drives the link count
    classes: int = 0  # rank classes: traces generated, representatives simulated (module docstring)

    @property
    def class_trace_nodes(self) -> int:
        """Nodes of the traces by class (and of the representatives the engine simulates)."""
        return -(-self.trace_nodes * self.classes // max(self.ranks, 1))

    @property
    def class_flows(self) -> int:
        """Transfers the representatives make (every instance of a class's transfer counts once)."""
        return -(-self.flows * self.classes // max(self.ranks, 1))


def estimate_work(spec: Spec) -> WorkEstimate:
    par, cluster = spec.parallelism, spec.cluster
    micro_batches = par.global_batch_size // par.micro_batch_size
    layers = spec.model.num_layers
    ranks = cluster.num_gpus
    per_layer = 0
    if par.tp > 1:
        per_layer = NODES_PER_LAYER * (2 if par.sequence_parallel else 1)
        per_layer += per_layer // 2 if par.recompute == "full" else 0
        # torchtitan's per-op recompute runs the layer's two entering collectives again: the SP
        # all-gathers (the reduce-scatters are kept), or without SP the two all-reduces
        per_layer += NODES_PER_LAYER // 2 if par.recompute == "selective_op" else 0
        per_layer += NODES_PER_LAYER_SP_REGATHER if par.sequence_parallel else 0
    chunks = _virtual_stages(spec)
    trace_nodes = (
        par.tp * micro_batches * layers * per_layer
        + NODES_PER_MICRO_BATCH * par.tp * par.pp * chunks * micro_batches
        + NODES_PER_LAYER_ONCE * par.tp * par.dp * layers
        + NODES_PER_RANK * ranks
    )
    tp_flows = par.tp * micro_batches * layers * (per_layer // 2) * 2 * (par.tp - 1)
    dp_flows = (par.tp * par.dp * layers + 2 * ranks) * 2 * (par.dp - 1)
    p2p_flows = 2 * par.tp * par.pp * chunks * micro_batches
    network_nodes, network_links, links_field = _network_size(spec)
    return WorkEstimate(
        ranks,
        micro_batches,
        trace_nodes,
        network_nodes,
        network_links,
        tp_flows + dp_flows + p2p_flows,
        links_field,
        estimate_classes(spec),
    )


def estimate_classes(spec: Spec) -> int:
    """Rank classes: pipeline stages × GPU types × distinct micro-batch counts of the replicas, plus
    the ranks a device slowdown touches (each splits its class and those of the ranks it meets); every
    rank under jitter. At most the number of GPUs."""
    par, cluster = spec.parallelism, spec.cluster
    ranks = cluster.num_gpus
    if any(e.event == "jitter" for e in spec.dynamics):
        return ranks
    gpu_types = len({g.gpu.type_key for g in cluster.node_groups})
    classes = par.pp * gpu_types * _micro_batch_counts(spec) * (2 if spec.model.moe is not None else 1)
    touched = 0
    for event in spec.dynamics:
        if event.event == "device_slowdown":
            touched += len(event.ranks) if event.ranks is not None else _gpus_selected(spec, event)
    classes += 4 * touched  # the rank, its pipeline partner, its TP peers and data-parallel partners
    idle = ranks - par.tp * par.pp * par.dp * par.cp
    return min(ranks, classes + (1 if idle > 0 else 0))


def _micro_batch_counts(spec: Spec) -> int:
    """How many distinct micro-batch counts the replicas get (at most)."""
    split, dp = spec.partition.micro_batches, spec.parallelism.dp
    if isinstance(split, list):
        return len(set(split))
    if split == "uniform":
        micro_batches = spec.parallelism.global_batch_size // spec.parallelism.micro_batch_size
        return 1 if micro_batches % dp == 0 else 2
    return min(dp, 2 * len(spec.cluster.node_groups))  # auto: by each replica's hardware, and a remainder


def _gpus_selected(spec: Spec, event: Any) -> int:
    group = next((g for g in spec.cluster.node_groups if g.name == event.node_group), None)
    if group is None:
        return spec.cluster.num_gpus
    return group.gpus_per_node * (1 if event.node is not None else group.count)


def _network_size(spec: Any) -> tuple[int, int, str]:
    """(nodes, links, the field driving the count) of the cluster graph topology/cluster.py builds."""
    net = spec.network
    nodes = links = 0
    biggest, biggest_field = -1, "cluster.node_groups"
    access_down: list[tuple[int, float]] = []  # per access switch kind: (count, downlink Gbit/s each)
    for i, group in enumerate(spec.cluster.node_groups):
        nics = group.nics_per_node
        intra = group.gpus_per_node > 1 or nics != group.gpus_per_node
        node_links = (group.gpus_per_node if intra else 0) + 2 * nics
        nodes += group.count * (group.gpus_per_node + int(intra) + nics)
        links += group.count * node_links
        if group.count * node_links > biggest:
            biggest = group.count * node_links
            more_nics = nics > group.gpus_per_node
            biggest_field = f"cluster.node_groups[{i}]." + ("nic.count" if more_nics else "count")
        if net.topology == "spine_leaf":
            leaves = math.ceil(group.count / net.nodes_per_leaf)
            per_leaf = min(group.count, net.nodes_per_leaf) * nics * group.nic.gbps
            access_down.append((leaves, per_leaf))
    if net.topology == "single_switch":
        access = [(1, 0.0)]
    elif net.topology == "rail_optimized":
        rails = max(g.nics_per_node for g in spec.cluster.node_groups)
        per_rail = sum(g.count * g.nic.gbps for g in spec.cluster.node_groups)
        access = [(rails, per_rail)]
    else:
        access = access_down
    num_access = sum(count for count, _ in access)
    nodes += num_access
    spines = 0
    if num_access >= 2:
        fastest = max(g.nic.gbps for g in spec.cluster.node_groups)
        busiest = max(down for _, down in access) / net.oversubscription
        spines = net.uplinks([busiest], fastest, num_access)[0]
        if net.num_spines is not None:
            field = "network.num_spines"
        else:
            field = "network.uplink_gbps" if net.uplink_gbps else "network.oversubscription"
        if num_access * spines > biggest:
            biggest_field = field
    return nodes + spines, links + num_access * spines, biggest_field


def check_work(
    spec: Spec,
    limits: WorkLimits,
    *,
    workload: bool = True,
    topology: bool = True,
    per_rank: bool = False,
) -> WorkEstimate:
    """The estimate, or WorkTooLarge naming the field and the limit to raise. `per_rank`: the traces
    are written (and simulated) rank by rank, so the totals count, not the classes'."""
    work = estimate_work(spec)
    par = spec.parallelism
    nodes = work.trace_nodes if per_rank else work.class_trace_nodes
    flows = work.flows if per_rank else work.class_flows
    classes = "" if per_rank else f" in {work.classes:,} rank classes"
    if workload and nodes > limits.max_nodes:
        field = (
            "parallelism.global_batch_size"
            if work.micro_batches >= spec.model.num_layers
            else "model.num_layers"
        )
        raise WorkTooLarge(
            field,
            f"the traces would hold about {_count(nodes)} nodes (tp {par.tp} × "
            f"{work.micro_batches:,} micro-batches × {spec.model.num_layers:,} layers on "
            f"{work.ranks:,} GPUs{classes}), more than --max-nodes {limits.max_nodes:,}; make the run "
            "smaller or raise the limit",
        )
    per_rank = work.trace_nodes // max(work.ranks, 1)
    if workload and per_rank > limits.max_rank_nodes:
        raise WorkTooLarge(
            "parallelism.global_batch_size"
            if work.micro_batches >= spec.model.num_layers
            else "model.num_layers",
            f"each rank's trace would hold about {_count(per_rank)} nodes ({work.micro_batches:,} "
            f"micro-batches × {spec.model.num_layers:,} layers over {work.ranks:,} GPUs), more than "
            f"--max-rank-nodes {limits.max_rank_nodes:,}; make the run smaller or raise the limit",
        )
    if workload and spec.iterations > 1 and per_rank * spec.iterations > limits.max_rank_nodes:
        raise WorkTooLarge(
            "iterations",
            f"{spec.iterations:,} iterations of about {_count(per_rank)} nodes per rank would simulate "
            f"about {_count(per_rank * spec.iterations)} nodes per rank, more than --max-rank-nodes "
            f"{limits.max_rank_nodes:,}; run fewer iterations or raise the limit",
        )
    if workload or topology:
        check_network(spec, limits)
    if workload and flows > limits.max_flows:
        field = "parallelism.dp" if par.dp >= par.tp else "parallelism.tp"
        raise WorkTooLarge(
            field,
            f"the collectives would make about {_count(flows)} network transfers "
            f"(tp {par.tp}, dp {par.dp}, {work.micro_batches:,} micro-batches{classes}), more than "
            f"--max-flows {limits.max_flows:,}; make the run smaller or raise the limit",
        )
    if work.ranks > MAX_TAG:
        raise WorkTooLarge("cluster.node_groups", f"{work.ranks:,} GPUs: Chakra numbers ranks as int32")
    boundaries = par.pp * _virtual_stages(spec) - 1
    if boundaries * 2 * MAX_MICRO_BATCHES > MAX_TAG:
        raise WorkTooLarge(
            "parallelism.pp", f"pp={par.pp}: pipeline message tags allow at most about 1,000 (virtual) stages"
        )
    if _most_micro_batches(spec, work.micro_batches) >= MAX_MICRO_BATCHES:
        raise WorkTooLarge(
            "parallelism.global_batch_size",
            f"{work.micro_batches:,} micro-batches over dp={par.dp} replicas: pipeline message tags "
            f"number fewer than {MAX_MICRO_BATCHES:,} micro-batches per replica",
        )
    return work


def check_network(spec: Any, limits: WorkLimits) -> None:
    """WorkTooLarge if the cluster's network has more links than --max-links allows (`spec`: any spec
    with `cluster` and `network` sections, a shared cluster's included)."""
    nodes, links, field = _network_size(spec)
    if links > limits.max_links:
        raise WorkTooLarge(
            field,
            f"the network would have about {_count(links)} links and {_count(nodes)} nodes, more than "
            f"--max-links {limits.max_links:,}; make the cluster smaller or raise the limit",
        )


def _virtual_stages(spec: Spec) -> int:
    """Model chunks per pipeline stage: interleaved 1F1B sends across every chunk boundary. (The field
    arrives with the interleaved schedule; a spec without it has one chunk per stage.)"""
    return int(getattr(spec.parallelism, "virtual_stages", 1))


def _most_micro_batches(spec: Spec, micro_batches: int) -> int:
    """The largest share one replica can get (exact for uniform and lists; `auto` may give all but dp−1)."""
    split, dp = spec.partition.micro_batches, spec.parallelism.dp
    if isinstance(split, list):
        return max(split)
    return math.ceil(micro_batches / dp) if split == "uniform" else micro_batches - (dp - 1)


def _count(n: int) -> str:
    return f"{n:,}" if n < 10**7 else f"{n:.2g}".replace("e+", "e")
