"""The engine's event queue: a heap keyed (time_ns, priority, seq).

Events at the same nanosecond run in priority order, and among equal priorities in the order they
were scheduled (`seq`, a counter of this queue, never global). That makes every run of a directory
replay the same sequence. Priorities put completions before new work at one instant, so a rank that
finishes a compute node and has the next one ready starts it at the same time stamp.
"""

from __future__ import annotations

import heapq
from typing import Any

# Event kinds, in the order they run when they share a time stamp.
COMPUTE_DONE = 0
FLOW_DONE = 1
PHASE_DONE = 2


class EventQueue:
    __slots__ = ("_heap", "_seq")

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, int, Any]] = []
        self._seq = 0

    def push(self, time_ns: int, priority: int, payload: Any) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (time_ns, priority, self._seq, payload))

    def pop(self) -> tuple[int, int, Any]:
        time_ns, priority, _, payload = heapq.heappop(self._heap)
        return time_ns, priority, payload

    def __len__(self) -> int:
        return len(self._heap)

    @property
    def num_scheduled(self) -> int:
        return self._seq
