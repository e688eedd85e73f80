"""Folding: simulate one rank per class of interchangeable ranks, exactly.

Derived from the run directory alone (STYLE #10): trace shapes from the files (`shapes`), rank
classes by colour refinement over traces and comm groups (`symmetry`), and the network check that
every flow a representative stands for sees the same links (`quotient`), which may split classes
further. The folded simulation then runs the representatives' traces; every collective waits for
the representatives of its members' classes and every flow carries the load of all its instances,
so each representative's timeline is that of every rank of its class. A class of one rank is
simulated as itself: asymmetric parts of a job fall back to rank-by-rank simulation on their own.

`fold` returns None when the run directory fails a check that the plain path reports better (an
unknown group, an unmatched send); the caller then simulates rank by rank, which names the problem.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from astra_hetero.backends.embedded.folding.comm import FoldedComm
from astra_hetero.backends.embedded.folding.quotient import FoldedNetwork, Splits, fold_network
from astra_hetero.backends.embedded.folding.shapes import TraceShapes, class_shapes, read_shapes
from astra_hetero.backends.embedded.folding.symmetry import RankClasses, rank_classes
from astra_hetero.backends.embedded.network.phases import CommPlanner
from astra_hetero.backends.embedded.network.planners import comm_planner
from astra_hetero.backends.embedded.network.routing import Router
from astra_hetero.backends.embedded.rundir.compute_times import check_compute_times
from astra_hetero.backends.embedded.rundir.reader import SimInput
from astra_hetero.backends.embedded.trace.records import KIND_COLL, KIND_SEND, RankTrace


@dataclass(frozen=True)
class Folding:
    classes: RankClasses
    traces: list[RankTrace]  # per class: its representative's trace
    comm: FoldedComm
    router: Router
    planner: CommPlanner  # every instance's plans came from it (NCCL choices)


def fold(
    sim: SimInput,
    workers: int | None = None,
    rank_keys: Sequence[Hashable] | None = None,
    link_keys: Mapping[int, Hashable] | None = None,
    router: Router | None = None,
) -> Folding | None:
    """Classes and folded communication for `sim`; `rank_keys` (one per rank) separates ranks that
    the files alone would treat alike (a per-rank perturbation), `link_keys` (bundle of `router` ->
    key) bundles alike (a timed change of some links)."""
    if sim.classes is not None:
        shapes = class_shapes(sim.trace_paths, sim.classes, sim.roofline)
    else:
        shapes = read_shapes(sim.trace_paths, sim.num_ranks, workers, sim.roofline)
    checked = set()
    for rank in range(sim.num_ranks):  # each shape once per idle flag: the rest would repeat the check
        key = (shapes.shape_of[rank], sim.is_idle(rank))
        if key not in checked:
            checked.add(key)
            trace = shapes.shapes[key[0]].trace
            check_compute_times(trace, sim.trace_paths[rank], key[1], sim.system_file)
    if not _consistent(sim, shapes):
        return None
    keys: list[Hashable] = [
        (
            sim.memory_bytes_per_ns[r] if sim.memory_bytes_per_ns else None,
            rank_keys[r] if rank_keys is not None else None,
        )
        for r in range(sim.num_ranks)
    ]
    router = router or Router(sim.topology)
    planner = comm_planner(sim, router)
    group_keys: dict[str, Hashable] = {}
    while True:
        classes = rank_classes(shapes, sim.groups, keys, group_keys)
        network = fold_network(
            classes, shapes, sim.groups, planner, router.bundle_bytes_per_ns, link_keys, sim.dcqcn is not None
        )
        if not isinstance(network, Splits):
            break
        for rank, key in network.rank_keys.items():
            keys[rank] = (keys[rank], key)
        for name, key in network.group_keys.items():
            group_keys[name] = (group_keys.get(name), key)
    comm = _comm(sim, shapes, classes, network)
    if comm is None:
        return None
    traces = [_representative(sim, shapes, rank) for rank in classes.reps]
    return Folding(classes, traces, comm, router, planner)


def _representative(sim: SimInput, shapes: TraceShapes, rank: int) -> RankTrace:
    """The shape's decoded trace with this rank's own groups, peers and file name."""
    shape = shapes.shapes[shapes.shape_of[rank]]
    trace = shape.trace
    peers = trace.peers.copy()
    if len(shape.peer_pattern):
        peers[trace.kinds > KIND_COLL] = np.array(shapes.peers[rank])[list(shape.peer_pattern)]
    return replace(trace, path=str(sim.trace_paths[rank]), group_names=shapes.groups[rank], peers=peers)


def _consistent(sim: SimInput, shapes: TraceShapes) -> bool:
    """Every pg_name is a group holding its rank, and sends and recvs pair up (one numpy pass)."""
    member_sets: dict[str, frozenset[int]] = {}
    for rank, names in enumerate(shapes.groups):
        for name in names:
            members = member_sets.get(name)
            if members is None:
                if name not in sim.groups:
                    return False
                members = member_sets[name] = frozenset(sim.groups[name])
            if rank not in members:
                return False
    # sends and recvs pair up: per shape and peer position the tags sent and received, then for each
    # rank and peer the tags it sends there are those the peer receives from it (and the reverse)
    slot_tags: dict[tuple[int, int], tuple[tuple[int, ...], tuple[int, ...]]] = {}
    for number, shape in enumerate(shapes.shapes):
        if not len(shape.peer_pattern):
            continue
        p2p = shape.trace.kinds > KIND_COLL
        is_send = shape.trace.kinds[p2p] == KIND_SEND
        tags, pattern = shape.trace.tags[p2p], np.array(shape.peer_pattern)
        for slot in set(shape.peer_pattern):
            here = pattern == slot
            sent, received = np.sort(tags[here & is_send]), np.sort(tags[here & ~is_send])
            slot_tags[(number, slot)] = (tuple(sent.tolist()), tuple(received.tolist()))
    none: tuple[tuple[int, ...], tuple[int, ...]] = ((), ())
    shape_of, peers = shapes.shape_of, shapes.peers
    for rank in range(sim.num_ranks):
        for slot, peer in enumerate(peers[rank]):
            sent, received = slot_tags.get((shape_of[rank], slot), none)
            try:
                back = peers[peer].index(rank)
            except ValueError:
                if sent or received:
                    return False
                continue
            their_sent, their_received = slot_tags.get((shape_of[peer], back), none)
            if sent != their_received or received != their_sent:
                return False
    return True


def _comm(
    sim: SimInput, shapes: TraceShapes, classes: RankClasses, network: FoldedNetwork
) -> FoldedComm | None:
    names = list(sim.groups)
    group_kinds: list[dict] = []
    group_keys, group_expected, group_instances = [], [], []
    for name in names:
        c = classes.group_class_of.get(name, -1)
        group_keys.append(c)
        group_kinds.append({(k, n): p for (gc, k, n), p in network.collective_plans.items() if gc == c})
        issuers = {
            (classes.class_of[m], shapes.groups[m].index(name))
            for m in sim.groups[name]
            if name in shapes.groups[m]
        }
        group_expected.append(len(issuers))
        group_instances.append(len(classes.group_classes[c]) if c >= 0 else 0)
    by_position: dict[tuple[int, int], list[tuple[int, tuple]]] = {}
    for (c, position, size), plan in network.transfer_plans.items():
        by_position.setdefault((c, position), []).append((size, plan))
    transfers, pairs = {}, {}
    for c, rep in enumerate(classes.reps):
        for position, peer in enumerate(shapes.peers[rep]):
            plans = by_position.get((c, position))
            if plans is None:
                continue  # `rep` only receives from this peer
            for size, plan in plans:
                transfers[(rep, peer, size)] = plan
            # the peer's class representative receives, from its own peer at the position where
            # `peer` lists `rep`, what `rep` sends to `peer` (refinement made these positions agree)
            receiver = classes.reps[classes.class_of[peer]]
            sender = shapes.peers[receiver][shapes.peers[peer].index(rep)]
            if pairs.setdefault((sender, receiver), (rep, peer)) != (rep, peer):
                return None  # one rank sends alike to two ranks of a class: not foldable this way
    return FoldedComm(
        network,
        group_kinds,
        transfers,
        group_keys,
        group_expected,
        group_instances,
        pairs,
        tuple(classes.class_of),
    )
