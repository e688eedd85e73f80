"""Decode one rank's Chakra trace into flat lists the engine indexes by integer.

A Chakra file is a GlobalMetadata record followed by length-delimited Node records. Parsing them one
`Node.ParseFromString` at a time costs about three times more than parsing the whole file as a single
`repeated Node` field, so we re-frame the records (prefix each with the field-1 tag byte) and parse
them once with a wrapper message type declared in a private descriptor pool. The wire format is
untouched: this is exactly the data `chakra_io.read_trace` reads, only faster for 1024 files.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError

from astra_hetero import chakra_io
from astra_hetero.chakra_io import pb
from astra_hetero.errors import RunDirError

KIND_COMP, KIND_COLL, KIND_SEND, KIND_RECV = 0, 1, 2, 3
_KINDS = {pb.COMP_NODE: KIND_COMP, pb.COMM_COLL_NODE: KIND_COLL, pb.COMM_SEND_NODE: KIND_SEND,
          pb.COMM_RECV_NODE: KIND_RECV}
_FIELD1_TAG = b"\x0a"  # field number 1, wire type 2 (length-delimited)


@dataclass(frozen=True)
class RankTrace:
    """One rank's nodes in file order; `deps[i]` are indices (not Chakra ids) of i's predecessors."""

    path: str
    ids: list[int]
    names: list[str]
    kinds: list[int]
    durations_ns: list[int]
    sizes: list[int]
    coll_types: list[int]  # Chakra CollectiveCommType for collectives, -1 otherwise
    peers: list[int]  # send: destination rank, recv: source rank, -1 otherwise
    tags: list[int]
    groups: list[str]  # pg_name of collectives ("" = all ranks)
    deps: list[tuple[int, ...]]

    def __len__(self) -> int:
        return len(self.ids)

    def packed(self) -> tuple[Any, ...]:
        """A form that crosses a process boundary cheaply: int lists as raw int64 bytes, names and
        groups as one NUL-joined string, dependencies as counts plus one flat array."""
        flat = [d for deps in self.deps for d in deps]
        ints = (self.ids, self.kinds, self.durations_ns, self.sizes, self.coll_types, self.peers, self.tags,
                [len(deps) for deps in self.deps], flat)
        return (self.path, "\0".join(self.names), "\0".join(self.groups),
                *(array("q", values).tobytes() for values in ints))

    @classmethod
    def unpacked(cls, data: tuple[Any, ...]) -> RankTrace:
        path, names, groups, *blobs = data
        ids, kinds, durations, sizes, coll_types, peers, tags, counts, flat = (
            array("q", blob).tolist() for blob in blobs)
        deps: list[tuple[int, ...]] = []
        position = 0
        for count in counts:
            deps.append(tuple(flat[position:position + count]) if count else ())
            position += count
        return cls(path, ids, names.split("\0") if ids else [], kinds, durations, sizes, coll_types, peers,
                   tags, groups.split("\0") if ids else [], deps)


@lru_cache(maxsize=1)
def _node_list_class() -> Any:
    """`NodeList {repeated LiteNode nodes = 1}`: LiteNode is Chakra's Node with `attr` kept as raw bytes.

    Reading attributes through protobuf objects costs microseconds each; kept as bytes, a node's
    attribute list becomes a hashable key, and the few distinct lists of a trace (every TP all-reduce
    of a rank carries the same ones) are decoded once (`_attr_values`).
    """
    lite = descriptor_pb2.DescriptorProto()
    pb.Node.DESCRIPTOR.CopyToProto(lite)
    lite.name = "LiteNode"
    kept = [f for f in lite.field if f.name not in ("inputs", "outputs")]
    del lite.field[:]
    for field in kept:
        if field.name == "attr":
            field.type = descriptor_pb2.FieldDescriptorProto.TYPE_BYTES
            field.ClearField("type_name")
        elif field.name == "type":
            field.type = descriptor_pb2.FieldDescriptorProto.TYPE_INT32  # same varint on the wire
            field.ClearField("type_name")
        lite.field.add().CopyFrom(field)
    wrapper = descriptor_pb2.FileDescriptorProto(name="astra_hetero_node_list.proto", package="astra_hetero",
                                                 syntax="proto3")
    wrapper.message_type.add().CopyFrom(lite)
    node_list = wrapper.message_type.add(name="NodeList")
    node_list.field.add(name="nodes", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE,
                        label=descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED,
                        type_name=".astra_hetero.LiteNode")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(wrapper)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("astra_hetero.NodeList"))


def _parse_nodes(path: Path) -> list[Any]:
    if not path.is_file():
        raise RunDirError(f"{path}: trace file missing")
    records = chakra_io.iter_records(path.read_bytes(), str(path))
    first = next(records, None)
    if first is None:
        raise RunDirError(f"{path}: empty trace (no GlobalMetadata record)")
    try:
        pb.GlobalMetadata().ParseFromString(first)
    except DecodeError as exc:
        raise RunDirError(f"{path}: first record is not GlobalMetadata ({exc})") from None
    parts: list[bytes] = []
    for record in records:
        parts.append(_FIELD1_TAG)
        parts.append(_varint(len(record)))
        parts.append(record)
    node_list = _node_list_class()()
    try:
        node_list.ParseFromString(b"".join(parts))
    except DecodeError as exc:
        raise RunDirError(f"{path}: a record is not a Chakra node ({exc})") from None
    return list(node_list.nodes)


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _attr_values(raw: tuple[bytes, ...], cache: dict[tuple[bytes, ...], dict[str, Any]]) -> dict[str, Any]:
    values = cache.get(raw)
    if values is None:
        values = {}
        for blob in raw:
            attr = pb.AttributeProto.FromString(blob)
            kind = attr.WhichOneof("value")
            if kind is not None:
                values[attr.name] = getattr(attr, kind)
        cache[raw] = values
    return values


def _require(values: dict[str, Any], key: str, path: Path, node: Any) -> int:
    if key not in values:
        raise RunDirError(f"{path}: node {node.id} ({node.name!r}) lacks required attribute {key!r}")
    return int(values[key])


def read_packed_rank_trace(path: Path, num_ranks: int) -> tuple[Any, ...]:
    """`read_rank_trace(...).packed()`, for worker processes."""
    return read_rank_trace(path, num_ranks).packed()


def read_rank_trace(path: Path, num_ranks: int) -> RankTrace:
    """Decode `path`; raise RunDirError naming the file and node for anything the engine cannot run.

    Dependencies keep duplicates (a node listing the same predecessor as data and control dependency
    counts it twice and is released twice), which is consistent and saves deduplicating a million lists.
    """
    nodes = _parse_nodes(path)
    n = len(nodes)
    ids, names = [0] * n, [""] * n
    kinds, durations, sizes = [0] * n, [0] * n, [0] * n
    coll_types, peers, tags, groups = [-1] * n, [-1] * n, [0] * n, [""] * n
    deps: list[tuple[int, ...]] = [()] * n
    attr_cache: dict[tuple[bytes, ...], dict[str, Any]] = {}
    kind_of = _KINDS
    for i, node in enumerate(nodes):
        ids[i] = node.id
        names[i] = node.name
        kind = kind_of.get(node.type)
        if kind is None:
            _unsupported(path, node)
        kinds[i] = kind
        ctrl = node.ctrl_deps
        deps[i] = tuple(node.data_deps) + tuple(ctrl) if ctrl else tuple(node.data_deps)
        if kind == KIND_COMP:
            durations[i] = node.duration_micros * 1000
            continue
        values = _attr_values(tuple(node.attr), attr_cache)
        sizes[i] = _require(values, "comm_size", path, node)
        if kind == KIND_COLL:
            coll_types[i] = _require(values, "comm_type", path, node)
            groups[i] = str(values.get("pg_name", ""))
            continue
        peers[i] = _peer(values, kind, num_ranks, path, node)
        tags[i] = _require(values, "comm_tag", path, node)
    _resolve_deps(path, ids, names, deps)
    return RankTrace(str(path), ids, names, kinds, durations, sizes, coll_types, peers, tags, groups, deps)


def _unsupported(path: Path, node: Any) -> None:
    type_name = pb.NodeType.Name(node.type) if node.type in pb.NodeType.values() else node.type
    raise RunDirError(f"{path}: node {node.id} ({node.name!r}) has unsupported type {type_name}; "
                      "the embedded engine runs COMP, COMM_COLL, COMM_SEND and COMM_RECV nodes")


def _peer(values: dict[str, Any], kind: int, num_ranks: int, path: Path, node: Any) -> int:
    key = "comm_dst" if kind == KIND_SEND else "comm_src"
    peer = _require(values, key, path, node)
    if not 0 <= peer < num_ranks:
        raise RunDirError(f"{path}: node {node.id} ({node.name!r}) {key}={peer} is not a rank "
                          f"(0..{num_ranks - 1})")
    return peer


def _resolve_deps(path: Path, ids: list[int], names: list[str], deps: list[tuple[int, ...]]) -> None:
    """Turn dependency ids into indices in place (a no-op when ids are 0..n-1 in file order)."""
    n = len(ids)
    index = {node_id: i for i, node_id in enumerate(ids)}
    if len(index) != n:
        raise RunDirError(f"{path}: duplicate node ids")
    identity = ids == list(range(n))
    for i, node_deps in enumerate(deps):
        if not node_deps:
            continue
        if identity and 0 <= min(node_deps) and max(node_deps) < n:
            continue
        missing = [d for d in node_deps if d not in index]
        if missing:
            raise RunDirError(f"{path}: node {ids[i]} ({names[i]!r}) depends on unknown node id {missing[0]}")
        deps[i] = tuple(index[d] for d in node_deps)
