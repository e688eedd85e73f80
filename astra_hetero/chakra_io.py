"""Chakra execution traces on disk, through MLCommons' schema (`mlc-chakra`).

A trace file is length-delimited protobuf: a `GlobalMetadata` message first, then `Node` messages.
We use the schema's generated classes and do the varint framing ourselves, which is the same format
as `protolib.encodeMessage` / `decodeMessage` (and far faster for hundreds of thousands of nodes).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from google.protobuf.internal.decoder import _DecodeVarint32  # type: ignore[attr-defined]
from google.protobuf.internal.encoder import _VarintBytes  # type: ignore[attr-defined]
from google.protobuf.message import DecodeError

from astra_hetero.errors import AstraHeteroError, RunDirError

try:
    from chakra.schema.protobuf import et_def_pb2 as pb
except ImportError as exc:  # pragma: no cover - exercised only on a broken install
    raise AstraHeteroError(
        "the Chakra schema is not installed: run `pip install --no-deps mlc-chakra==1.0.0` "
        "(see README, Dependencies)"
    ) from exc

SCHEMA_VERSION = "0.0.4"

COMP = pb.COMP_NODE
COLL = pb.COMM_COLL_NODE
SEND = pb.COMM_SEND_NODE
RECV = pb.COMM_RECV_NODE

COLLECTIVE_TYPES: dict[str, int] = {
    "all_reduce": pb.ALL_REDUCE,
    "all_gather": pb.ALL_GATHER,
    "reduce_scatter": pb.REDUCE_SCATTER,
    "all_to_all": pb.ALL_TO_ALL,
    "broadcast": pb.BROADCAST,
    "reduce": pb.REDUCE,
    "barrier": pb.BARRIER,
}
COLLECTIVE_NAMES: dict[int, str] = {v: k for k, v in COLLECTIVE_TYPES.items()}


def collective_type(name: str) -> int:
    try:
        return COLLECTIVE_TYPES[name]
    except KeyError:
        raise ValueError(f"unknown collective {name!r}; known: {', '.join(COLLECTIVE_TYPES)}") from None


def frame(message: Any) -> bytes:
    """One length-delimited record."""
    return frame_bytes(message.SerializeToString())


def frame_bytes(body: bytes) -> bytes:
    """A record read by `iter_records`, framed again as it was."""
    return _VarintBytes(len(body)) + body


def metadata_record(version: str = SCHEMA_VERSION) -> bytes:
    return frame(pb.GlobalMetadata(version=version))


def write_trace(path: Path, records: Iterable[bytes]) -> None:
    """Write pre-framed records (metadata first) to `path`."""
    with open(path, "wb") as handle:
        for record in records:
            handle.write(record)


def iter_records(data: bytes, source: str = "<bytes>") -> Iterator[bytes]:
    position, end = 0, len(data)
    while position < end:
        try:
            size, position = _DecodeVarint32(data, position)
        except (IndexError, DecodeError):
            raise RunDirError(f"{source}: truncated record header at byte {position}") from None
        if position + size > end:
            raise RunDirError(f"{source}: truncated record at byte {position} (needs {size} bytes)")
        yield data[position : position + size]
        position += size
