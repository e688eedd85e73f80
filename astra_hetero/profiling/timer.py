"""The timing interface the profiler runs against, and the measurement loop every timer shares.

A timer turns one operator at one shape into nanoseconds on its device. The real one launches PyTorch
kernels (`torch_timer.py`); tests use stand-ins that implement the same two members.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Protocol

from astra_hetero.workload.ops import Op, Shape


class OperatorTimer(Protocol):
    @property
    def device_name(self) -> str:
        """The device as its driver names it, e.g. "NVIDIA H100 80GB HBM3"."""
        ...

    def time_ns(self, op: Op, phase: str, x: Shape) -> float:
        """Time of `op` (one micro-batch on one TP rank) in its pass `phase`."""
        ...


def median_ns(
    run: Callable[[], object], clock: Callable[[Callable[[], object]], float], warmup: int, repeats: int
) -> float:
    """Median of `repeats` timings of `run` after `warmup` untimed calls; `clock(run)` times one call."""
    for _ in range(warmup):
        run()
    return statistics.median(clock(run) for _ in range(repeats))
