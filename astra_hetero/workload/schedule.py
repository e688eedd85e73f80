"""Pipeline schedules: the order in which one stage runs forward and backward micro-batches.

Schedules are a registry of plain functions (stage, num_stages, num_micro_batches) -> steps, where a
step is ("F" | "B", micro_batch).
"""

from __future__ import annotations

from collections.abc import Callable

Step = tuple[str, int]
Schedule = Callable[[int, int, int], list[Step]]


def gpipe(stage: int, num_stages: int, num_micro_batches: int) -> list[Step]:
    """All forwards, then all backwards (in reverse micro-batch order, as GPipe flushes)."""
    del stage, num_stages
    return [("F", i) for i in range(num_micro_batches)] + [
        ("B", i) for i in reversed(range(num_micro_batches))
    ]


def one_f_one_b(stage: int, num_stages: int, num_micro_batches: int) -> list[Step]:
    """PipeDream-flush: warm up with (stages - stage - 1) forwards, alternate, then drain backwards."""
    warmup = min(num_stages - stage - 1, num_micro_batches)
    steps: list[Step] = [("F", i) for i in range(warmup)]
    for i in range(num_micro_batches - warmup):
        steps += [("F", warmup + i), ("B", i)]
    steps += [("B", i) for i in range(num_micro_batches - warmup, num_micro_batches)]
    return steps


SCHEDULES: dict[str, Schedule] = {"gpipe": gpipe, "1f1b": one_f_one_b}


def schedule_for(name: str) -> Schedule:
    try:
        return SCHEDULES[name]
    except KeyError:
        raise ValueError(f"unknown schedule {name!r}; known: {', '.join(SCHEDULES)}") from None
