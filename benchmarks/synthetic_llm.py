"""A synthetic run directory with the shape of a Megatron-style GPT iteration (for benchmarks).

Per rank: a 1F1B schedule of micro-batches; every layer's forward and backward is two compute nodes
each followed by a tensor-parallel all-reduce; activations and gradients cross stages by send/recv;
during the last backward each layer's gradients are all-reduced across data-parallel replicas (one
bucket per layer). The network is 8-GPU nodes (NVSwitch), a NIC switch per GPU, and a full-bisection
leaf/spine fabric. Sizes and durations are GPT-3-175B-like; the point is the trace shape and count.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from astra_hetero import chakra_io
from astra_hetero.chakra_io import pb


@dataclass(frozen=True)
class Shape:
    tp: int = 8
    pp: int = 16
    dp: int = 8
    num_micro_batches: int = 16
    layers_per_stage: int = 6
    gpus_per_node: int = 8
    gpus_per_leaf: int = 32
    num_spines: int = 8
    fwd_half_layer_us: int = 1150
    tp_allreduce_bytes: int = 50_331_648
    p2p_bytes: int = 6_291_456
    dp_bucket_bytes: int = 455_000_000

    @property
    def num_ranks(self) -> int:
        return self.tp * self.pp * self.dp


def _attr(name: str, **value: object) -> pb.AttributeProto:
    return pb.AttributeProto(name=name, **value)


class _RankWriter:
    def __init__(self) -> None:
        self.records = [chakra_io.metadata_record()]
        self.next_id = 0
        self.last_compute = -1

    def add(self, name: str, kind: int, deps: list[int], attrs: list[pb.AttributeProto],
            duration_us: int = 0) -> int:
        node = pb.Node(id=self.next_id, name=name, type=kind, duration_micros=duration_us)
        node.data_deps.extend(d for d in deps if d >= 0)
        node.attr.extend(attrs + [_attr("is_cpu_op", bool_val=False)])
        self.records.append(chakra_io.frame(node))
        self.next_id += 1
        return node.id

    def compute(self, name: str, duration_us: int, dep: int) -> int:
        deps = [self.last_compute, dep]
        self.last_compute = self.add(name, pb.COMP_NODE, sorted(set(deps)), [], duration_us)
        return self.last_compute

    def all_reduce(self, name: str, size: int, group: int, dep: int) -> int:
        return self.add(name, pb.COMM_COLL_NODE, [dep], [
            _attr("comm_type", int64_val=pb.ALL_REDUCE), _attr("comm_size", int64_val=size),
            _attr("pg_name", string_val=str(group))])

    def p2p(self, name: str, kind: int, src: int, dst: int, tag: int, size: int, dep: int) -> int:
        return self.add(name, kind, [dep], [
            _attr("comm_src", int64_val=src), _attr("comm_dst", int64_val=dst),
            _attr("comm_tag", int64_val=tag), _attr("comm_size", int64_val=size)])


def rank_of(shape: Shape, stage: int, replica: int, tp_index: int) -> int:
    return (stage * shape.dp + replica) * shape.tp + tp_index


def one_f_one_b(num_stages: int, stage: int, num_micro_batches: int) -> list[tuple[str, int]]:
    warmup = min(num_stages - stage - 1, num_micro_batches)
    order = [("f", mb) for mb in range(warmup)]
    for i in range(num_micro_batches - warmup):
        order += [("f", warmup + i), ("b", i)]
    order += [("b", mb) for mb in range(num_micro_batches - warmup, num_micro_batches)]
    return order


def _rank_trace(shape: Shape, stage: int, replica: int, tp_index: int) -> list[bytes]:
    rank = rank_of(shape, stage, replica, tp_index)
    tp_group, dp_group = stage * shape.dp + replica, shape.pp * shape.dp + stage * shape.tp + tp_index
    writer = _RankWriter()
    for phase, mb in one_f_one_b(shape.pp, stage, shape.num_micro_batches):
        forward = phase == "f"
        upstream = stage - 1 if forward else stage + 1
        downstream = stage + 1 if forward else stage - 1
        tag = 2 * mb + (0 if forward else 1)
        dep = -1
        if 0 <= upstream < shape.pp:
            peer = rank_of(shape, upstream, replica, tp_index)
            dep = writer.p2p(f"recv_{phase}{mb}", pb.COMM_RECV_NODE, peer, rank, tag, shape.p2p_bytes, -1)
        half_us = shape.fwd_half_layer_us * (1 if forward else 2)
        for layer in range(shape.layers_per_stage):
            for part in ("attn", "mlp"):
                comp = writer.compute(f"{phase}{mb}_l{layer}_{part}", half_us, dep)
                dep = writer.all_reduce(f"{phase}{mb}_l{layer}_{part}_tp_ar", shape.tp_allreduce_bytes,
                                        tp_group, comp)
            if not forward and mb == shape.num_micro_batches - 1:
                writer.all_reduce(f"dp_ar_l{layer}", shape.dp_bucket_bytes, dp_group, dep)
        if 0 <= downstream < shape.pp:
            peer = rank_of(shape, downstream, replica, tp_index)
            writer.p2p(f"send_{phase}{mb}", pb.COMM_SEND_NODE, rank, peer, tag, shape.p2p_bytes, dep)
    return writer.records


def topology_text(shape: Shape) -> str:
    """NPUs, then one NVSwitch per node, one NIC switch per GPU, leaves and spines."""
    n = shape.num_ranks
    num_nodes = n // shape.gpus_per_node
    num_leaves = -(-n // shape.gpus_per_leaf)
    nvswitch0, nic0 = n, n + num_nodes
    leaf0 = nic0 + n
    spine0 = leaf0 + num_leaves
    total = spine0 + shape.num_spines
    links = []
    for gpu in range(n):
        links.append(f"{gpu} {nvswitch0 + gpu // shape.gpus_per_node} 3600Gbps 0.00025ms 0")
        links.append(f"{gpu} {nic0 + gpu} 400Gbps 0.0001ms 0")
        links.append(f"{nic0 + gpu} {leaf0 + gpu // shape.gpus_per_leaf} 400Gbps 0.0005ms 0")
    uplink = 400 * shape.gpus_per_leaf // shape.num_spines
    for leaf in range(num_leaves):
        for spine in range(shape.num_spines):
            links.append(f"{leaf0 + leaf} {spine0 + spine} {uplink}Gbps 0.0005ms 0")
    switches = " ".join(str(i) for i in range(n, total))
    return f"{total} {total - n} {len(links)}\n{switches}\n" + "\n".join(links) + "\n"


def write_run_dir(shape: Shape, root: Path) -> Path:
    """Write workload/, comm_groups.json, ns3/topology.txt and a minimal manifest under `root`."""
    (root / "workload").mkdir(parents=True, exist_ok=True)
    (root / "ns3").mkdir(exist_ok=True)
    groups: dict[str, list[int]] = {}
    for stage in range(shape.pp):
        for replica in range(shape.dp):
            members = [rank_of(shape, stage, replica, t) for t in range(shape.tp)]
            groups[str(stage * shape.dp + replica)] = members
    for stage in range(shape.pp):
        for t in range(shape.tp):
            groups[str(shape.pp * shape.dp + stage * shape.tp + t)] = [
                rank_of(shape, stage, d, t) for d in range(shape.dp)]
    ranks = []
    for stage in range(shape.pp):
        for replica in range(shape.dp):
            for t in range(shape.tp):
                rank = rank_of(shape, stage, replica, t)
                records = _rank_trace(shape, stage, replica, t)
                chakra_io.write_trace(root / f"workload/workload.{rank}.et", records)
                ranks.append({"rank": rank, "node": rank // shape.gpus_per_node, "gpu": "h100-sxm",
                              "stage": stage, "replica": replica, "tp_index": t})
    ranks.sort(key=lambda r: r["rank"])
    (root / "workload/comm_groups.json").write_text(json.dumps(groups))
    (root / "ns3/topology.txt").write_text(topology_text(shape))
    manifest = {"format": "astra-hetero/manifest@1", "name": f"synthetic-{shape.num_ranks}",
                "num_ranks": shape.num_ranks, "collective_algorithm": "hierarchical",
                "workload_prefix": "workload/workload", "ranks": ranks}
    (root / "manifest.json").write_text(json.dumps(manifest))
    return root
