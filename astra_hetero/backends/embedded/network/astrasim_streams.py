"""How ASTRA-sim's system layer runs one collective's chunks through its dimension queues (Sys.cc).

A collective of S bytes is cut into chunks of S / `preferred-dataset-splits` bytes (at least the
number of NPUs, except for all-gather; every chunk is a whole chunk, the last one too), and each chunk
becomes a stream that runs its phases one after another: each phase waits in the queue of its
dimension, where at most ceil(`active-chunks-per-dimension` / queues per dimension) streams run at
once, first come first served (the scheduling policy orders collectives, but an NPU runs one
collective at a time, so only one collective's chunks ever share a queue). A stream leaving a queue
lets the next waiting one start at once; the collective ends when its last chunk's last phase does.
On a congestion-unaware network streams running together do not slow each other down, so a
dimension with A active chunks moves A chunks in the time of one.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass


@dataclass(frozen=True)
class Step:
    """One phase of a chunk: the queue it runs in and how long it takes there."""

    queue: int
    duration_ns: int


def num_chunks(size: int, splits: int, num_npus: int, gather: bool) -> tuple[int, int]:
    """(chunk count, chunk size) as Sys::determine_chunk_size and generate_collective cut `size`."""
    chunk = size // splits
    if not gather and num_npus > chunk:  # a minimum chunk, so that dividing it further stays > 0
        chunk = num_npus
        size = splits * chunk
    if chunk == 0:
        return 0, 0
    return math.ceil(size / chunk), chunk


def collective_ns(chunks: int, steps: tuple[Step, ...], per_queue: int) -> int:
    """When the last of `chunks` identical streams (each running `steps` in order) finishes."""
    if chunks == 0 or not steps:
        return 0
    waiting: dict[int, deque[int]] = {}
    running: dict[int, int] = {}
    phase = [0] * chunks
    events: list[tuple[int, int, int]] = []  # (end time, order, stream)
    order = 0
    end = 0

    def admit(queue: int, now: int) -> None:
        nonlocal order
        line = waiting.get(queue)
        while line and running.get(queue, 0) < per_queue:
            stream = line.popleft()
            running[queue] = running.get(queue, 0) + 1
            heapq.heappush(events, (now + steps[phase[stream]].duration_ns, order, stream))
            order += 1

    for stream in range(chunks):
        queue = steps[0].queue
        waiting.setdefault(queue, deque()).append(stream)
        admit(queue, 0)
    while events:
        now, _, stream = heapq.heappop(events)
        left = steps[phase[stream]].queue
        running[left] -= 1
        phase[stream] += 1
        if phase[stream] == len(steps):
            end = now
            admit(left, now)
            continue
        entered = steps[phase[stream]].queue
        waiting.setdefault(entered, deque()).append(stream)
        admit(left, now)  # ASTRA-sim frees the old queue's slot before starting the new phase
        admit(entered, now)
    return end
