"""Where the rank-specific values of a decoded trace sit in its file, and reading them from a twin file.

Two ranks of a symmetric job write traces that differ only in who they talk to: the `pg_name` of
their collectives and the `comm_src`/`comm_dst` of their sends and receives. Given a decoded trace
(`DecodedTrace`), `value_spans` finds the exact bytes of those values; `read_twin` then compares
another rank's file with it byte for byte and, when every difference falls inside those spans (and
keeps each varint's length), returns the other rank's values without decoding its file.

That is exact, not a heuristic: spans are only taken from records whose attributes are serialized
in canonical order (checked byte for byte), so a byte inside a span *is* that attribute's value, and
two files equal outside their value spans parse to the same nodes except for those values.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from google.protobuf.internal.encoder import _VarintBytes  # type: ignore[attr-defined]

from astra_hetero.backends.embedded.trace.records import (
    KIND_COLL,
    KIND_COMP,
    KIND_SEND,
    DecodedTrace,
    RankTrace,
)

_ATTR_TAG = b"\x52"  # Node.attr: field 10, length-delimited
# AttributeProto value fields read as rank-specific: varints (int32/int64/uint32/uint64) and strings.
_VARINT_FIELDS = {7, 9, 11, 13}
_STRING_FIELD = 29
# A node's rank-specific attributes: its group (collectives) or its peer (sends: dst, recvs: src).
_USED = {KIND_COLL: b"pg_name", KIND_SEND: b"comm_dst"}
_USED_RECV = b"comm_src"
_VARIABLE = (b"pg_name", b"comm_src", b"comm_dst")


@dataclass(frozen=True)
class ValueSpans:
    """Spans sorted by start. `role[i]` >= 0: the span holds its node's group (a string) or peer (a
    varint), and `role[i]` is that group's or peer's index in the rank's list of groups or peers
    (first use first); -1: a value that may differ but is not read (a send's own `comm_src`)."""

    start: np.ndarray
    length: np.ndarray
    is_string: np.ndarray
    role: np.ndarray
    total: int  # bytes inside spans: a file differing in more bytes cannot be a twin
    role_sizes: dict[int, int]  # role key (2·role + is_string) -> how many spans hold it

    @staticmethod
    def of(start: np.ndarray, length: np.ndarray, is_string: np.ndarray, role: np.ndarray) -> ValueSpans:
        keys = (2 * role + is_string)[role >= 0].tolist()
        sizes: dict[int, int] = {}
        for key in keys:
            sizes[key] = sizes.get(key, 0) + 1
        return ValueSpans(start, length, is_string, role, int(length.sum()), sizes)


@dataclass(frozen=True)
class RankValues:
    """Whom a rank's trace names: its groups and its peers, each in order of first use."""

    groups: tuple[str, ...]
    peers: tuple[int, ...]


def rank_values(trace: RankTrace) -> tuple[RankValues, tuple[int, ...], tuple[int, ...]]:
    """A decoded trace's groups and peers, and which of them each collective / send-recv names."""
    names = [trace.group_names[k] for k in trace.groups[trace.kinds == KIND_COLL].tolist()]
    groups, group_pattern = _first_use(names)
    peers, peer_pattern = _first_use(trace.peers[trace.kinds > KIND_COLL].tolist())
    return RankValues(groups, peers), group_pattern, peer_pattern


def _first_use(values: list) -> tuple[tuple, tuple[int, ...]]:
    index = {value: i for i, value in enumerate(dict.fromkeys(values))}
    return tuple(index), tuple(index[v] for v in values)


def value_spans(
    decoded: DecodedTrace, group_pattern: tuple[int, ...], peer_pattern: tuple[int, ...]
) -> ValueSpans | None:
    """The spans of every communication node's variable values; None if the file is not laid out
    canonically (then twins of this file are compared by decoding them)."""
    if not decoded.canonical:
        return None
    trace, ends = decoded.trace, decoded.record_ends
    role_of = np.full(len(trace), -1, dtype=np.int64)
    role_of[trace.kinds == KIND_COLL] = group_pattern
    role_of[trace.kinds > KIND_COLL] = peer_pattern
    alike: dict[tuple[int, tuple[bytes, ...]], list[int]] = {}  # nodes laid out alike
    kinds = trace.kinds.tolist()
    for i in np.flatnonzero(trace.kinds != KIND_COMP).tolist():
        alike.setdefault((kinds[i], decoded.attrs[i]), []).append(i)
    starts: list[int] = []
    lengths: list[int] = []
    strings: list[bool] = []
    roles: list[int] = []
    end_at, role_at = ends.tolist(), role_of.tolist()
    for (kind, raw), nodes in alike.items():
        layout = _suffix_layout(raw)
        if layout is None:
            return None
        wanted = _USED.get(kind, _USED_RECV)
        for from_end, length, is_string, name in layout:
            if (name == b"pg_name") != is_string:
                continue  # an integer pg_name or a string endpoint: compared as fixed bytes
            starts.extend(end_at[i] - from_end for i in nodes)
            lengths.extend([length] * len(nodes))
            strings.extend([is_string] * len(nodes))
            roles.extend(role_at[i] for i in nodes) if name == wanted else roles.extend([-1] * len(nodes))
    start = np.array(starts, dtype=np.int64)
    order = np.argsort(start, kind="stable")
    return ValueSpans.of(
        start[order],
        np.array(lengths, dtype=np.int64)[order],
        np.array(strings, dtype=bool)[order],
        np.array(roles, dtype=np.int64)[order],
    )


def _suffix_layout(raw: tuple[bytes, ...]) -> list[tuple[int, int, bool, bytes]] | None:
    """(offset from the record end, length, is_string, name) of each variable value in a canonical
    record, whose tail is its attribute entries; None if one is not `name` then one value field."""
    sizes = [len(blob) for blob in raw]
    total = sum(sizes) + sum(_entry_header(size) for size in sizes)
    layout: list[tuple[int, int, bool, bytes]] = []
    offset = 0
    for size, blob in zip(sizes, raw, strict=True):
        offset += _entry_header(size)
        parsed = _cached_blob_value(blob)
        if parsed is None:
            return None
        name, value_start, is_string = parsed
        if name in _VARIABLE:
            layout.append((total - offset - value_start, len(blob) - value_start, is_string, name))
        offset += size
    return layout


def _entry_header(size: int) -> int:
    """Bytes before an attribute's blob in its entry: the field tag and the varint of `size`."""
    return 1 + (1 if size < 0x80 else len(_VarintBytes(size)))


@lru_cache(maxsize=1 << 14)
def _cached_blob_value(blob: bytes) -> tuple[bytes, int, bool] | None:
    return _blob_value(blob)  # a trace repeats few distinct attributes (tags aside)


def _blob_value(blob: bytes) -> tuple[bytes, int, bool] | None:
    """(attribute name, where its value's payload starts, whether it is a string) for a canonical
    AttributeProto: field 1 (name), then a single value field that runs to the end of the blob."""
    if len(blob) < 2 or blob[0] != 0x0A or blob[1] >= 0x80:
        return None
    name_end = 2 + blob[1]
    name = blob[2:name_end]
    tag, position = _varint(blob, name_end)
    if tag is None:
        return None
    field, wire = tag >> 3, tag & 7
    if wire == 0 and field in _VARINT_FIELDS:
        value, end = _varint(blob, position)
        return (name, position, False) if value is not None and end == len(blob) else None
    if wire == 2 and field == _STRING_FIELD:
        size, start = _varint(blob, position)
        return (name, start, True) if size is not None and start + size == len(blob) else None
    return None if name in _VARIABLE else (name, len(blob), False)


def _varint(data: bytes, position: int) -> tuple[int | None, int]:
    value, shift = 0, 0
    while position < len(data) and shift < 70:
        byte = data[position]
        value |= (byte & 0x7F) << shift
        position += 1
        if byte < 0x80:
            return value, position
        shift += 7
    return None, position


_PROBE = 4096  # bytes compared first: files of another shape usually differ early


def twin_values(
    data: np.ndarray, reference: np.ndarray, spans: ValueSpans, base: RankValues, num_ranks: int
) -> RankValues | None:
    """The values of the rank whose file holds `data`, if it equals `reference` (the decoded file's
    bytes) outside `spans`, keeps every varint's length, and names one group (peer) wherever the
    decoded file names one group (peer), distinct ones where it names distinct ones; else None."""
    if len(data) != len(reference):
        return None
    probe = np.flatnonzero(data[:_PROBE] != reference[:_PROBE])
    if len(probe) > spans.total or _outside(probe, spans, data, reference).any():
        return None
    diff = _differing(data, reference)
    if not len(diff):
        return base
    if len(diff) > spans.total or _outside(diff, spans, data, reference).any():
        return None
    hit = np.zeros(len(spans.start), dtype=bool)
    hit[np.searchsorted(spans.start, diff, side="right") - 1] = True
    changed = np.flatnonzero(hit & (spans.role >= 0))
    groups, peers = list(base.groups), list(base.peers)
    keys = 2 * spans.role[changed] + spans.is_string[changed]
    distinct = set(keys.tolist())
    for key in distinct:
        where = changed[keys == key] if len(distinct) > 1 else changed
        if len(where) != spans.role_sizes[key]:
            return None  # names one group (peer) where the decoded file names several
        length = int(spans.length[where[0]])
        rows = data[spans.start[where][:, None] + np.arange(length)[None, :]]
        if (rows != rows[0]).any():
            return None
        role, is_string = divmod(key, 2)
        value = _text(rows[0]) if is_string else _rank_number(rows[0], num_ranks)
        if value is None:
            return None
        (groups if is_string else peers)[role] = value
    if len(set(groups)) != len(groups) or len(set(peers)) != len(peers):
        return None  # two roles now name one group or peer: another pattern
    return RankValues(tuple(groups), tuple(peers))


def _differing(data: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Positions where two equally long byte arrays differ, compared eight bytes at a time."""
    whole = len(data) - len(data) % 8
    words = np.flatnonzero(data[:whole].view(np.uint64) != reference[:whole].view(np.uint64))
    if len(words):
        candidates = (words[:, None] * 8 + np.arange(8)[None, :]).ravel()
        words = candidates[data[candidates] != reference[candidates]]
    tail = whole + np.flatnonzero(data[whole:] != reference[whole:])
    return np.concatenate((words, tail)) if len(tail) else words


def _outside(diff: np.ndarray, spans: ValueSpans, data: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Which differing positions lie outside every span or change a varint's length."""
    if not len(spans.start):
        return np.ones(len(diff), dtype=bool)
    span = np.searchsorted(spans.start, diff, side="right") - 1
    inside = np.maximum(span, 0)
    outside = (span < 0) | (diff >= spans.start[inside] + spans.length[inside])
    varint = ~spans.is_string[inside]
    return outside | (varint & (((data[diff] ^ reference[diff]) & 0x80) != 0))


def _text(row: np.ndarray) -> str | None:
    try:
        return row.tobytes().decode("utf-8")
    except UnicodeDecodeError:
        return None


def _rank_number(row: np.ndarray, num_ranks: int) -> int | None:
    value = 0
    for shift, byte in enumerate(row.tolist()):
        value |= (byte & 0x7F) << (7 * shift)
    return value if value < num_ranks else None
