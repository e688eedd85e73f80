"""What the engine asks about communication: the network's links, each collective's and transfer's
phase plans, and how the simulated nodes of one collective or transfer find each other.

`PlainComm` is the reference: every rank is simulated, a collective waits for every member of its
group, plans are those of the run directory's planner (`plans.comm_planner`: ideal or NCCL-like) on
the bundled links. `FoldedComm` answers the same questions for a folded simulation (see `folding`):
one rank per class, a collective waits for one node per (class, position) of its group, and plans
load link classes with the weight of every instance.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from astra_hetero.backends.embedded.plans import CommPlanner, PhasePlan
from astra_hetero.backends.embedded.quotient import FoldedNetwork

if TYPE_CHECKING:
    from astra_hetero.backends.embedded.nccl_plans import NcclCommPlanner

TransferKey = tuple[int, int, int]  # (src rank, dst rank, tag)


class PlainComm:
    def __init__(self, planner: CommPlanner | NcclCommPlanner, group_members: list[tuple[int, ...]]) -> None:
        self.planner = planner
        self.group_members = group_members
        self.capacities = planner.router.bundle_bytes_per_ns
        self.group_keys = list(range(len(group_members)))  # collectives of one group meet
        self.group_expected = [len(m) for m in group_members]  # ... when every member has issued
        self.group_instances = [1] * len(group_members)

    def collective_plan(self, group: int, kind: str, size: int) -> tuple[PhasePlan, ...]:
        return self.planner.collective(self.group_members[group], kind, size)

    def transfer_plan(self, src: int, dst: int, size: int) -> tuple[PhasePlan, ...]:
        return self.planner.transfer(src, dst, size)

    def recv_key(self, key: TransferKey) -> TransferKey:
        return key


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
