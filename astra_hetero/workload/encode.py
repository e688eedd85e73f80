"""Rank-class graphs → Chakra trace bytes for each bound rank, through MLCommons' schema classes.

Compute durations are integer microseconds in Chakra. Rounding each node on its own would bias a
rank by up to half a microsecond per node; instead each node gets the difference of the rounded
*cumulative* times, so a rank's total compute time is exact to within half a microsecond.

Nodes that do not depend on the rank (compute) are encoded once per class; collectives once per
(class, group); only point-to-point nodes, which name the rank itself, are encoded per rank.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from astra_hetero.chakra_io import COLL, COMP, RECV, SEND, collective_type, frame, metadata_record, pb
from astra_hetero.workload.graph import COLL as K_COLL
from astra_hetero.workload.graph import COMP as K_COMP
from astra_hetero.workload.graph import RECV as K_RECV
from astra_hetero.workload.graph import SEND as K_SEND
from astra_hetero.workload.graph import RankGraph, TraceNode

_NODE_TYPES = {K_COMP: COMP, K_COLL: COLL, K_SEND: SEND, K_RECV: RECV}


@dataclass(frozen=True)
class RankBinding:
    """What the roles of a class graph mean for one rank."""

    rank: int
    groups: dict[str, str]  # role -> comm-group id
    peers: dict[str, int]  # role -> rank


def _attr(node: pb.Node, name: str, **value: object) -> None:
    attr = node.attr.add()
    attr.name = name
    for key, val in value.items():
        setattr(attr, key, val)


def _base(trace_node: TraceNode) -> pb.Node:
    node = pb.Node(id=trace_node.id, name=trace_node.name, type=_NODE_TYPES[trace_node.kind])
    node.data_deps.extend(trace_node.data_deps)
    node.ctrl_deps.extend(trace_node.ctrl_deps)
    _attr(node, "is_cpu_op", bool_val=False)
    return node


def encode_compute(trace_node: TraceNode, duration_us: int) -> bytes:
    node = _base(trace_node)
    node.duration_micros = duration_us
    _attr(node, "num_ops", int64_val=int(trace_node.flops))
    _attr(node, "tensor_size", uint64_val=trace_node.bytes)
    return frame(node)


def encode_collective(trace_node: TraceNode, group_id: str) -> bytes:
    node = _base(trace_node)
    _attr(node, "comm_type", int64_val=collective_type(trace_node.comm_type))
    _attr(node, "comm_size", int64_val=trace_node.bytes)
    _attr(node, "pg_name", string_val=group_id)
    return frame(node)


def encode_p2p(trace_node: TraceNode, rank: int, peer: int) -> bytes:
    node = _base(trace_node)
    sender = trace_node.kind == K_SEND
    _attr(node, "comm_src", int32_val=rank if sender else peer)
    _attr(node, "comm_dst", int32_val=peer if sender else rank)
    _attr(node, "comm_tag", int32_val=trace_node.tag)
    _attr(node, "comm_size", int64_val=trace_node.bytes)
    return frame(node)


def microsecond_durations(graph: RankGraph) -> list[int]:
    """Per compute node (in order), durations whose running sum tracks the exact running sum."""
    durations, elapsed_ns, emitted_us = [], 0.0, 0
    for node in graph.nodes:
        if node.kind == K_COMP:
            elapsed_ns += node.time_ns
            total_us = round(elapsed_ns / 1000.0)
            durations.append(total_us - emitted_us)
            emitted_us = total_us
    return durations


@dataclass
class ClassEncoder:
    graph: RankGraph
    _fixed: list[bytes | None] = field(init=False)
    _collectives: dict[tuple[int, str], bytes] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        durations = iter(microsecond_durations(self.graph))
        self._fixed = [
            encode_compute(n, next(durations)) if n.kind == K_COMP else None for n in self.graph.nodes
        ]

    def encode(self, binding: RankBinding) -> bytes:
        records = [metadata_record()]
        for node, fixed in zip(self.graph.nodes, self._fixed, strict=True):
            if fixed is not None:
                records.append(fixed)
            elif node.kind == K_COLL:
                group_id = binding.groups[node.group]
                key = (node.id, group_id)
                record = self._collectives.get(key)
                if record is None:
                    record = self._collectives[key] = encode_collective(node, group_id)
                records.append(record)
            else:
                records.append(encode_p2p(node, binding.rank, binding.peers[node.peer]))
        return b"".join(records)
