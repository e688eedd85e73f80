"""All ranks' traces as one flat, validated graph: node g of rank r is `offsets[r] + index in file`.

Everything the engine touches per node is a list indexed by g, so a million nodes cost a few lists
rather than a million objects. Checks that need more than one file happen here, before simulating:
every pg_name names a comm group holding the rank, every collective type is one we simulate, and
every send has a recv on its peer (and the reverse) with the same tag.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from astra_hetero import chakra_io
from astra_hetero.backends.embedded import collectives
from astra_hetero.backends.embedded.rundir_reader import SimInput
from astra_hetero.backends.embedded.tracefile import KIND_COLL, KIND_RECV, KIND_SEND
from astra_hetero.errors import RunDirError


@dataclass(frozen=True)
class FlatWorkload:
    offsets: list[int]
    paths: list[str]
    ids: list[int]
    names: list[str]
    kinds: list[int]
    rank_of: list[int]
    durations_ns: list[int]
    sizes: list[int]
    coll_types: list[int]
    peers: list[int]
    tags: list[int]
    groups: list[int]  # index into group_names / group_members, -1 for non-collectives
    group_names: list[str]
    group_members: list[tuple[int, ...]]
    successors: list[list[int] | None]
    num_deps: list[int]
    roots: list[int]

    def coll_kind_name(self, g: int) -> str:
        return chakra_io.COLLECTIVE_NAMES[self.coll_types[g]]

    def describe(self, g: int, with_file: bool = True) -> str:
        rank = self.rank_of[g]
        text = f"node {self.ids[g]} ({self.names[g]!r})"
        return f"{self.paths[rank]}: {text}" if with_file else text


def flatten(sim: SimInput) -> FlatWorkload:
    traces = sim.traces
    offsets, total = [], 0
    for trace in traces:
        offsets.append(total)
        total += len(trace)
    w = FlatWorkload(
        offsets, [t.path for t in traces],
        [x for t in traces for x in t.ids], [x for t in traces for x in t.names],
        [x for t in traces for x in t.kinds], [r for r, t in enumerate(traces) for _ in range(len(t))],
        [x for t in traces for x in t.durations_ns], [x for t in traces for x in t.sizes],
        [x for t in traces for x in t.coll_types], [x for t in traces for x in t.peers],
        [x for t in traces for x in t.tags], [-1] * total, list(sim.groups), list(sim.groups.values()),
        [None] * total, [0] * total, [])
    _link(w, traces)
    _resolve_groups(w, sim)
    _check_transfers(w)
    return w


def _link(w: FlatWorkload, traces: list) -> None:
    successors, num_deps = w.successors, w.num_deps
    for base, trace in zip(w.offsets, traces, strict=True):
        for i, deps in enumerate(trace.deps):
            g = base + i
            if not deps:
                w.roots.append(g)
                continue
            num_deps[g] = len(deps)
            for d in deps:
                followers = successors[base + d]
                if followers is None:
                    successors[base + d] = [g]
                else:
                    followers.append(g)


def _resolve_groups(w: FlatWorkload, sim: SimInput) -> None:
    index = {name: i for i, name in enumerate(w.group_names)}
    member_sets = [frozenset(m) for m in w.group_members]
    checked: set[int] = set()
    for r, trace in enumerate(sim.traces):
        base = w.offsets[r]
        for i, kind in enumerate(trace.kinds):
            if kind != KIND_COLL:
                continue
            g = base + i
            group = index.get(trace.groups[i])
            if group is None:
                raise RunDirError(f"{w.describe(g)} uses pg_name {trace.groups[i]!r}, which "
                                  "workload/comm_groups.json does not define")
            if r not in member_sets[group]:
                raise RunDirError(f"{w.describe(g)}: rank {r} is not in comm group {trace.groups[i]!r}")
            w.groups[g] = group
            if trace.coll_types[i] not in checked:
                _check_collective_type(w, g)
                checked.add(trace.coll_types[i])


def _check_collective_type(w: FlatWorkload, g: int) -> None:
    name = chakra_io.COLLECTIVE_NAMES.get(w.coll_types[g])
    if name not in collectives.SUPPORTED_KINDS:
        raise RunDirError(f"{w.describe(g)}: collective type {name or w.coll_types[g]} is not simulated by "
                          f"the embedded backend (supported: {', '.join(collectives.SUPPORTED_KINDS)})")


def _check_transfers(w: FlatWorkload) -> None:
    """Every (src, dst, tag) must have as many sends on src as recvs on dst; name the first extra."""
    sends: Counter[tuple[int, int, int]] = Counter()
    recvs: Counter[tuple[int, int, int]] = Counter()
    for g, kind in enumerate(w.kinds):
        if kind == KIND_SEND:
            sends[(w.rank_of[g], w.peers[g], w.tags[g])] += 1
        elif kind == KIND_RECV:
            recvs[(w.peers[g], w.rank_of[g], w.tags[g])] += 1
    if sends == recvs:
        return
    seen: Counter[tuple[int, int, int, int]] = Counter()
    for g, kind in enumerate(w.kinds):  # the first send (recv) beyond its peer's count is unmatched
        if kind not in (KIND_SEND, KIND_RECV):
            continue
        src, dst = (w.rank_of[g], w.peers[g]) if kind == KIND_SEND else (w.peers[g], w.rank_of[g])
        key = (src, dst, w.tags[g])
        mine, theirs = (sends, recvs) if kind == KIND_SEND else (recvs, sends)
        seen[(kind, *key)] += 1
        if seen[(kind, *key)] > theirs[key]:
            what, peer = ("send to", key[1]) if kind == KIND_SEND else ("recv from", key[0])
            raise RunDirError(f"{w.describe(g)}: unmatched {what} rank {peer} tag {key[2]} "
                              f"({mine[key]} on this side, {theirs[key]} matching in {w.paths[peer]})")
