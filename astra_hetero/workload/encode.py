"""Rank-class graphs → Chakra trace bytes for each bound rank, through MLCommons' schema classes.

Compute durations are integer microseconds in Chakra. Rounding each node on its own would bias a
rank by up to half a microsecond per node; instead each node gets the difference of the rounded
*cumulative* times, so a rank's total compute time is exact to within half a microsecond.

Nodes that do not depend on the rank (compute) are encoded once per class; collectives once per
(class, group); only point-to-point nodes, which name the rank itself, are encoded per rank.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from google.protobuf.internal.encoder import _VarintBytes  # type: ignore[attr-defined]

from astra_hetero.chakra_io import COLL, COMP, RECV, SEND, collective_type, frame, metadata_record, pb
from astra_hetero.workload.program import COLL as K_COLL
from astra_hetero.workload.program import COMP as K_COMP
from astra_hetero.workload.program import RECV as K_RECV
from astra_hetero.workload.program import SEND as K_SEND
from astra_hetero.workload.program import RankGraph, TraceNode

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


def _attr_entry(name: str, **value: object) -> bytes:
    """One `attr` entry of a serialized Node (field 10), as the schema's serializer writes it."""
    attr = pb.AttributeProto(name=name, **value)
    body = attr.SerializeToString()
    return b"\x52" + _VarintBytes(len(body)) + body


def _framed(body: bytes) -> bytes:
    return _length_prefix(len(body)) + body


@lru_cache(maxsize=4096)
def _length_prefix(size: int) -> bytes:
    return _VarintBytes(size)  # records have few distinct sizes


@dataclass
class ClassEncoder:
    """Encodes a class graph for each rank bound to it, byte for byte as `encode_compute`,
    `encode_collective` and `encode_p2p` would, but from pre-serialized pieces: a node serializes
    its fields in field order with attributes last, so a collective is its fixed body plus one
    `pg_name` entry, and a send/recv its fixed body with the rank-specific endpoint entries spliced
    in. Consecutive nodes that depend on the same comm-group role (or none) form one *run*, joined
    once per group they are bound to; only transfers are assembled per rank."""

    graph: RankGraph
    _runs: list[tuple[str, list[int]]] = field(init=False)  # (role, node indices); "" = fixed, "p2p"
    _pieces: list[object] = field(init=False)
    _joined: dict[tuple[int, str], bytes] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        durations = iter(microsecond_durations(self.graph))
        self._pieces = []
        self._runs = []
        for index, node in enumerate(self.graph.nodes):
            if node.kind == K_COMP:
                self._pieces.append(encode_compute(node, next(durations)))
                role = ""
            elif node.kind == K_COLL:
                base = _base(node)
                _attr(base, "comm_type", int64_val=collective_type(node.comm_type))
                _attr(base, "comm_size", int64_val=node.bytes)
                self._pieces.append(base.SerializeToString())
                role = node.group
            else:
                head = _base(node).SerializeToString()
                tail = _attr_entry("comm_tag", int32_val=node.tag) + _attr_entry(
                    "comm_size", int64_val=node.bytes
                )
                self._pieces.append((head, tail, node.kind == K_SEND, node.peer))
                role = "p2p"
            last = self._runs[-1] if self._runs else None
            if (
                last is not None
                and last[0] != "p2p"
                and role != "p2p"
                and (not role or last[0] in ("", role))
            ):
                self._runs[-1] = (last[0] or role, last[1])  # compute nodes join any run
                last[1].append(index)
            else:
                self._runs.append((role, [index]))

    def encode(self, binding: RankBinding) -> bytes:
        parts = [metadata_record()]
        for number, (role, nodes) in enumerate(self._runs):
            if role == "p2p":
                head, tail, sender, peer_role = self._pieces[nodes[0]]  # type: ignore[misc]
                peer = binding.peers[peer_role]
                src, dst = (binding.rank, peer) if sender else (peer, binding.rank)
                middle = _endpoint("comm_src", src) + _endpoint("comm_dst", dst)
                parts.append(_framed(head + middle + tail))
                continue
            group = binding.groups[role] if role else ""
            key = (number, group)
            joined = self._joined.get(key)
            if joined is None:
                joined = self._joined[key] = self._join(nodes, group)
            parts.append(joined)
        return b"".join(parts)

    def _join(self, nodes: list[int], group: str) -> bytes:
        if not group:
            return b"".join(self._pieces[i] for i in nodes)  # type: ignore[misc]
        entry = _attr_entry("pg_name", string_val=group)
        return b"".join(
            _framed(self._pieces[i] + entry) if self.graph.nodes[i].kind == K_COLL else self._pieces[i]  # type: ignore[operator]
            for i in nodes
        )


@lru_cache(maxsize=1 << 16)
def _endpoint(name: str, rank: int) -> bytes:
    return _attr_entry(name, int32_val=rank)
