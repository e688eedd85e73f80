"""Dependency lists of a decoded trace: packed varints decoded for the whole file at once, and Chakra
node ids turned into node indices."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from astra_hetero.backends.embedded.trace.records import RankTrace
from astra_hetero.errors import RunDirError


def packed_deps_of(path: Path, nodes: list[Any]) -> tuple[np.ndarray, np.ndarray]:
    """(ends, values) of every node's data then control dependencies, from their packed varints.

    A varint is little-endian groups of 7 bits, every byte but the last with the high bit set; the
    whole file's lists are decoded in one pass over their concatenation."""
    raw = [node.data_deps + node.ctrl_deps for node in nodes]
    data = np.frombuffer(b"".join(raw), dtype=np.uint8)
    last = data < 0x80  # the final byte of a varint
    byte_ends = np.cumsum([len(r) for r in raw], dtype=np.int64)
    if len(data) and not last[-1] or np.any(last[byte_ends[byte_ends > 0] - 1] == 0):
        raise RunDirError(f"{path}: a dependency list ends inside a varint")
    starts = np.flatnonzero(np.concatenate(([True], last[:-1]))) if len(data) else np.zeros(0, np.int64)
    position = np.arange(len(data)) - np.repeat(starts, np.diff(np.append(starts, len(data))))
    if np.any(position > 9):
        raise RunDirError(f"{path}: a dependency id is longer than 64 bits")
    bits = (data & 0x7F).astype(np.uint64) << (7 * position).astype(np.uint64)
    values = np.add.reduceat(bits, starts) if len(data) else np.zeros(0, np.uint64)
    counted = np.concatenate(([0], np.cumsum(last, dtype=np.int64)))
    return counted[byte_ends], values


def typed_deps_of(nodes: list[Any]) -> tuple[np.ndarray, np.ndarray]:
    counts = [len(node.data_deps) + len(node.ctrl_deps) for node in nodes]
    values = [d for node in nodes for deps in (node.data_deps, node.ctrl_deps) for d in deps]
    return np.cumsum(counts, dtype=np.int64), np.array(values, dtype=np.uint64)


def resolve_deps(trace: RankTrace) -> RankTrace:
    """The trace with dependency ids turned into indices (a no-op when ids are 0..n-1 in file order)."""
    ids, n = trace.ids, len(trace)
    if np.array_equal(ids, np.arange(n, dtype=np.uint64)):
        unknown = np.flatnonzero(trace.deps >= n)
        if not len(unknown):
            return replace(trace, deps=trace.deps.astype(np.int64))
        index = dict.fromkeys(range(n))
    else:
        index = {node_id: i for i, node_id in enumerate(ids.tolist())}
        if len(index) != n:
            raise RunDirError(f"{trace.path}: duplicate node ids")
    deps = trace.deps.tolist()
    missing = [k for k, d in enumerate(deps) if d not in index]
    if missing:
        node = int(np.searchsorted(trace.dep_ends, missing[0], side="right"))
        raise RunDirError(
            f"{trace.path}: {trace.describe(node)} depends on unknown node id {deps[missing[0]]}"
        )
    return replace(trace, deps=np.array([index[d] for d in deps], dtype=np.int64))
