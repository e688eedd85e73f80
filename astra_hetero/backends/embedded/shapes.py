"""Trace shapes: which ranks run the same trace up to whom they talk to, found from the files.

A *shape* is a decoded trace with its rank-specific values abstracted into patterns: each collective
names its group by position in the rank's list of groups (first use first), each send/recv its peer
by position in the rank's list of peers. Two ranks have the same shape when their traces are equal
node for node (ids, names, kinds, durations, sizes, tags, dependencies) and their group and peer
patterns agree; they may differ in which groups and peers the positions name.

Only one rank per shape is decoded. Every other file is compared with the decoded file of the same
size byte for byte (`tracebytes.read_twin`), which is exact and costs a fraction of decoding; files
that are not such twins are decoded in the next round, and shapes whose decoded traces agree are
merged. The work is spread over worker processes (trace files are independent).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from astra_hetero.backends.embedded.tracebytes import (
    RankValues,
    ValueSpans,
    rank_values,
    read_twin,
    value_spans,
)
from astra_hetero.backends.embedded.tracefile import RankTrace, decode_rank_trace

_PARALLEL_MIN_RANKS = 64  # below this, worker processes cost more than they save
_CHUNK = 64  # twin files compared per task


@dataclass(frozen=True)
class Shape:
    rep: int  # the rank whose decoded trace stands for every rank of the shape
    trace: RankTrace
    group_pattern: tuple[int, ...]  # per collective node (file order): index into a rank's groups
    peer_pattern: tuple[int, ...]  # per send/recv node: index into a rank's peers


@dataclass(frozen=True)
class TraceShapes:
    shape_of: list[int]  # rank -> index into shapes
    shapes: list[Shape]
    groups: list[tuple[str, ...]]  # rank -> the pg_names its collectives use, first use first
    peers: list[tuple[int, ...]]  # rank -> the ranks its sends and recvs name, first use first


def read_shapes(paths: Sequence[Path], num_ranks: int, workers: int | None = None) -> TraceShapes:
    """Shapes of the trace files `paths` (one per rank, in rank order)."""
    workers = workers if workers is not None else min(2, os.cpu_count() or 1)
    parallel = workers > 1 and len(paths) >= _PARALLEL_MIN_RANKS
    with ProcessPoolExecutor(max_workers=workers) if parallel else _Inline() as pool:
        sizes = [os.path.getsize(p) for p in paths]
        found: dict[int, tuple[int, tuple[str, ...], tuple[int, ...]]] = {}  # rank -> (rep, groups, peers)
        decoded: dict[int, tuple[RankTrace, tuple[int, ...], tuple[int, ...]]] = {}
        remaining: dict[Any, list[int]] = {}
        for rank, size in enumerate(sizes):
            remaining.setdefault(size, []).append(rank)
        while remaining:
            by_size = {key: list(ranks) for key, ranks in remaining.items()}
            reps = [ranks[0] for ranks in by_size.values()]
            infos = list(pool.map(_decode, [paths[r] for r in reps], [num_ranks] * len(reps)))
            for rep, (trace, _spans, _base, groups, peers, patterns) in zip(reps, infos, strict=True):
                decoded[rep] = (trace, *patterns)
                found[rep] = (rep, groups, peers)
            for key, rep, rep_info in zip(list(by_size), reps, infos, strict=True):
                by_size[key] = [rep, rep_info[1], rep_info[2], rep_info[5], *by_size[key][1:]]
            remaining = _match_twins(pool, paths, by_size, num_ranks, found)
    return _merge(found, decoded, len(paths))


def _match_twins(
    pool: Any,
    paths: Sequence[Path],
    by_size: dict[int, list[Any]],
    num_ranks: int,
    found: dict[int, tuple[int, tuple[str, ...], tuple[int, ...]]],
) -> dict[Any, list[int]]:
    """Compare every file with the decoded file of its bucket; return the ranks that are not twins,
    bucketed by size and where they first differed (so that the next round decodes one per shape)."""
    tasks, owners = [], []
    for rep, spans, base, patterns, *members in by_size.values():
        if spans is None:  # not canonical: every other file of this size is decoded in turn
            owners.append((rep, members, None))
            continue
        for first in range(0, len(members), _CHUNK):
            chunk = members[first : first + _CHUNK]
            tasks.append((paths[rep], spans, base, patterns, [paths[m] for m in chunk], num_ranks))
            owners.append((rep, chunk, len(tasks) - 1))
    results = list(pool.map(_twins, *zip(*tasks, strict=True))) if tasks else []
    unmatched: dict[Any, list[int]] = {}
    for rep, members, task in owners:
        answers = results[task] if task is not None else [(rank,) for rank in members]
        for rank, answer in zip(members, answers, strict=True):
            if isinstance(answer[0], tuple):
                found[rank] = (rep, *answer)
            else:
                unmatched.setdefault((os.path.getsize(paths[rank]), rep, answer), []).append(rank)
    return unmatched


def _decode(path: Path, num_ranks: int) -> tuple[Any, ...]:
    decoded = decode_rank_trace(path, num_ranks)
    values, group_pattern, peer_pattern = rank_values(decoded.trace)
    spans = value_spans(decoded, group_pattern, peer_pattern)
    return decoded.trace, spans, values, values.groups, values.peers, (group_pattern, peer_pattern)


def _twins(
    rep_path: Path,
    spans: ValueSpans,
    base: RankValues,
    patterns: tuple[tuple[int, ...], tuple[int, ...]],
    member_paths: list[Path],
    num_ranks: int,
) -> list[tuple[Any, ...]]:
    """Per file: (groups, peers) for a twin, else a key saying where it differed."""
    reference = np.fromfile(rep_path, dtype=np.uint8)
    answers: list[tuple[Any, ...]] = []
    for path in member_paths:
        values = read_twin(path, reference, spans, base, num_ranks)
        answers.append(values if isinstance(values, tuple) else (values.groups, values.peers))
    return answers


def _merge(
    found: dict[int, tuple[int, tuple[str, ...], tuple[int, ...]]],
    decoded: dict[int, tuple[RankTrace, tuple[int, ...], tuple[int, ...]]],
    num_ranks: int,
) -> TraceShapes:
    """One shape per distinct decoded trace (files of different sizes may still be the same shape)."""
    shape_of_rep: dict[int, int] = {}
    shapes: list[Shape] = []
    by_key: dict[bytes, int] = {}
    for rep in sorted(decoded):
        trace, group_pattern, peer_pattern = decoded[rep]
        key = _digest(trace, group_pattern, peer_pattern)
        if key not in by_key:
            by_key[key] = len(shapes)
            shapes.append(Shape(rep, trace, group_pattern, peer_pattern))
        shape_of_rep[rep] = by_key[key]
    shape_of = [shape_of_rep[found[rank][0]] for rank in range(num_ranks)]
    return TraceShapes(
        shape_of, shapes, [found[r][1] for r in range(num_ranks)], [found[r][2] for r in range(num_ranks)]
    )


def _digest(trace: RankTrace, group_pattern: tuple[int, ...], peer_pattern: tuple[int, ...]) -> bytes:
    h = hashlib.blake2b(digest_size=16)
    for column in (
        trace.ids,
        trace.name_ends,
        trace.kinds,
        trace.durations_ns,
        trace.sizes,
        trace.coll_types,
        trace.tags,
        trace.dep_ends,
        trace.deps,
    ):
        h.update(np.ascontiguousarray(column).tobytes())
        h.update(b"|")
    h.update(trace.names)
    h.update(repr((group_pattern, peer_pattern)).encode())
    return h.digest()


class _Inline:
    """A stand-in for a process pool that runs tasks here (small runs)."""

    def __enter__(self) -> _Inline:
        return self

    def __exit__(self, *_exc: object) -> None:
        return None

    def map(self, fn: Callable[..., Any], *iterables: Any) -> Any:
        return map(fn, *iterables)
