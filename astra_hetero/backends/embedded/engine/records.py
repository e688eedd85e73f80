"""What the engine keeps of each collective and transfer, and what a run returns."""

from __future__ import annotations

from dataclasses import dataclass

from astra_hetero.backends.embedded.engine.workload import FlatWorkload
from astra_hetero.backends.embedded.network.phases import PhasePlan


class Comm:
    """One collective instance or one send/recv transfer while it runs (and its record after)."""

    __slots__ = (
        "group",
        "kind",
        "size",
        "nodes",
        "plan",
        "phase",
        "start_ns",
        "end_ns",
        "recv",
        "arrived",
        "instances",
        "expected",
        "flow",
        "parked",
        "incoming",
        "ended",
    )

    def __init__(
        self, group: str, kind: str, size: int, plan: tuple[PhasePlan, ...], instances: int = 1
    ) -> None:
        self.group = group
        self.instances = instances  # identical collectives (of other groups) this one stands for
        self.kind = kind
        self.size = size
        self.nodes: list[int] = []  # a collective's member nodes in issue order; a transfer's send
        self.plan = plan
        self.phase = 0
        self.start_ns = -1
        self.end_ns = -1
        self.recv = -1
        self.arrived = False
        # a collective whose members start their parts on their own issue (`engine.static`): the
        # members it waits for, its first phase's flow while members join, whether a later phase
        # waits for the last of them
        self.expected = 0
        self.flow: object = None
        self.parked = False
        # ... and, where each member's part ends on its own, the paths still to arrive per simulated
        # rank and the member nodes already ended
        self.incoming: dict[int, int] | None = None
        self.ended: set[int] = set()


@dataclass(frozen=True)
class EngineOutcome:
    finish_ns: list[int]
    compute_ns: list[int]
    exposed_ns: list[int]
    comms: list[Comm]
    workload: FlatWorkload
    start_ns: list[int]
    end_ns: list[int]
    num_events: int
    num_recomputes: int
    network_stats: dict[str, int] | None = None  # the DCQCN fluid network's counts, when it ran
