"""How long one phase of an ASTRA-sim collective takes on one logical ring, as ASTRA-sim's system layer
runs it over a congestion-unaware network (astra-sim/system/astraccl/native_collectives, 518bd51).

A phase is one algorithm (ring, direct, halving-doubling) running one collective kind over the NPUs of
a ring (a dimension's line of NPUs, all NPUs, or a comm group's members). The algorithms share one
rhythm, which is what is priced here:
- a phase starts by releasing its first message(s) after the endpoint delay `e` (the system file's
  `endpoint-delay` for rings over the network's dimensions, a fixed 10 ns for comm-group rings, whose
  messages take ASTRA-sim's "fast" local path);
- every message received is followed, after `e` and, for a reducing step, the reduction through local
  memory (`reduce_ns`: read two chunks, write one), by the next send;
- the phase ends `e` (plus a reduction) after its last receive.
Ring: each NPU sends to its successor and receives from its predecessor; all-reduce takes 2(N−1)
steps of S/N bytes (the first N−1 reducing), reduce-scatter N−1 reducing steps of S/N, all-gather N−1
steps of S (each NPU's input), all-to-all N(N−1)/2 steps of S/N to the successor. A receive completes
when the message has arrived and the receiving NPU has posted it (when it sent its own message of that
step), so a ring whose links differ is timed NPU by NPU. Direct (all-to-all): messages of S/N to
every other NPU, `window` of them at a time, each arrival releasing the next. Halving-doubling: log2 N
steps per half, to the partner at distance 1, 2, 4, … (all-reduce and reduce-scatter: S/2, S/4, …;
all-gather: S, 2S, …), the reduce-scatter half reducing from its second step on.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Sequence

import numpy as np

from astra_hetero.backends.embedded.network.algorithms import (
    ALL_GATHER,
    ALL_REDUCE,
    ALL_TO_ALL,
    REDUCE_SCATTER,
)

Delay = Callable[[int, int, int], int]  # (src NPU, dst NPU, bytes) -> ns
# Above this many (step, NPU) pairs a ring whose links differ is priced by its slowest link instead of
# NPU by NPU (an all-to-all over a 1,024-NPU ring has half a million steps).
MAX_RING_WORK = 20_000_000


def output_size(kind: str, size: int, n: int) -> int:
    """What a phase leaves each NPU with (the next phase's input)."""
    if kind == REDUCE_SCATTER:
        return size // n
    if kind == ALL_GATHER:
        return size * n
    return size


def ring_phase(
    kind: str,
    ring: Sequence[int],
    size: int,
    delay: Delay,
    endpoint_ns: int,
    reduce_ns: Callable[[int], int],
) -> int:
    """The phase's duration on the ring `ring` (NPUs in sending order: each sends to the next)."""
    n = len(ring)
    if n < 2:
        return 0
    if kind == ALL_REDUCE:
        steps, message, reducing = 2 * (n - 1), size // n, n - 1
    elif kind == REDUCE_SCATTER:
        steps, message, reducing = n - 1, size // n, n - 1
    elif kind == ALL_GATHER:
        steps, message, reducing = n - 1, size, 0
    else:  # all-to-all on the ring algorithm: every pair's share travels one neighbour hop at a time
        steps, message, reducing = n * (n - 1) // 2, size // n, 0
    edges = np.array([delay(ring[i], ring[(i + 1) % n], message) for i in range(n)], dtype=np.int64)
    processing = reduce_ns(message) if reducing else 0
    if (edges == edges[0]).all() or steps * n > MAX_RING_WORK:
        hop = int(edges.max())
        return endpoint_ns + steps * (hop + endpoint_ns) + reducing * processing
    sent = np.full(n, endpoint_ns, dtype=np.int64)  # when each NPU sent its message of this step
    for step in range(steps):
        arrived = np.roll(sent + edges, 1)  # NPU i receives from NPU i-1
        received = np.maximum(arrived, sent)
        sent = received + endpoint_ns + (processing if step < reducing else 0)
    return int(sent.max())


def direct_phase(
    kind: str,
    ring: Sequence[int],
    size: int,
    delay: Delay,
    endpoint_ns: int,
    window: int,
) -> int:
    """All-to-all, every NPU sending S/N to each other NPU in ring order (`window` at a time, -1 all).
    All NPUs follow the same schedule; each offset's message takes its slowest instance."""
    n = len(ring)
    if n < 2:
        return 0
    message = size // n
    parallel = n - 1 if window < 0 else min(window, n - 1)
    hop = [max(delay(ring[i], ring[(i + k) % n], message) for i in range(n)) for k in range(1, n)]
    arrivals: list[tuple[int, int]] = []
    for k in range(parallel):
        heapq.heappush(arrivals, (endpoint_ns + hop[k], k))
    next_offset, last = parallel, 0
    while arrivals:
        time, _ = heapq.heappop(arrivals)
        last = time
        if next_offset < n - 1:  # the arrival's follow-up sends the next offset's message
            heapq.heappush(arrivals, (time + endpoint_ns + hop[next_offset], next_offset))
            next_offset += 1
    return last + endpoint_ns


def halving_doubling_phase(
    kind: str,
    ring: Sequence[int],
    size: int,
    delay: Delay,
    endpoint_ns: int,
    reduce_ns: Callable[[int], int],
) -> int:
    """Halving-doubling on a power-of-two ring; each step takes its slowest pair."""
    n = len(ring)
    if n < 2:
        return 0
    steps = int(math.log2(n))
    if kind == ALL_REDUCE:
        offset, message, factor, total = 1, size // 2, 2.0, 2 * steps
    elif kind == REDUCE_SCATTER:
        offset, message, factor, total = 1, size // 2, 2.0, steps
    else:  # all-gather (all-to-all is refused when the system file is read)
        offset, message, factor, total = n // 2, size, 0.5, steps
    sizes, offsets = [], []
    for _ in range(total):
        sizes.append(message)
        offsets.append(offset)
        offset = int(offset * factor)
        message = int(message / factor)
        if offset == n and kind == ALL_REDUCE:  # the all-gather half runs the distances back
            factor = 0.5
            offset = int(offset * factor)
            message = int(message / factor)
    time = endpoint_ns
    for step, (message, offset) in enumerate(zip(sizes, offsets, strict=True)):
        hop = max(delay(ring[i], ring[_partner(i, offset)], message) for i in range(n))
        reducing = kind != ALL_GATHER and 0 < step + 1 < steps  # packets 2..log2 N reduce
        following = sizes[step + 1] if step + 1 < total else 0
        time += hop + endpoint_ns + (reduce_ns(following) if reducing else 0)
    return time


def _partner(index: int, offset: int) -> int:
    """Halving-doubling's partner: forward by `offset` from an even block, back from an odd one."""
    return index + offset if (index // offset) % 2 == 0 else index - offset


ALGORITHM_KINDS = {
    "ring": (ALL_REDUCE, REDUCE_SCATTER, ALL_GATHER, ALL_TO_ALL),
    "direct": (ALL_TO_ALL,),
    "halvingDoubling": (ALL_REDUCE, REDUCE_SCATTER, ALL_GATHER),
}
