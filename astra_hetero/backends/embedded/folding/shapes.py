"""Trace shapes: which ranks run the same trace up to whom they talk to, found from the files.

A *shape* is a decoded trace with its rank-specific values abstracted into patterns: each collective
names its group by position in the rank's list of groups (first use first), each send/recv its peer
by position in the rank's list of peers. Two ranks have the same shape when their traces are equal
node for node (ids, names, kinds, durations, sizes, tags, dependencies) and their group and peer
patterns agree; they may differ in which groups and peers the positions name.

Only representatives are decoded. Each file is read once and compared byte for byte with the
decoded files of its size, most recently matched first (`trace.twins.twin_values`, exact and a
fraction of the cost of decoding); a file that is nobody's twin is decoded and becomes a
representative itself. Ranks are split into contiguous runs, one per worker process (ranks of one
pipeline stage or replica tend to be neighbours, so a run rarely needs a representative another
run already has); representatives of one shape found by several workers are merged by content.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from astra_hetero.astrasim_inputs.system import Roofline
from astra_hetero.backends.embedded.trace.classes import check_class_trace
from astra_hetero.backends.embedded.trace.decode import decode_rank_trace, read_rank_trace, read_trace_bytes
from astra_hetero.backends.embedded.trace.records import RankTrace
from astra_hetero.backends.embedded.trace.twins import (
    RankValues,
    ValueSpans,
    rank_values,
    twin_values,
    value_spans,
)
from astra_hetero.rank_classes import RankClassMap

_PARALLEL_MIN_RANKS = 256  # below this, worker processes cost more than they save
_RECENT = 8  # representatives a file is compared with before it is decoded itself


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


def read_shapes(
    paths: Sequence[Path], num_ranks: int, workers: int | None = None, roofline: Roofline | None = None
) -> TraceShapes:
    """Shapes of the trace files `paths` (one per rank, in rank order); `roofline`: how compute nodes
    are timed when the system file enables it (twins share their bytes, hence their times)."""
    workers = workers if workers is not None else min(2, os.cpu_count() or 1)
    if workers <= 1 or len(paths) < _PARALLEL_MIN_RANKS:
        parts = [_cluster(list(range(len(paths))), list(paths), num_ranks, roofline)]
    else:
        bounds = np.linspace(0, len(paths), workers + 1).astype(int).tolist()
        runs = [list(range(a, b)) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
        with ProcessPoolExecutor(max_workers=workers) as pool:
            parts = list(
                pool.map(
                    _cluster,
                    runs,
                    [[paths[r] for r in run] for run in runs],
                    [num_ranks] * workers,
                    [roofline] * workers,
                )
            )
    reps: dict[int, tuple[RankTrace, tuple[int, ...], tuple[int, ...]]] = {}
    found: dict[int, tuple[int, tuple[str, ...], tuple[int, ...]]] = {}
    for part_reps, part_found in parts:
        reps.update(part_reps)
        found.update(part_found)
    return _merge(found, reps, len(paths))


def class_shapes(
    paths: Sequence[Path], classes: RankClassMap, roofline: Roofline | None = None
) -> TraceShapes:
    """Shapes of a run directory's traces by class (`rank_classes`; `paths`: rank -> its class trace):
    only the class traces are decoded, every rank's groups and peers come from the map."""
    decoded: dict[int, tuple[RankTrace, tuple[int, ...], tuple[int, ...]]] = {}
    for k, rep in enumerate(classes.reps):
        trace = read_rank_trace(paths[rep], classes.num_ranks, roofline)
        check_class_trace(trace, classes, k, paths[rep])
        _, group_pattern, peer_pattern = rank_values(trace)
        decoded[rep] = (trace, group_pattern, peer_pattern)
    reps, groups, peers = classes.reps, classes.groups, classes.peers
    found = {rank: (reps[k], groups[rank], peers[rank]) for rank, k in enumerate(classes.class_of)}
    return _merge(found, decoded, classes.num_ranks)


@dataclass
class _Rep:
    rank: int
    reference: np.ndarray
    spans: ValueSpans | None
    values: RankValues


def _cluster(
    ranks: list[int], paths: list[Path], num_ranks: int, roofline: Roofline | None = None
) -> tuple[dict[int, Any], dict[int, Any]]:
    """Leader clustering of a run of ranks: (decoded representatives, rank -> (rep, groups, peers))."""
    recent: dict[int, list[_Rep]] = {}  # file size -> representatives, most recently matched first
    reps: dict[int, tuple[RankTrace, tuple[int, ...], tuple[int, ...]]] = {}
    found: dict[int, tuple[int, tuple[str, ...], tuple[int, ...]]] = {}
    for rank, path in zip(ranks, paths, strict=True):
        raw = read_trace_bytes(path)
        data = np.frombuffer(raw, dtype=np.uint8)
        candidates = recent.setdefault(len(raw), [])
        for position, rep in enumerate(candidates):
            values = twin_values(data, rep.reference, rep.spans, rep.values, num_ranks) if rep.spans else None
            if values is not None:
                found[rank] = (rep.rank, values.groups, values.peers)
                candidates.insert(0, candidates.pop(position))
                break
        else:
            decoded = decode_rank_trace(path, num_ranks, data=raw, roofline=roofline)
            values, group_pattern, peer_pattern = rank_values(decoded.trace)
            reps[rank] = (decoded.trace, group_pattern, peer_pattern)
            found[rank] = (rank, values.groups, values.peers)
            candidates.insert(0, _Rep(rank, data, value_spans(decoded, group_pattern, peer_pattern), values))
            del candidates[_RECENT:]
    return reps, found


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
