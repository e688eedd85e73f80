"""Traces by class: one Chakra trace per class of ranks and a compact rank → class map.

The generator knows which ranks run the same trace up to whom they talk to. Instead of one file per
rank it writes, under `workload/`,

    classes/class.<k>.et   the trace of class k's representative (its first rank), byte for byte the
                           file `workload.<rep>.et` would be
    rank_classes.json      {"format", "num_ranks", "classes": [{"trace", "rank"}], "class_of": runs of
                           [class, count], "groups": per rank the pg_names its collectives use, first
                           use first, "peers": per rank the ranks its sends and recvs name, first use first}

Within a class every rank's groups and peers line up position by position with the representative's
(the generator splits classes whose values coincide differently), so a rank's own trace is the
representative's with each collective's pg_name, each send/recv's peer and its own rank replaced by
the values at the same positions: `RankTraceWriter` splices them into pre-serialized pieces, giving
exactly the bytes the per-rank generator writes. ASTRA-sim needs those per-rank files
(`materialize`); the embedded engine reads the classes directly.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from google.protobuf.internal.encoder import _VarintBytes  # type: ignore[attr-defined]

from astra_hetero import chakra_io, rundir
from astra_hetero.chakra_io import pb
from astra_hetero.errors import RunDirError

CLASS_MAP = "workload/rank_classes.json"
CLASS_DIR = "workload/classes"
CLASS_FORMAT = "astra-hetero/rank-classes@1"


def class_trace_name(k: int) -> str:
    return f"{CLASS_DIR}/class.{k}.et"


@dataclass(frozen=True)
class RankClassMap:
    """A run directory's classes: per class its trace (relative to the run directory) and its
    representative; per rank its class, groups and peers (first use first)."""

    traces: tuple[str, ...]
    reps: tuple[int, ...]
    class_of: tuple[int, ...]
    groups: tuple[tuple[str, ...], ...]
    peers: tuple[tuple[int, ...], ...]

    @property
    def num_ranks(self) -> int:
        return len(self.class_of)

    @property
    def num_classes(self) -> int:
        return len(self.reps)

    def document(self) -> dict[str, Any]:
        runs: list[list[int]] = []
        for k in self.class_of:
            if runs and runs[-1][0] == k:
                runs[-1][1] += 1
            else:
                runs.append([k, 1])
        return {
            "format": CLASS_FORMAT,
            "num_ranks": self.num_ranks,
            "classes": [{"trace": t, "rank": r} for t, r in zip(self.traces, self.reps, strict=True)],
            "class_of": runs,
            "groups": [list(g) for g in self.groups],
            "peers": [list(p) for p in self.peers],
        }


def has_class_map(root: Path) -> bool:
    return (Path(root) / CLASS_MAP).is_file()


def write_class_map(root: Path, classes: RankClassMap) -> None:
    (Path(root) / CLASS_MAP).write_text(json.dumps(classes.document(), separators=(",", ":")) + "\n")


def read_class_map(root: Path, num_ranks: int | None = None) -> RankClassMap:
    """The map, validated (RunDirError naming the file and the field otherwise)."""
    path = Path(root) / CLASS_MAP
    data = rundir.read_json_object(path, "regenerate the run directory")
    where = str(path)
    if data.get("format") != CLASS_FORMAT:
        raise RunDirError(f"{where}: format must be {CLASS_FORMAT!r}, not {data.get('format')!r}")
    count = data.get("num_ranks")
    if not _is_count(count) or (num_ranks is not None and count != num_ranks):
        raise RunDirError(f"{where}: num_ranks {count!r} does not match the run directory's {num_ranks}")
    entries = data.get("classes")
    if not isinstance(entries, list) or not entries:
        raise RunDirError(f"{where}: classes must be a non-empty list")
    traces, reps = [], []
    for k, entry in enumerate(entries):
        if not isinstance(entry, dict) or not isinstance(entry.get("trace"), str):
            raise RunDirError(f"{where}: classes[{k}] must be {{'trace': path, 'rank': rank}}")
        rank = entry.get("rank")
        if not _is_index(rank) or rank >= count:
            raise RunDirError(f"{where}: classes[{k}].rank must be a rank below {count}")
        trace = rundir.inside(Path(root), entry["trace"], f"{CLASS_MAP} classes[{k}].trace")
        if not trace.is_file():
            raise RunDirError(f"{trace}: class trace missing ({CLASS_MAP} classes[{k}] names it)")
        traces.append(entry["trace"])
        reps.append(rank)
    class_of: list[int] = []
    runs = data.get("class_of")
    if not isinstance(runs, list):
        raise RunDirError(f"{where}: class_of must be a list of [class, count] runs")
    for run in runs:
        valid = isinstance(run, list) and len(run) == 2 and _is_index(run[0]) and _is_count(run[1])
        if not valid or run[0] >= len(traces):
            raise RunDirError(f"{where}: class_of run {run!r} must be [class below {len(traces)}, count]")
        if run[1] > count - len(class_of):  # checked before expanding: a count of 1e29 is no list
            raise RunDirError(f"{where}: class_of covers more than the {count} ranks")
        class_of.extend([run[0]] * run[1])
    if len(class_of) != count:
        raise RunDirError(f"{where}: class_of covers {len(class_of)} ranks, not {count}")
    groups = _rows(data.get("groups"), count, where, "groups", lambda v: isinstance(v, str))
    peers = _rows(data.get("peers"), count, where, "peers", lambda v: _is_index(v) and v < count)
    for k, rep in enumerate(reps):
        if class_of[rep] != k:
            raise RunDirError(f"{where}: classes[{k}].rank {rep} is of class {class_of[rep]}")
    for rank, k in enumerate(class_of):
        rep = reps[k]
        if len(groups[rank]) != len(groups[rep]) or len(peers[rank]) != len(peers[rep]):
            raise RunDirError(
                f"{where}: rank {rank} names {len(groups[rank])} groups and {len(peers[rank])} peers, its "
                f"class's rank {rep} {len(groups[rep])} and {len(peers[rep])}"
            )
    return RankClassMap(tuple(traces), tuple(reps), tuple(class_of), groups, peers)


def _rows(rows: Any, count: int, where: str, key: str, valid: Any) -> tuple[tuple[Any, ...], ...]:
    if not isinstance(rows, list) or len(rows) != count:
        raise RunDirError(f"{where}: {key} must list one row per rank ({count})")
    out = []
    for rank, row in enumerate(rows):
        if not isinstance(row, list) or not all(valid(v) for v in row) or len(set(row)) != len(row):
            raise RunDirError(f"{where}: {key}[{rank}] must list distinct values of the right type")
        out.append(tuple(row))
    return tuple(out)


def _is_index(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_count(value: Any) -> bool:
    return _is_index(value) and value > 0


# -- per-rank traces from a class trace -------------------------------------------------------------


def _attr_entry(name: str, **value: object) -> bytes:
    """One `attr` entry of a serialized Node (field 10), as the schema's serializer writes it."""
    body = pb.AttributeProto(name=name, **value).SerializeToString()
    return b"\x52" + _VarintBytes(len(body)) + body


@lru_cache(maxsize=1 << 16)
def _group_entry(group: str) -> bytes:
    return _attr_entry("pg_name", string_val=group)


@lru_cache(maxsize=1 << 17)
def _endpoint(name: str, rank: int) -> bytes:
    return _attr_entry(name, int32_val=rank)


@lru_cache(maxsize=4096)
def _length_prefix(size: int) -> bytes:
    return _VarintBytes(size)


class RankTraceWriter:
    """A class trace cut into fixed pieces and the places where a rank's own values go: a collective
    is its body without the trailing `pg_name` entry, a send/recv its body around the `comm_src` /
    `comm_dst` entries. Runs of fixed records and collectives of one group position are joined once
    per group value they are bound to (a class's ranks share few groups)."""

    def __init__(self, data: bytes, rep: int, groups: tuple[str, ...], peers: tuple[int, ...], source: str):
        records = chakra_io.iter_records(data, source)
        meta = next(records, None)
        if meta is None:
            raise RunDirError(f"{source}: empty trace")
        self._head = chakra_io.frame_bytes(meta)
        # ("run", group position or -1, [(piece, is collective)]) or ("p2p", head, tail, sender, position)
        self._items: list[tuple] = []
        group_at = {g: i for i, g in enumerate(groups)}
        peer_at = {p: i for i, p in enumerate(peers)}
        for body in records:
            node = pb.Node.FromString(body)
            attrs = {a.name: a for a in node.attr}
            if node.type == pb.COMM_COLL_NODE and "pg_name" in attrs:
                name = attrs["pg_name"].string_val
                entry = _group_entry(name)
                if not body.endswith(entry) or name not in group_at:
                    raise RunDirError(f"{source}: node {node.id} is not as the generator writes it")
                self._add_collective(body[: -len(entry)], group_at[name])
            elif node.type in (pb.COMM_SEND_NODE, pb.COMM_RECV_NODE):
                src, dst = attrs["comm_src"].int32_val, attrs["comm_dst"].int32_val
                sender = node.type == pb.COMM_SEND_NODE
                peer = dst if sender else src
                middle = _endpoint("comm_src", src) + _endpoint("comm_dst", dst)
                at = body.find(middle)
                if (src if sender else dst) != rep or peer not in peer_at or at < 0:
                    raise RunDirError(f"{source}: node {node.id} is not as the generator writes it")
                self._items.append(("p2p", body[:at], body[at + len(middle) :], sender, peer_at[peer]))
            else:
                self._add_fixed(chakra_io.frame_bytes(body))
        self._joined: dict[tuple[int, str], bytes] = {}

    def _add_fixed(self, framed: bytes) -> None:
        last = self._items[-1] if self._items else None
        if last is not None and last[0] == "run":
            last[2].append((framed, False))
        else:
            self._items.append(("run", -1, [(framed, False)]))

    def _add_collective(self, prefix: bytes, position: int) -> None:
        last = self._items[-1] if self._items else None
        if last is not None and last[0] == "run" and last[1] in (-1, position):
            self._items[-1] = ("run", position, last[2])
            last[2].append((prefix, True))
        else:
            self._items.append(("run", position, [(prefix, True)]))

    def trace(self, rank: int, groups: tuple[str, ...], peers: tuple[int, ...]) -> bytes:
        parts = [self._head]
        for number, item in enumerate(self._items):
            if item[0] == "p2p":
                _, head, tail, sender, position = item
                peer = peers[position]
                src, dst = (rank, peer) if sender else (peer, rank)
                body = head + _endpoint("comm_src", src) + _endpoint("comm_dst", dst) + tail
                parts.append(_length_prefix(len(body)) + body)
                continue
            _, position, pieces = item
            group = groups[position] if position >= 0 else ""
            joined = self._joined.get((number, group))
            if joined is None:
                joined = self._joined[(number, group)] = self._join(pieces, position, group)
            parts.append(joined)
        return b"".join(parts)

    @staticmethod
    def _join(pieces: list[tuple[bytes, bool]], position: int, group: str) -> bytes:
        """Fixed pieces are framed already; a collective's prefix gets the group entry and its frame."""
        entry = _group_entry(group) if position >= 0 else b""
        return b"".join(
            _length_prefix(len(piece) + len(entry)) + piece + entry if is_collective else piece
            for piece, is_collective in pieces
        )


def rank_traces(
    root: Path | None,
    classes: RankClassMap,
    ranks: Iterable[int] | None = None,
    data: Sequence[bytes] | None = None,
) -> Iterator[tuple[int, bytes]]:
    """(rank, trace bytes) for `ranks` (default all, in rank order), from the class traces: read
    under `root`, or given as `data` (per class)."""
    writers: dict[int, RankTraceWriter] = {}
    for rank in ranks if ranks is not None else range(classes.num_ranks):
        k = classes.class_of[rank]
        writer = writers.get(k)
        if writer is None:
            rep = classes.reps[k]
            source = classes.traces[k]
            if data is not None:
                raw = data[k]
            else:
                path = Path(root or ".") / source
                raw, source = path.read_bytes(), str(path)
            writer = writers[k] = RankTraceWriter(raw, rep, classes.groups[rep], classes.peers[rep], source)
        yield rank, writer.trace(rank, classes.groups[rank], classes.peers[rank])


def materialize(root: Path, prefix: str = rundir.WORKLOAD_PREFIX) -> int:
    """Write `<prefix>.<rank>.et` for every rank that lacks one, from the class traces; how many."""
    root = Path(root)
    classes = read_class_map(root)
    missing = [r for r in range(classes.num_ranks) if not (root / f"{prefix}.{r}.et").is_file()]
    for rank, data in rank_traces(root, classes, missing):
        chakra_io.write_trace(root / f"{prefix}.{rank}.et", [data])
    return len(missing)
