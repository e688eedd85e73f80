"""The network seen by folded ranks: link classes and flows that carry the load of their whole class.

A *flow class* is the set of flows that rank symmetry makes simultaneous: one phase of the k-th
collective of every group of a group class, or the transfers of every rank of a rank class to the
peer at one position of its peer list. Every instance's phase plan is computed for real (its routes
through the actual topology), then checked:

(A) links are grouped into classes such that each link of a class has the same capacity and
    receives the same summed weight S_O(l) from every flow class O (found by refinement), and
(B) every instance of a flow class puts the same total weight on each link class, with the same
    latency, byte fraction and memory cost.

Under (A) and (B) weighted max-min fairness gives every flow of a class the same rate, and that rate
is what progressive filling finds on the *quotient*: one link per link class with its capacity, and
one flow per flow class loading link class L with weight S_O(l) — the load of every instance it
stands for (a NIC shared by the GPUs of a node, a leaf uplink carrying several pipelines). Where (B)
fails, the flow class is split and the split is handed back to the rank classes (`Splits`), so
asymmetric routes and oversubscribed links fall back to finer classes, down to single ranks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

from astra_hetero import chakra_io
from astra_hetero.backends.embedded.folding.shapes import TraceShapes
from astra_hetero.backends.embedded.folding.symmetry import RankClasses
from astra_hetero.backends.embedded.network.flows import solo_rate
from astra_hetero.backends.embedded.network.phases import CommPlanner, PhasePlan
from astra_hetero.backends.embedded.trace.records import KIND_COLL, KIND_SEND

_DIGITS = 9  # weights and capacities are compared after rounding: sums of shares differ in the last bits


@dataclass(frozen=True)
class FoldedNetwork:
    capacities: list[float]  # per link class
    collective_plans: dict[tuple[int, str, int], tuple[PhasePlan, ...]]  # (group class, kind, size) -> phases
    transfer_plans: dict[tuple[int, int, int], tuple[PhasePlan, ...]]  # (rank class, peer position, size)
    num_links: int  # links (bundles) the folded plans stand for, for reporting
    link_class: dict[int, int]  # bundle -> its link class, for every bundle some flow uses


@dataclass(frozen=True)
class Splits:
    """Keys that separate instances the network treats differently (see `symmetry.rank_classes`)."""

    rank_keys: dict[int, Hashable]
    group_keys: dict[str, Hashable]


@dataclass(frozen=True)
class _FlowClass:
    key: tuple[
        str, int, object, int
    ]  # ("coll", group class, kind, size) or ("p2p", rank class, position, size)
    owners: list[object]  # per instance: its group name or its sending rank
    plans: list[tuple[PhasePlan, ...]]


def fold_network(
    classes: RankClasses,
    shapes: TraceShapes,
    groups: Mapping[str, Sequence[int]],
    planner: CommPlanner,
    capacities: Sequence[float],
    link_keys: Mapping[int, Hashable] | None = None,
    by_paths: bool = False,
) -> FoldedNetwork | Splits:
    """`link_keys` (bundle -> key) separates bundles that are alike now but not over the whole run (a
    timed event changes them): they fall into link classes of their own, and so do the flow and rank
    classes that load them. `by_paths`: bundles are alike only if the transfers crossing them are
    too (`_refine_by_paths`), for the DCQCN fluid model, whose queue pairs have rates of their own."""
    flow_classes = _collective_classes(classes, shapes, groups, planner) + _transfer_classes(
        classes, shapes, planner
    )
    splits = _phase_count_splits(flow_classes)
    if splits:
        return splits
    # per flow class and phase: each link's load summed over the instances (used twice below)
    sums = [[_summed(fc, phase) for phase in range(len(fc.plans[0]))] for fc in flow_classes]
    link_class = _link_classes(sums, capacities, link_keys or {})
    if by_paths:
        link_class = _refine_by_paths(flow_classes, link_class, classes.class_of)
    splits = _instance_splits(flow_classes, link_class)
    if splits:
        return splits
    return _folded(flow_classes, sums, link_class, capacities)


def _collective_classes(
    classes: RankClasses,
    shapes: TraceShapes,
    groups: Mapping[str, Sequence[int]],
    planner: CommPlanner,
) -> list[_FlowClass]:
    kinds_at = [_collectives_by_position(shape.trace, shape.group_pattern) for shape in shapes.shapes]
    user = {}  # group -> (a rank using it, the group's position among that rank's groups)
    for rank, names in enumerate(shapes.groups):
        for position, name in enumerate(names):
            user.setdefault(name, (rank, position))
    out = []
    for index, names in enumerate(classes.group_classes):
        rank, position = user[names[0]]
        for kind, size in kinds_at[shapes.shape_of[rank]][position]:
            plans = [planner.collective(tuple(groups[name]), kind, size) for name in names]
            out.append(_FlowClass(("coll", index, kind, size), list(names), plans))
    return out


def _collectives_by_position(trace: object, pattern: tuple[int, ...]) -> dict[int, list[tuple[str, int]]]:
    """The distinct (kind, size) of the collectives at each group position (plans may depend on both)."""
    coll = trace.kinds == KIND_COLL  # type: ignore[attr-defined]
    types, sizes = trace.coll_types[coll].tolist(), trace.sizes[coll].tolist()  # type: ignore[attr-defined]
    found: dict[int, dict[tuple[str, int], None]] = {}
    for position, coll_type, size in zip(pattern, types, sizes, strict=True):
        found.setdefault(position, {})[(chakra_io.COLLECTIVE_NAMES.get(coll_type, str(coll_type)), size)] = (
            None
        )
    return {position: list(kinds) for position, kinds in found.items()}


def _transfer_classes(classes: RankClasses, shapes: TraceShapes, planner: CommPlanner) -> list[_FlowClass]:
    out = []
    for index, ranks in enumerate(classes.members):
        trace = shapes.shapes[shapes.shape_of[ranks[0]]].trace
        p2p = trace.kinds > KIND_COLL
        pattern = shapes.shapes[shapes.shape_of[ranks[0]]].peer_pattern
        sends = zip(pattern, trace.kinds[p2p].tolist(), trace.sizes[p2p].tolist(), strict=True)
        for position, size in sorted({(q, size) for q, kind, size in sends if kind == KIND_SEND}):
            plans = [planner.transfer(rank, shapes.peers[rank][position], size) for rank in ranks]
            out.append(_FlowClass(("p2p", index, position, size), list(ranks), plans))
    return out


def _phase_count_splits(flow_classes: list[_FlowClass]) -> Splits | None:
    keys = [[len(plan) for plan in fc.plans] for fc in flow_classes]
    return _splits(flow_classes, keys)


def _link_classes(
    sums: list[list[dict[int, float]]], capacities: Sequence[float], link_keys: Mapping[int, Hashable]
) -> dict[int, int]:
    """Bundle -> link class: equal capacity, equal key and equal summed weight from every flow class
    phase (`sums`: per flow class and phase, `_summed`)."""
    signature: dict[int, list[tuple[int, int, float]]] = {}
    for number, phases in enumerate(sums):
        for phase, summed in enumerate(phases):
            for link, total in summed.items():
                entry = (number, phase, round(total, _DIGITS))
                found = signature.get(link)
                if found is None:
                    signature[link] = [entry]
                else:
                    found.append(entry)
    index: dict[tuple, int] = {}
    return {
        link: index.setdefault(
            (round(capacities[link], _DIGITS), link_keys.get(link), tuple(sig)), len(index)
        )
        for link, sig in sorted(signature.items())
    }


def _refine_by_paths(
    flow_classes: list[_FlowClass], link_class: dict[int, int], class_of: Sequence[int]
) -> dict[int, int]:
    """Split link classes until every bundle of a class is crossed by alike transfers: the same flow
    class and phase, sent by ranks of the same class (`PhasePlan.senders`), along paths through the
    same link classes (colour refinement on the paths of `PhasePlan.paths`). Max-min fairness needs
    only equal summed loads; the fluid model gives each transfer its own rate, so a 100G NIC link
    fed from a 400G spine and one fed from a 100G neighbour must not share a class even where their
    loads are equal; and a collective's members start their paths on their own issue (`engine.static`),
    so paths of senders that issue at different instants must not share a class either."""
    count = len(set(link_class.values()))
    while True:
        signature: dict[int, list[tuple]] = {}
        for number, fc in enumerate(flow_classes):
            for plan in fc.plans:
                for phase_number, phase in enumerate(plan):
                    senders = phase.senders
                    for k, path in enumerate(phase.paths):
                        shape = tuple(sorted((link_class[b], round(w, _DIGITS)) for b, w in path))
                        sender = class_of[senders[k]] if senders else -1
                        for bundle, _ in path:
                            signature.setdefault(bundle, []).append((number, phase_number, sender, shape))
        index: dict[tuple, int] = {}
        refined = {
            bundle: index.setdefault((cls, tuple(sorted(signature.get(bundle, ())))), len(index))
            for bundle, cls in sorted(link_class.items())
        }
        if len(index) == count:
            return link_class
        link_class, count = refined, len(index)


def _summed(fc: _FlowClass, phase: int) -> dict[int, float]:
    total: dict[int, float] = {}
    get = total.get
    for plan in fc.plans:
        for link, weight in plan[phase].links:
            total[link] = get(link, 0.0) + weight
    return total


def _instance_splits(flow_classes: list[_FlowClass], link_class: dict[int, int]) -> Splits | None:
    keys = []
    for fc in flow_classes:
        keys.append([tuple(_phase_key(phase, link_class) for phase in plan) for plan in fc.plans])
    return _splits(flow_classes, keys)


def _phase_key(phase: PhasePlan, link_class: dict[int, int]) -> tuple:
    per_class: dict[int, float] = {}
    get = per_class.get
    for link, weight in phase.links:
        c = link_class[link]
        per_class[c] = get(c, 0.0) + weight
    loads = tuple(sorted((c, round(w, _DIGITS)) for c, w in per_class.items()))
    return (loads, round(phase.bytes_fraction, 12), phase.latency_ns, round(phase.memory_ns_per_byte, 15))


def _splits(flow_classes: list[_FlowClass], keys: list[list[Hashable]]) -> Splits | None:
    rank_keys: dict[int, Hashable] = {}
    group_keys: dict[str, Hashable] = {}
    for fc, instance_keys in zip(flow_classes, keys, strict=True):
        if len(set(instance_keys)) <= 1:
            continue
        for owner, key in zip(fc.owners, instance_keys, strict=True):
            target = group_keys if fc.key[0] == "coll" else rank_keys
            target[owner] = (*target.get(owner, ()), (fc.key, key))  # type: ignore[index]
    return Splits(rank_keys, group_keys) if rank_keys or group_keys else None


def _folded(
    flow_classes: list[_FlowClass],
    sums: list[list[dict[int, float]]],
    link_class: dict[int, int],
    capacities: Sequence[float],
) -> FoldedNetwork:
    num_classes = max(link_class.values(), default=-1) + 1
    class_capacity = [0.0] * num_classes
    for link, c in link_class.items():
        class_capacity[c] = capacities[link]
    collective, transfer = {}, {}
    for fc, summed in zip(flow_classes, sums, strict=True):
        phases = []
        for number, phase in enumerate(fc.plans[0]):
            weights: dict[int, float] = {}
            for link, total in summed[number].items():
                weights.setdefault(link_class[link], total)  # equal within a link class, by (A)
            links = tuple(sorted(weights.items()))
            solo = solo_rate(links, class_capacity) if links else 0.0
            phases.append(dataclasses.replace(phase, links=links, solo_rate=solo))
        kind, owner, what, size = fc.key
        target = collective if kind == "coll" else transfer
        target[(owner, what, size)] = tuple(phases)
    return FoldedNetwork(class_capacity, collective, transfer, len(link_class), link_class)
