"""Rank classes: ranks that every part of the run directory treats alike, found by colour refinement.

Start from each rank's trace shape (and any per-rank key a caller adds, e.g. a perturbation that
the `dynamics` feature applies to one GPU); then repeatedly recolour
- each comm group by the multiset of (colour, position of the group among the member's groups) of
  its members, and
- each rank by its colour, the colours of its groups in the order it uses them, and the colour of
  each peer together with the rank's position among that peer's peers,
until no class splits. The result is an equitable partition: two ranks of one class run the same
trace, each of their collectives meets members of the same classes at the same nodes of those
members' traces, and each transfer pairs nodes of the same classes. Whatever the network does to
one rank of a class it does to all (the network's own checks are in `quotient`, which feeds any
split it needs back in through `group_keys` / `rank_keys`).

Any per-rank difference splits a class: pass it in `rank_keys` (a rank with a slower GPU, a
degraded NIC seen as a different link capacity in `quotient`) and refinement propagates it to the
ranks whose timing depends on it.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

from astra_hetero.backends.embedded.folding.shapes import TraceShapes


@dataclass(frozen=True)
class RankClasses:
    class_of: list[int]  # rank -> class, classes numbered by their smallest rank
    members: list[list[int]]  # class -> its ranks, ascending
    group_class_of: dict[str, int]  # used group -> its class
    group_classes: list[list[str]]  # class -> its groups, in order of first appearance

    @property
    def reps(self) -> list[int]:
        return [ranks[0] for ranks in self.members]

    @property
    def num_classes(self) -> int:
        return len(self.members)


def rank_classes(
    shapes: TraceShapes,
    groups: Mapping[str, Sequence[int]],
    rank_keys: Sequence[Hashable] | None = None,
    group_keys: Mapping[str, Hashable] | None = None,
) -> RankClasses:
    """The coarsest equitable partition of ranks finer than shapes, `rank_keys` and `group_keys`."""
    num_ranks = len(shapes.shape_of)
    used = sorted({g for names in shapes.groups for g in names})
    position = [{g: i for i, g in enumerate(names)} for names in shapes.groups]
    peer_position = [{p: i for i, p in enumerate(peers)} for peers in shapes.peers]
    colour = _compress(
        [(shapes.shape_of[r], rank_keys[r] if rank_keys is not None else None) for r in range(num_ranks)]
    )
    extra = group_keys or {}
    while True:
        group_colour = dict(
            zip(
                used,
                _compress(
                    [
                        (extra.get(g), tuple(sorted((colour[m], position[m].get(g, -1)) for m in groups[g])))
                        for g in used
                    ]
                ),
                strict=True,
            )
        )
        refined = _compress(
            [
                (
                    colour[r],
                    tuple(group_colour[g] for g in shapes.groups[r]),
                    tuple((colour[p], peer_position[p].get(r, -1)) for p in shapes.peers[r]),
                )
                for r in range(num_ranks)
            ]
        )
        if max(refined, default=-1) == max(colour, default=-1):
            return _classes(refined, used, group_colour)
        colour = refined


def _compress(keys: list[Hashable]) -> list[int]:
    """Colours as small integers, numbered in order of first appearance (so by smallest rank)."""
    index: dict[Hashable, int] = {}
    return [index.setdefault(key, len(index)) for key in keys]


def _classes(colour: list[int], used: list[str], group_colour: dict[str, int]) -> RankClasses:
    members: list[list[int]] = [[] for _ in range(max(colour, default=-1) + 1)]
    for rank, c in enumerate(colour):
        members[c].append(rank)
    number: dict[int, int] = {}
    group_classes: list[list[str]] = []
    for g in used:
        k = number.setdefault(group_colour[g], len(group_classes))
        if k == len(group_classes):
            group_classes.append([])
        group_classes[k].append(g)
    return RankClasses(colour, members, {g: number[group_colour[g]] for g in used}, group_classes)
