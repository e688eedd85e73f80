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
from pathlib import Path

import numpy as np
from google.protobuf.internal.encoder import _VarintBytes  # type: ignore[attr-defined]

from astra_hetero.backends.embedded.tracefile import KIND_COLL, KIND_COMP, KIND_SEND, DecodedTrace

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
    """Spans sorted by start. `used[i]`: the span holds its node's group (a string, `slot[i]` = the
    node's position among the collective nodes) or peer (a varint, `slot[i]` = its position among the
    send/recv nodes); other spans (a send's own `comm_src`, say) may differ but are not read."""

    start: np.ndarray
    length: np.ndarray
    is_string: np.ndarray
    used: np.ndarray
    slot: np.ndarray

    @property
    def total(self) -> int:
        """Bytes inside spans: a file differing in more bytes cannot be a twin."""
        return int(self.length.sum())


@dataclass(frozen=True)
class TwinValues:
    """A rank's groups (per collective node, in node order) and peers (per send/recv node)."""

    group_names: list[str]
    peers: np.ndarray


def value_spans(decoded: DecodedTrace) -> ValueSpans | None:
    """The spans of every communication node's variable values; None if some record is not laid out
    canonically (then twins of this file are compared by decoding them)."""
    if not decoded.canonical:
        return None
    trace, ends = decoded.trace, decoded.record_ends
    slot_of = np.zeros(len(trace), dtype=np.int64)
    for nodes in (np.flatnonzero(trace.kinds == KIND_COLL), np.flatnonzero(trace.kinds > KIND_COLL)):
        slot_of[nodes] = np.arange(len(nodes))
    slots = slot_of.tolist()
    layouts: dict[tuple[bytes, ...], list[tuple[int, int, bool, bytes]] | None] = {}
    columns: list[list[int]] = [[], [], [], [], []]  # start, length, is_string, used, slot
    for i in np.flatnonzero(trace.kinds != KIND_COMP).tolist():
        raw = decoded.attrs[i]
        layout = layouts.get(raw, False)
        if layout is False:
            layout = layouts[raw] = _suffix_layout(raw)
        if layout is None:
            return None
        kind = int(trace.kinds[i])
        wanted = _USED.get(kind, _USED_RECV)
        slot = slots[i]
        end = int(ends[i])
        for from_end, length, is_string, name in layout:
            if (name == b"pg_name") != is_string:
                continue  # an integer pg_name or a string endpoint: compared as fixed bytes
            for column, value in zip(
                columns, (end - from_end, length, is_string, name == wanted, slot), strict=True
            ):
                column.append(value)
    order = np.argsort(np.array(columns[0], dtype=np.int64), kind="stable")
    start, length, is_string, used, slot = (np.array(c, dtype=np.int64)[order] for c in columns)
    return ValueSpans(start, length, is_string.astype(bool), used.astype(bool), slot)


def _suffix_layout(raw: tuple[bytes, ...]) -> list[tuple[int, int, bool, bytes]] | None:
    """(offset from the record end, length, is_string, name) of each variable value in a canonical
    record, whose tail is its attribute entries; None if one is not `name` then one value field."""
    entries = [_ATTR_TAG + _VarintBytes(len(blob)) for blob in raw]
    total = sum(len(e) + len(b) for e, b in zip(entries, raw, strict=True))
    layout: list[tuple[int, int, bool, bytes]] = []
    offset = 0
    for header, blob in zip(entries, raw, strict=True):
        offset += len(header)
        parsed = _blob_value(blob)
        if parsed is None:
            return None
        name, value_start, is_string = parsed
        if name in _VARIABLE:
            layout.append((total - offset - value_start, len(blob) - value_start, is_string, name))
        offset += len(blob)
    return layout


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


def read_twin(
    path: Path, reference: np.ndarray, spans: ValueSpans, base: TwinValues, num_ranks: int
) -> TwinValues | tuple[int, int]:
    """The values of the rank whose file is `path`, if it equals `reference` (the decoded file's
    bytes) outside `spans` with every varint keeping its length. Otherwise (the first offending
    position, the byte there): files that fail alike are probably twins of each other."""
    data = np.fromfile(path, dtype=np.uint8)
    if len(data) != len(reference):
        return (-1, 0)
    diff = np.flatnonzero(data != reference)
    if not len(diff):
        return base
    if len(diff) > spans.total:
        outside = diff  # more bytes differ than all spans hold
    else:
        span = np.searchsorted(spans.start, diff, side="right") - 1
        inside = np.maximum(span, 0)
        outside = diff[(span < 0) | (diff >= spans.start[inside] + spans.length[inside])]
        if not len(outside):
            in_varint = ~spans.is_string[span]
            grown = (data[diff[in_varint]] ^ reference[diff[in_varint]]) & 0x80
            outside = diff[in_varint][grown != 0]  # a varint changed length: records parse differently
    if len(outside):
        position = _first_outside(outside[:64], spans)
        return (position, int(data[position]))
    changed = np.unique(span)
    changed = changed[spans.used[changed]]
    group_names, peers = base.group_names, base.peers
    strings = changed[spans.is_string[changed]]
    if len(strings):
        group_names = list(group_names)
        for text, slots in _strings(data, spans.start[strings], spans.length[strings], spans.slot[strings]):
            if text is None:
                position = int(spans.start[strings][0])
                return (position, int(data[position]))
            for slot in slots:
                group_names[slot] = text
    numeric = changed[~spans.is_string[changed]]
    if len(numeric):
        values = _decode_varints(data, spans.start[numeric], spans.length[numeric])
        bad = np.flatnonzero(values >= num_ranks)
        if len(bad):  # not a rank: decoding this file will name the node
            position = int(spans.start[numeric][bad[0]])
            return (position, int(data[position]))
        peers = peers.copy()
        peers[spans.slot[numeric]] = values
    return TwinValues(group_names, peers)


def _first_outside(positions: np.ndarray, spans: ValueSpans) -> int:
    """The first of `positions` outside every span (else the first of them)."""
    if not len(spans.start):
        return int(positions[0])
    span = np.searchsorted(spans.start, positions, side="right") - 1
    clear = (span < 0) | (positions >= spans.start[np.maximum(span, 0)] + spans.length[np.maximum(span, 0)])
    return int(positions[clear][0]) if clear.any() else int(positions[0])


def _strings(
    data: np.ndarray, starts: np.ndarray, lengths: np.ndarray, slots: np.ndarray
) -> list[tuple[str | None, list[int]]]:
    """The distinct strings in the spans (None where not UTF-8), each with the slots holding it; a
    rank's hundreds of collectives name a handful of groups, so each is decoded once."""
    found: dict[bytes, list[int]] = {}
    for length in np.unique(lengths).tolist():
        pick = lengths == length
        rows = data[starts[pick][:, None] + np.arange(length)[None, :]]
        keys, inverse = np.unique(rows.view(f"V{length}").ravel(), return_inverse=True)
        for key, where in zip(keys, _split_by(inverse, slots[pick]), strict=True):
            found.setdefault(key.tobytes(), []).extend(where)
    out: list[tuple[str | None, list[int]]] = []
    for raw, where in found.items():
        try:
            out.append((raw.decode("utf-8"), where))
        except UnicodeDecodeError:
            out.append((None, where))
    return out


def _split_by(inverse: np.ndarray, slots: np.ndarray) -> list[list[int]]:
    order = np.argsort(inverse, kind="stable")
    bounds = np.flatnonzero(np.diff(inverse[order])) + 1
    return [part.tolist() for part in np.split(slots[order], bounds)]


def _decode_varints(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    widest = int(lengths.max())
    offsets = np.arange(widest)
    index = starts[:, None] + offsets[None, :]
    valid = offsets[None, :] < lengths[:, None]
    groups = np.where(valid, data[np.minimum(index, len(data) - 1)].astype(np.uint64) & 0x7F, 0)
    return (groups << (7 * offsets).astype(np.uint64)[None, :]).sum(axis=1).astype(np.int64)
