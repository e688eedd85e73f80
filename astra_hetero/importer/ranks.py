"""What an imported study's ranks are, as far as its traces show it: pipeline stage and replica, or
unknown (null) — never a default that the traces do not support.

- *Stage*, from the send/recv pattern: two ranks exchanging point-to-point messages are neighbouring
  pipeline stages. Forward is the direction whose first message leaves earlier in the sender's
  dependency order (activations are sent after one forward pass; gradients come back only after the
  forward and backward passes of the later stage). Stage 0 is where forward chains start; following
  them numbers the rest. A job without any send or recv is one stage (0). A rank whose position the
  pattern leaves open (no message, a cycle, a tie or two different depths) is null.
- *Replica*, from the comm groups: 0 where one group used by a stage's ranks holds the whole stage
  (one model replica per stage: no data parallelism); otherwise null (a stage's groups cannot tell a
  tensor-parallel group from a data-parallel one without names).
"""

from __future__ import annotations

from collections import deque

import numpy as np

from astra_hetero.backends.embedded.folding.shapes import TraceShapes
from astra_hetero.backends.embedded.trace.records import KIND_COLL, KIND_SEND, RankTrace


def rank_stages(shapes: TraceShapes, num_ranks: int) -> list[int | None]:
    first: dict[tuple[int, int], int] = {}  # (sender, receiver) -> earliest send depth
    depths: dict[int, np.ndarray] = {}
    any_p2p = False
    for rank in range(num_ranks):
        index = shapes.shape_of[rank]
        shape = shapes.shapes[index]
        trace = shape.trace
        p2p = np.flatnonzero(trace.kinds > KIND_COLL)
        if not len(p2p):
            continue
        any_p2p = True
        if index not in depths:
            depths[index] = node_depths(trace)
        peers = np.array(shapes.peers[rank])[list(shape.peer_pattern)]
        for node, peer in zip(p2p.tolist(), peers.tolist(), strict=True):
            if trace.kinds[node] == KIND_SEND:
                key = (rank, int(peer))
                depth = int(depths[index][node])
                first[key] = min(first.get(key, depth), depth)
    if not any_p2p:
        return [0] * num_ranks
    forward: dict[int, list[int]] = {}
    indegree = [0] * num_ranks
    touched = set()
    for (a, b), depth in first.items():
        touched.update((a, b))
        back = first.get((b, a))
        if back is None or depth < back:
            forward.setdefault(a, []).append(b)
            indegree[b] += 1
    stage: list[int | None] = [None] * num_ranks
    conflicted = set()
    queue = deque(r for r in sorted(touched) if indegree[r] == 0 and r in forward)
    for r in queue:
        stage[r] = 0
    seen_edges = 0
    while queue:
        a = queue.popleft()
        for b in forward.get(a, []):
            seen_edges += 1
            want = stage[a] + 1  # type: ignore[operator]
            if stage[b] is None:
                stage[b] = want
                queue.append(b)
            elif stage[b] != want:
                conflicted.add(b)
    for r in conflicted:
        stage[r] = None
    return stage


def rank_replicas(
    stages: list[int | None], groups_used: list[tuple[str, ...]], groups: dict[str, list[int]]
) -> list[int | None]:
    """0 for the ranks of a stage that one of its groups covers whole, else None."""
    by_stage: dict[int, set[int]] = {}
    for rank, stage in enumerate(stages):
        if stage is not None:
            by_stage.setdefault(stage, set()).add(rank)
    replica: list[int | None] = [None] * len(stages)
    for ranks in by_stage.values():
        used = {name for r in ranks for name in groups_used[r]}
        whole = len(ranks) == 1 or any(set(groups.get(name, ())) == ranks for name in used)
        if "" in used or "0" in used:
            whole = whole or ranks == set(range(len(stages)))
        if whole:
            for r in ranks:
                replica[r] = 0
    return replica


def node_depths(trace: RankTrace) -> np.ndarray:
    """Each node's depth in its trace's dependency graph (roots 0): the order it can run in at the
    earliest, counted in nodes."""
    n = len(trace)
    starts = np.concatenate(([0], trace.dep_ends[:-1])).tolist()
    ends = trace.dep_ends.tolist()
    deps = trace.deps.tolist()
    successors: list[list[int]] = [[] for _ in range(n)]
    pending = [0] * n
    for node in range(n):
        for pred in deps[starts[node] : ends[node]]:
            successors[pred].append(node)
            pending[node] += 1
    depth = np.zeros(n, dtype=np.int64)
    ready = deque(i for i in range(n) if pending[i] == 0)
    while ready:
        node = ready.popleft()
        for succ in successors[node]:
            depth[succ] = max(depth[succ], depth[node] + 1)
            pending[succ] -= 1
            if not pending[succ]:
                ready.append(succ)
    return depth


def collective_groups(shapes: TraceShapes, num_ranks: int) -> list[tuple[str, ...]]:
    """Each rank's pg_names, first use first ("" for collectives over every rank)."""
    out = []
    for rank in range(num_ranks):
        trace = shapes.shapes[shapes.shape_of[rank]].trace
        out.append(shapes.groups[rank] if (trace.kinds == KIND_COLL).any() else ())
    return out
