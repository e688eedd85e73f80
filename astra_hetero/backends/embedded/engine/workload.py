"""All ranks' traces as one flat, validated graph: node g of rank r is `offsets[r] + index in file`.

Everything the engine touches per node is a list indexed by g, so a million nodes cost a few lists
rather than a million objects. Checks that need more than one file happen here, before simulating:
every pg_name names a comm group holding the rank, every collective type is one we simulate, and
every send has a recv on its peer (and the reverse) with the same tag.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from astra_hetero import chakra_io
from astra_hetero.backends.embedded.network import algorithms
from astra_hetero.backends.embedded.trace.records import KIND_COLL, KIND_RECV, KIND_SEND, RankTrace
from astra_hetero.errors import RunDirError


@dataclass(frozen=True)
class FlatWorkload:
    """Simulated rank i runs `traces[i]` as rank `ranks[i]` (all ranks, or one per folded class)."""

    ranks: list[int]
    offsets: list[int]
    traces: list[RankTrace]  # for names and ids, which only spans and error messages read
    kinds: list[int]
    rank_of: list[int]  # node -> simulated rank (an index into `ranks`)
    durations_ns: list[int]
    sizes: list[int]
    coll_types: list[int]
    peers: list[int]  # a rank number, as in the files
    tags: list[int]
    groups: list[int]  # index into group_names / group_members, -1 for non-collectives
    group_names: list[str]
    group_members: list[tuple[int, ...]]
    successor_bounds: list[int]  # node g's successors are successors[bounds[g]:bounds[g + 1]]
    successors: list[int]
    num_deps: list[int]
    roots: list[int]

    @property
    def paths(self) -> list[str]:
        return [t.path for t in self.traces]

    def name(self, g: int) -> str:
        rank = self.rank_of[g]
        return self.traces[rank].name(g - self.offsets[rank])

    def coll_kind_name(self, g: int) -> str:
        return chakra_io.COLLECTIVE_NAMES[self.coll_types[g]]

    def describe(self, g: int, with_file: bool = True) -> str:
        rank = self.rank_of[g]
        text = self.traces[rank].describe(g - self.offsets[rank])
        return f"{self.traces[rank].path}: {text}" if with_file else text


def flatten(
    ranks: list[int],
    traces: list[RankTrace],
    groups: dict[str, tuple[int, ...]],
    check_transfers: bool = True,
) -> FlatWorkload:
    """The traces of `ranks` as one graph. `check_transfers` pairs every send with a recv, which needs
    every rank (a folded workload is checked on the trace shapes instead)."""
    lengths = np.array([len(t) for t in traces], dtype=np.int64)
    offsets = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64)

    def joined(column: str) -> np.ndarray:
        return np.concatenate([getattr(t, column) for t in traces]) if traces else np.zeros(0, np.int64)

    kinds, coll_types = joined("kinds"), joined("coll_types")
    group_column = _resolve_groups(ranks, traces, groups, offsets)
    successor_bounds, successors, num_deps = _link(traces, offsets)
    w = FlatWorkload(
        list(ranks),
        offsets.tolist(),
        list(traces),
        kinds.tolist(),
        np.repeat(np.arange(len(traces)), lengths).tolist(),
        joined("durations_ns").tolist(),
        joined("sizes").tolist(),
        coll_types.tolist(),
        joined("peers").tolist(),
        joined("tags").tolist(),
        group_column.tolist(),
        list(groups),
        list(groups.values()),
        successor_bounds.tolist(),
        successors.tolist(),
        num_deps.tolist(),
        np.flatnonzero(num_deps == 0).tolist(),
    )
    _check_collective_types(w, kinds, coll_types)
    if check_transfers:
        _check_transfers(w, np.flatnonzero(np.isin(kinds, (KIND_SEND, KIND_RECV))).tolist())
    return w


def _link(traces: list[RankTrace], offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Successor lists in one flat array, in the order the predecessors' files list them: the
    dependency edges sorted (stably) by predecessor."""
    if not traces:
        return np.zeros(1, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    num_deps = np.concatenate([np.diff(t.dep_ends, prepend=0) for t in traces])
    followers = np.repeat(np.arange(len(num_deps)), num_deps)
    predecessors = np.concatenate([t.deps + base for t, base in zip(traces, offsets.tolist(), strict=True)])
    order = np.argsort(predecessors, kind="stable")
    bounds = np.concatenate(([0], np.cumsum(np.bincount(predecessors, minlength=len(num_deps)))))
    return bounds, followers[order], num_deps


def _resolve_groups(
    ranks: list[int], traces: list[RankTrace], groups: dict[str, tuple[int, ...]], offsets: np.ndarray
) -> np.ndarray:
    """Every collective's comm group as an index into `groups` (-1 for other nodes)."""
    index = {name: i for i, name in enumerate(groups)}
    columns = []
    for r, trace, base in zip(ranks, traces, offsets.tolist(), strict=True):
        local = np.full(len(trace.group_names) + 1, -1, dtype=np.int64)  # the last entry maps -1
        for k, name in enumerate(trace.group_names):
            first = base + int(np.argmax(trace.groups == k))
            group = index.get(name)
            if group is None:
                raise RunDirError(
                    f"{trace.path}: {trace.describe(first - base)} uses pg_name {name!r}, "
                    "which workload/comm_groups.json does not define"
                )
            if r not in groups[name]:
                raise RunDirError(
                    f"{trace.path}: {trace.describe(first - base)}: rank {r} is not in comm group {name!r}"
                )
            local[k] = group
        columns.append(local[trace.groups])
    return np.concatenate(columns) if columns else np.zeros(0, np.int64)


def _check_collective_types(w: FlatWorkload, kinds: np.ndarray, coll_types: np.ndarray) -> None:
    for coll_type in np.unique(coll_types[kinds == KIND_COLL]).tolist():
        _check_collective_type(w, int(np.argmax(coll_types == coll_type)))


def _check_collective_type(w: FlatWorkload, g: int) -> None:
    name = chakra_io.COLLECTIVE_NAMES.get(w.coll_types[g])
    if name not in algorithms.SUPPORTED_KINDS:
        raise RunDirError(
            f"{w.describe(g)}: collective type {name or w.coll_types[g]} is not simulated by "
            f"the embedded backend (supported: {', '.join(algorithms.SUPPORTED_KINDS)})"
        )


def _check_transfers(w: FlatWorkload, transfers: list[int]) -> None:
    """Every (src, dst, tag) must have as many sends on src as recvs on dst; name the first extra.
    `transfers` are the send and recv nodes, in node order."""
    sends: Counter[tuple[int, int, int]] = Counter()
    recvs: Counter[tuple[int, int, int]] = Counter()
    for g in transfers:
        if w.kinds[g] == KIND_SEND:
            sends[(w.rank_of[g], w.peers[g], w.tags[g])] += 1
        else:
            recvs[(w.peers[g], w.rank_of[g], w.tags[g])] += 1
    if sends == recvs:
        return
    seen: Counter[tuple[int, int, int, int]] = Counter()
    for g in transfers:  # the first send (recv) beyond its peer's count is unmatched
        kind = w.kinds[g]
        src, dst = (w.rank_of[g], w.peers[g]) if kind == KIND_SEND else (w.peers[g], w.rank_of[g])
        key = (src, dst, w.tags[g])
        mine, theirs = (sends, recvs) if kind == KIND_SEND else (recvs, sends)
        seen[(kind, *key)] += 1
        if seen[(kind, *key)] > theirs[key]:
            what, peer = ("send to", key[1]) if kind == KIND_SEND else ("recv from", key[0])
            raise RunDirError(
                f"{w.describe(g)}: unmatched {what} rank {peer} tag {key[2]} "
                f"({mine[key]} on this side, {theirs[key]} matching in {w.paths[peer]})"
            )
