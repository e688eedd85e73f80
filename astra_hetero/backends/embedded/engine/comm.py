"""What the engine asks about communication: the network's links, each collective's and transfer's
phase plans, and how the simulated nodes of one collective or transfer find each other.

`PlainComm` is the reference: every rank is simulated, a collective waits for every member of its
group, plans are those of the run directory's planner (`network.planners.comm_planner`: ideal or
NCCL-like) on the bundled links. `folding.comm.FoldedComm` answers the same questions for a folded
simulation (one rank per class).
"""

from __future__ import annotations

from astra_hetero.backends.embedded.network.phases import CommPlanner, PhasePlan, TransferKey


class PlainComm:
    def __init__(self, planner: CommPlanner, group_members: list[tuple[int, ...]]) -> None:
        self.planner = planner
        self.group_members = group_members
        self.capacities = planner.router.bundle_bytes_per_ns
        self.group_keys = list(range(len(group_members)))  # collectives of one group meet
        self.group_expected = [len(m) for m in group_members]  # ... when every member has issued
        self.group_instances = [1] * len(group_members)
        self.rows: tuple[int, ...] = ()  # rank -> simulated rank: every rank is its own

    def collective_plan(self, group: int, kind: str, size: int) -> tuple[PhasePlan, ...]:
        return self.planner.collective(self.group_members[group], kind, size)

    def transfer_plan(self, src: int, dst: int, size: int) -> tuple[PhasePlan, ...]:
        return self.planner.transfer(src, dst, size)

    def recv_key(self, key: TransferKey) -> TransferKey:
        return key
