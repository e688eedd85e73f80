"""Decode one rank's Chakra trace into numpy columns the workload indexes by integer.

A Chakra file is a GlobalMetadata record followed by length-delimited Node records. Parsing them one
`Node.ParseFromString` at a time costs about three times more than parsing the whole file as a single
`repeated Node` field, so we re-frame the records (prefix each with the field-1 tag byte) and parse
them once with a wrapper message type declared in a private descriptor pool. The wire format is
untouched: this is exactly the data Chakra's own reader sees, only faster for 1024 files.

The columns are numpy arrays and one bytes blob of names, so a trace decoded in a worker process
crosses back to the parent as a few raw buffers rather than millions of Python objects.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.internal.decoder import _DecodeVarint32 as _decode_varint  # type: ignore[attr-defined]
from google.protobuf.message import DecodeError

from astra_hetero import chakra_io
from astra_hetero.backends.embedded.trace.deps import packed_deps_of, resolve_deps, typed_deps_of
from astra_hetero.backends.embedded.trace.records import (
    KIND_COLL,
    KIND_COMP,
    KIND_RECV,
    KIND_SEND,
    DecodedTrace,
    RankTrace,
)
from astra_hetero.chakra_io import pb
from astra_hetero.errors import RunDirError

# Bounds on what one node may ask for. Beyond them a value is corrupt rather than large: a compute node
# of 2^40 µs (12.7 days) or a transfer of 2^53 bytes (8 PiB, where float byte counts stop being exact)
# would make an iteration time meaningless, and int64 nanoseconds would overflow soon after.
MAX_DURATION_US = 1 << 40
MAX_COMM_BYTES = 1 << 53
_INT64_MAX = (1 << 63) - 1
_KINDS = {
    pb.COMP_NODE: KIND_COMP,
    pb.COMM_COLL_NODE: KIND_COLL,
    pb.COMM_SEND_NODE: KIND_SEND,
    pb.COMM_RECV_NODE: KIND_RECV,
}
_FIELD1_TAG = b"\x0a"  # field number 1, wire type 2 (length-delimited)
# Node fields LiteNode reads as raw bytes: names stay undecoded until someone shows them, dependency
# lists stay packed varints (decoded for the whole file at once), inputs/outputs are never read.
_RAW_FIELDS = ("name", "ctrl_deps", "data_deps", "inputs", "outputs")


@lru_cache(maxsize=2)
def _node_list_class(packed_deps: bool = True) -> Any:
    """`NodeList {repeated LiteNode nodes = 1}`: LiteNode is Chakra's Node with `attr` and `_RAW_FIELDS`
    kept as raw bytes (a packed repeated field is one length-delimited field on the wire, like bytes).

    Reading attributes through protobuf objects costs microseconds each; kept as bytes, a node's
    attribute list becomes a hashable key, and the few distinct lists of a trace (every TP all-reduce
    of a rank carries the same ones) are decoded once (`_attr_values`).
    """
    lite = descriptor_pb2.DescriptorProto()
    pb.Node.DESCRIPTOR.CopyToProto(lite)
    lite.name = "LiteNode"
    kept = list(lite.field)
    del lite.field[:]
    for field in kept:
        if field.name in _RAW_FIELDS and (packed_deps or not field.name.endswith("_deps")):
            field.type = descriptor_pb2.FieldDescriptorProto.TYPE_BYTES
            field.label = descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL
            field.ClearField("type_name")
            field.ClearField("options")
        elif field.name == "attr":
            field.type = descriptor_pb2.FieldDescriptorProto.TYPE_BYTES
            field.ClearField("type_name")
        elif field.name == "type":
            field.type = descriptor_pb2.FieldDescriptorProto.TYPE_INT32  # same varint on the wire
            field.ClearField("type_name")
        lite.field.add().CopyFrom(field)
    package = "astra_hetero" if packed_deps else "astra_hetero_typed_deps"
    wrapper = descriptor_pb2.FileDescriptorProto(
        name=f"{package}_node_list.proto", package=package, syntax="proto3"
    )
    wrapper.message_type.add().CopyFrom(lite)
    node_list = wrapper.message_type.add(name="NodeList")
    node_list.field.add(
        name="nodes",
        number=1,
        type=descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE,
        label=descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED,
        type_name=f".{package}.LiteNode",
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(wrapper)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{package}.NodeList"))


def read_trace_bytes(path: Path) -> bytes:
    if not path.is_file():
        raise RunDirError(f"{path}: trace file missing")
    try:
        return path.read_bytes()
    except OSError as exc:
        raise RunDirError(f"{path}: cannot be read ({exc.strerror or exc})") from None


def _parse_nodes(path: Path, data: bytes | None = None) -> tuple[list[Any], bool, list[int], bytes, bool]:
    """The file's nodes, whether their dependency lists are raw packed bytes (the usual case), where
    each node's record ends in the file, the file's bytes (`data`, if the caller read them), and
    whether every record is its node's canonical serialization (fields in number order)."""
    if data is None:
        data = read_trace_bytes(path)
    records = chakra_io.iter_records(data, str(path))
    first = next(records, None)
    if first is None:
        raise RunDirError(f"{path}: empty trace (no GlobalMetadata record)")
    try:
        pb.GlobalMetadata().ParseFromString(first)
    except DecodeError as exc:
        raise RunDirError(f"{path}: first record is not GlobalMetadata ({exc})") from None
    payload, record_ends = _reframed(path, data, _record_end(path, data, 0))
    node_list = _parse_payload(path, payload, packed_deps=True)
    # A field LiteNode does not know, or dependencies written unpacked (which proto3 parsers must
    # accept), land in the unknown fields; then read the file again with typed dependency lists.
    node_list.DiscardUnknownFields()
    if node_list.ByteSize() == len(payload):
        canonical = node_list.SerializeToString() == payload  # one C call checks every record
        return list(node_list.nodes), True, record_ends, data, canonical
    return list(_parse_payload(path, payload, packed_deps=False).nodes), False, record_ends, data, False


def _parse_payload(path: Path, payload: bytes, packed_deps: bool) -> Any:
    node_list = _node_list_class(packed_deps)()
    try:
        node_list.ParseFromString(payload)
    except DecodeError as exc:
        raise RunDirError(f"{path}: a record is not a Chakra node ({exc})") from None
    return node_list


def _record_end(path: Path, data: bytes, position: int) -> int:
    """Where the length-prefixed record starting at `position` ends."""
    size = data[position]
    if size < 0x80:  # a one-byte length, as for most nodes: skip the general decoder
        position += 1
    else:
        try:
            size, position = _decode_varint(data, position)
        except (IndexError, DecodeError):
            raise RunDirError(f"{path}: truncated record header at byte {position}") from None
    if position + size > len(data):
        raise RunDirError(f"{path}: truncated record at byte {position} (needs {size} bytes)")
    return position + size


def _reframed(path: Path, data: bytes, start: int) -> tuple[bytes, list[int]]:
    """The node records from `start` on as one `NodeList` (each record keeps its length prefix and
    gains the field-1 tag in front, so no record is decoded or copied twice), and their end offsets."""
    view = memoryview(data)
    records, ends = [], []
    position, end = start, len(data)
    append_record, append_end = records.append, ends.append
    while position < end:
        size = data[position]
        if size < 0x80:  # one-byte lengths, as for most nodes, decoded here; the rest in general
            following = position + 1 + size
        elif position + 1 < end and data[position + 1] < 0x80:
            following = position + 2 + ((size & 0x7F) | data[position + 1] << 7)
        else:
            following = _record_end(path, data, position)
        if following > end:
            _record_end(path, data, position)  # raises, naming the truncated record
        append_record(view[position:following])
        append_end(following)
        position = following
    return (_FIELD1_TAG + _FIELD1_TAG.join(records) if records else b""), ends


def _attr_values(
    raw: tuple[bytes, ...], cache: dict[tuple[bytes, ...], dict[str, Any]], path: Path, node: Any
) -> dict[str, Any]:
    values = cache.get(raw)
    if values is None:
        values = {}
        for blob in raw:
            try:
                attr = pb.AttributeProto.FromString(blob)
            except DecodeError as exc:
                raise RunDirError(f"{path}: {_label(node)} has a corrupt attribute ({exc})") from None
            kind = attr.WhichOneof("value")
            if kind is not None:
                values[attr.name] = getattr(attr, kind)
        cache[raw] = values
    return values


def _label(node: Any) -> str:
    return f"node {node.id} ({node.name.decode('utf-8', 'replace')!r})"


def _require(
    values: dict[str, Any], key: str, path: Path, node: Any, low: int = 0, high: int = _INT64_MAX
) -> int:
    """The integer attribute `key`, which must lie in [low, high] (an int, never a bool or a float)."""
    if key not in values:
        raise RunDirError(f"{path}: {_label(node)} lacks required attribute {key!r}")
    value = values[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise RunDirError(f"{path}: {_label(node)} attribute {key!r} must be an integer, not {value!r}")
    if not low <= value <= high:
        raise RunDirError(f"{path}: {_label(node)} attribute {key}={value} is outside {low}..{high}")
    return value


def read_rank_trace(path: Path, num_ranks: int) -> RankTrace:
    """Decode `path`; raise RunDirError naming the file and node for anything the engine cannot run.

    Dependencies keep duplicates (a node listing the same predecessor as data and control dependency
    counts it twice and is released twice), which is consistent and saves deduplicating a million lists.
    """
    return decode_rank_trace(path, num_ranks, keep_attrs=False).trace


def decode_rank_trace(
    path: Path, num_ranks: int, keep_attrs: bool = True, data: bytes | None = None
) -> DecodedTrace:
    """`read_rank_trace` that also returns the file layout (see DecodedTrace); `data`: the file's
    bytes if the caller has them."""
    nodes, packed_deps, record_ends, data, canonical = _parse_nodes(path, data)
    n = len(nodes)
    ids = np.array([node.id for node in nodes], dtype=np.uint64)
    names = [node.name for node in nodes]
    kinds = _kinds(path, nodes)
    durations = _durations_ns(path, nodes, kinds)
    sizes, tags = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
    coll_types, peers = np.full(n, -1, dtype=np.int64), np.full(n, -1, dtype=np.int64)
    groups = np.full(n, -1, dtype=np.int64)
    group_index: dict[str, int] = {}
    attr_cache: dict[tuple[bytes, ...], dict[str, Any]] = {}
    kind_of = kinds.tolist()
    attrs: list[tuple[bytes, ...]] = [()] * n if keep_attrs else []
    fields_of: dict[tuple[int, tuple[bytes, ...]], tuple[int, int, int, int, int]] = {}
    comm = np.flatnonzero(kinds != KIND_COMP).tolist()
    rows: list[tuple[int, int, int, int, int]] = []  # size, collective type, group, peer, tag
    for i in comm:
        node, kind = nodes[i], kind_of[i]
        raw = tuple(node.attr)
        if keep_attrs:
            attrs[i] = raw
        found = fields_of.get((kind, raw))
        if found is None:  # nodes with equal attributes (a layer's collectives) are read once
            values = _attr_values(raw, attr_cache, path, node)
            found = fields_of[(kind, raw)] = _comm_fields(values, kind, num_ranks, path, node, group_index)
        rows.append(found)
    if rows:
        table = np.array(rows, dtype=np.int64)
        for array, column in zip((sizes, coll_types, groups, peers, tags), table.T, strict=True):
            array[comm] = column
    dep_ends, deps = packed_deps_of(path, nodes) if packed_deps else typed_deps_of(nodes)
    name_ends = np.cumsum([len(name) for name in names], dtype=np.int64)
    trace = RankTrace(
        str(path),
        ids,
        b"".join(names),
        name_ends,
        kinds,
        durations,
        sizes,
        coll_types,
        peers,
        tags,
        tuple(group_index),
        groups,
        dep_ends,
        deps,
    )
    ends = np.array(record_ends, dtype=np.int64)
    if not keep_attrs:
        return DecodedTrace(resolve_deps(trace), b"", ends, [], False)
    return DecodedTrace(resolve_deps(trace), data, ends, attrs, canonical)


def _comm_fields(
    values: dict[str, Any], kind: int, num_ranks: int, path: Path, node: Any, group_index: dict[str, int]
) -> tuple[int, int, int, int, int]:
    """(size, collective type, group index, peer, tag) of a communication node, validated."""
    size = _require(values, "comm_size", path, node, high=MAX_COMM_BYTES)
    if kind == KIND_COLL:
        coll_type = _require(values, "comm_type", path, node)
        group = group_index.setdefault(str(values.get("pg_name", "")), len(group_index))
        return size, coll_type, group, -1, 0
    tag = _require(values, "comm_tag", path, node, low=-_INT64_MAX)
    return size, -1, -1, _peer(values, kind, num_ranks, path, node), tag


def _durations_ns(path: Path, nodes: list[Any], kinds: np.ndarray) -> np.ndarray:
    """Compute durations in ns (0 for other nodes, whose `duration_micros` the engine ignores)."""
    micros = np.array([node.duration_micros for node in nodes], dtype=np.uint64)
    micros[kinds != KIND_COMP] = 0
    too_long = np.flatnonzero(micros > MAX_DURATION_US)
    if len(too_long):
        node = nodes[int(too_long[0])]
        raise RunDirError(
            f"{path}: {_label(node)} duration_micros={node.duration_micros} exceeds the "
            f"{MAX_DURATION_US} µs a node may take"
        )
    return micros.astype(np.int64) * 1000


def _kinds(path: Path, nodes: list[Any]) -> np.ndarray:
    types = np.array([node.type for node in nodes], dtype=np.int64)
    kinds = np.zeros(len(nodes), dtype=np.int8)
    for node_type in np.unique(types).tolist():
        where = types == node_type
        if node_type not in _KINDS:
            _unsupported(path, nodes[int(np.argmax(where))])
        kinds[where] = _KINDS[node_type]
    return kinds


def _unsupported(path: Path, node: Any) -> None:
    type_name = pb.NodeType.Name(node.type) if node.type in pb.NodeType.values() else node.type
    raise RunDirError(
        f"{path}: {_label(node)} has unsupported type {type_name}; "
        "the embedded engine runs COMP, COMM_COLL, COMM_SEND and COMM_RECV nodes"
    )


def _peer(values: dict[str, Any], kind: int, num_ranks: int, path: Path, node: Any) -> int:
    key = "comm_dst" if kind == KIND_SEND else "comm_src"
    return _require(values, key, path, node, high=num_ranks - 1)
