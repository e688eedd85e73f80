"""The engine's event queue: a heap keyed (time_ns, priority, seq).

Events at the same nanosecond run in priority order, and among equal priorities in the order they
were scheduled (`seq`, a counter of this queue, never global). That makes every run of a directory
replay the same sequence. Priorities put completions before new work at one instant, so a rank that
finishes a compute node and has the next one ready starts it at the same time stamp.

Batched events: many events are scheduled back to back with the same time and priority (the members
of a tensor-parallel group start identical compute nodes when their collective ends). `push_batched`
appends such an event to the list payload of the one scheduled just before it, so the heap holds one
entry for the run. Nothing can sort between events of one time and priority whose seqs are consecutive
(anything scheduled later has a larger seq), so running a list's items in order is exactly running
them one event at a time.
"""

from __future__ import annotations

import heapq
from typing import Any

# Event kinds, in the order they run when they share a time stamp.
COMPUTE_DONE = 0
FLOW_DONE = 1
PHASE_DONE = 2
TIMED = 3  # a dynamics event (rate change, background flow): after the work that ends at its instant
CPU_DONE = 4  # a host (CPU) operator of a measured trace ends
NET_STEP = 5  # the DCQCN fluid network's next step (`network.dcqcn`): after everything else at its instant


class EventQueue:
    __slots__ = ("_heap", "_seq", "_open")

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, int, Any]] = []  # `heap`: truthy while events are queued
        self._seq = 0
        # the batched entry scheduled last, while it is still queued and nothing was scheduled after it
        self._open: tuple[int, int, int, list[Any]] | None = None

    def push(self, time_ns: int, priority: int, payload: Any) -> None:
        self._seq += 1
        self._open = None
        heapq.heappush(self._heap, (time_ns, priority, self._seq, payload))

    def push_batched(self, time_ns: int, priority: int, item: Any) -> None:
        """Schedule an event whose payload is a list of items (see the module docstring)."""
        self._seq += 1  # counted as one event either way, so `num_scheduled` does not depend on batching
        entry = self._open
        if entry is not None and entry[0] == time_ns and entry[1] == priority:
            entry[3].append(item)
            return
        self._open = entry = (time_ns, priority, self._seq, [item])
        heapq.heappush(self._heap, entry)

    def pop(self) -> tuple[int, int, Any]:
        entry = heapq.heappop(self._heap)
        if entry is self._open:
            self._open = None
        return entry[0], entry[1], entry[3]

    def __len__(self) -> int:
        return len(self._heap)

    @property
    def heap(self) -> list[tuple[int, int, int, Any]]:
        """The underlying list, for a loop that tests emptiness once per event (read it, never change it)."""
        return self._heap

    @property
    def num_scheduled(self) -> int:
        return self._seq
