"""What the engine asks about communication, answered for a folded simulation (see `fold`): one rank
per class, a collective waits for one node per (class, position) of its group, and plans load link
classes with the weight of every instance. `engine.comm.PlainComm` answers the same questions rank by
rank.
"""

from __future__ import annotations

from dataclasses import dataclass

from astra_hetero.backends.embedded.folding.quotient import FoldedNetwork
from astra_hetero.backends.embedded.network.phases import PhasePlan, TransferKey


@dataclass(frozen=True)
class FoldedComm:
    """`group_keys`: group index -> its group class (-1: no simulated rank uses it);
    `group_expected`: simulated nodes one instance waits for; `group_instances`: groups it stands for;
    `pairs`: a simulated recv's (src, dst) -> the (src, dst) of the simulated send it matches."""

    network: FoldedNetwork
    group_kinds: list[dict[tuple[str, int], tuple[PhasePlan, ...]]]  # per group: (kind, size) -> plan
    transfers: dict[tuple[int, int, int], tuple[PhasePlan, ...]]  # (src, dst, size) -> plan
    group_keys: list[int]
    group_expected: list[int]
    group_instances: list[int]
    pairs: dict[tuple[int, int], tuple[int, int]]
    # rank -> the simulated rank (its class) that issues for it: a path's sender in a folded plan is
    # a rank of the representative instance, whose class representative issues at the same instant
    rows: tuple[int, ...] = ()

    @property
    def capacities(self) -> list[float]:
        return self.network.capacities

    def collective_plan(self, group: int, kind: str, size: int) -> tuple[PhasePlan, ...]:
        return self.group_kinds[group][(kind, size)]

    def transfer_plan(self, src: int, dst: int, size: int) -> tuple[PhasePlan, ...]:
        return self.transfers[(src, dst, size)]

    def recv_key(self, key: TransferKey) -> TransferKey:
        src, dst = self.pairs.get((key[0], key[1]), (key[0], key[1]))
        return (src, dst, key[2])
