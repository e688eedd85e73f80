"""A rank's ready nodes and its host lane, as ASTRA-sim runs them.

`LowestFirst`: ready compute nodes handed out lowest node first (ASTRA-sim issues a rank's ready nodes
in id order, `Workload::issue_dep_free_nodes`; with nodes in id order, `flatten`'s `id_order`, the
lowest index is the lowest id). `HostLane`: host operators of measured traces (KIND_CPU: `is_cpu_op`
compute nodes, METADATA nodes) run one at a time per rank on its CPU, beside its GPU work, and are not
GPU compute time (ASTRA-sim's CPU resource, `HardwareResource`).
"""

from __future__ import annotations

import heapq
from collections import deque
from typing import TYPE_CHECKING

from astra_hetero.backends.embedded.engine import events

if TYPE_CHECKING:
    from astra_hetero.backends.embedded.engine.events import EventQueue


class LowestFirst(list):
    """A rank's ready compute nodes, handed out lowest node first: ASTRA-sim issues the ready nodes
    of a rank in id order (`Workload::issue_dep_free_nodes`); with nodes in id order (`flatten`'s
    `id_order`) the lowest index is the lowest id."""

    __slots__ = ()

    def append(self, g: int) -> None:  # type: ignore[override]
        heapq.heappush(self, g)

    def popleft(self) -> int:
        return heapq.heappop(self)


class HostLane:
    """The engine's host operators; it provides `rank_of`, `start_ns`, `durations_ns`, `queue`,
    `_complete`, and sets `cpu_busy` and `ready_cpu` per rank."""

    rank_of: list[int]
    start_ns: list[int]
    durations_ns: list[int]
    queue: EventQueue
    cpu_busy: list[bool]
    ready_cpu: list[deque[int]]

    def _complete(self, g: int, now: int) -> None:  # the engine's
        raise NotImplementedError

    def _ready_cpu(self, g: int, now: int) -> None:
        rank = self.rank_of[g]
        if self.cpu_busy[rank]:
            self.ready_cpu[rank].append(g)
            return
        self.cpu_busy[rank] = True
        self.start_ns[g] = now
        self.queue.push(now + self.durations_ns[g], events.CPU_DONE, g)

    def _cpu_done(self, g: int, now: int) -> None:
        rank = self.rank_of[g]
        self._complete(g, now)  # still busy: host operators it releases queue up behind earlier ones
        waiting = self.ready_cpu[rank]
        if waiting:
            nxt = waiting.popleft()
            self.start_ns[nxt] = now
            self.queue.push(now + self.durations_ns[nxt], events.CPU_DONE, nxt)
        else:
            self.cpu_busy[rank] = False
