"""Pipeline schedules: the order in which one stage runs forward and backward passes.

A schedule is a plain function (stage, num_stages, num_micro_batches, num_chunks) -> steps, where a
step runs the forward or backward pass of one micro-batch through one model chunk of the stage. A
stage holds `num_chunks` chunks (virtual pipeline stages); chunk c of stage s is virtual stage
c·num_stages + s, so the model runs through stage 0..p−1 with chunk 0, then again with chunk 1, etc.

`1f1b` with one chunk is PipeDream-flush; with several chunks it is Megatron-LM's interleaved 1F1B
(`forward_backward_pipelining_with_interleaving`, with its default micro-batch group size p, i.e. a
depth-first order): micro-batches go through the chunks in groups of p, the warm-up runs
2·(p − s − 1) + (v − 1)·p forward passes, the steady state alternates one forward and one backward,
and the cool-down drains the rest. Backward passes visit the chunks in reverse.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

FORWARD, BACKWARD = "F", "B"


class Step(NamedTuple):
    kind: str  # FORWARD | BACKWARD
    micro_batch: int
    chunk: int = 0


Schedule = Callable[[int, int, int, int], list[Step]]


def gpipe(stage: int, num_stages: int, num_micro_batches: int, num_chunks: int = 1) -> list[Step]:
    """All forwards, then all backwards (in reverse micro-batch order, as GPipe flushes)."""
    del stage, num_stages
    _single_chunk("gpipe", num_chunks)
    return [Step(FORWARD, i) for i in range(num_micro_batches)] + [
        Step(BACKWARD, i) for i in reversed(range(num_micro_batches))
    ]


def one_f_one_b(stage: int, num_stages: int, num_micro_batches: int, num_chunks: int = 1) -> list[Step]:
    """PipeDream-flush for one chunk per stage; Megatron-LM's interleaved 1F1B for several."""
    if num_chunks > 1:
        return interleaved_one_f_one_b(stage, num_stages, num_micro_batches, num_chunks)
    warmup = min(num_stages - stage - 1, num_micro_batches)
    forwards = [Step(FORWARD, i) for i in range(num_micro_batches)]
    backwards = [Step(BACKWARD, i) for i in range(num_micro_batches)]
    return _one_forward_one_backward(forwards, backwards, warmup)


def interleaved_warmup(stage: int, num_stages: int, num_micro_batches: int, num_chunks: int) -> int:
    """Forward passes before the first backward (Megatron-LM's `num_warmup_microbatches`)."""
    warmup = 2 * (num_stages - stage - 1) + (num_chunks - 1) * num_stages
    return min(warmup, num_micro_batches * num_chunks)


def interleaved_order(num_stages: int, num_micro_batches: int, num_chunks: int) -> list[tuple[int, int]]:
    """(micro_batch, chunk) of every forward pass in order: each group of `num_stages` micro-batches
    runs through chunk 0, then chunk 1, ... (Megatron-LM's schedule table)."""
    check_interleavable(num_stages, num_micro_batches, num_chunks)
    return [
        (group + i, chunk)
        for group in range(0, num_micro_batches, num_stages)
        for chunk in range(num_chunks)
        for i in range(num_stages)
    ]


def interleaved_one_f_one_b(
    stage: int, num_stages: int, num_micro_batches: int, num_chunks: int
) -> list[Step]:
    order = interleaved_order(num_stages, num_micro_batches, num_chunks)
    forwards = [Step(FORWARD, mb, chunk) for mb, chunk in order]
    # The k-th backward pass takes the k-th table entry with the chunk mirrored: the last chunk's
    # micro-batches come back first, in the order they went forward.
    backwards = [Step(BACKWARD, mb, num_chunks - 1 - chunk) for mb, chunk in order]
    warmup = interleaved_warmup(stage, num_stages, num_micro_batches, num_chunks)
    return _one_forward_one_backward(forwards, backwards, warmup)


def check_interleavable(num_stages: int, num_micro_batches: int, num_chunks: int) -> None:
    """Megatron-LM's rules for the interleaved schedule (default micro-batch group size = stages)."""
    if num_chunks > 1 and num_stages < 2:
        raise ValueError("the interleaved schedule needs at least 2 pipeline stages")
    if num_chunks > 1 and num_micro_batches % num_stages:
        raise ValueError(
            f"the interleaved schedule needs a multiple of {num_stages} micro-batches "
            f"(one per pipeline stage), got {num_micro_batches}"
        )


def _one_forward_one_backward(forwards: list[Step], backwards: list[Step], warmup: int) -> list[Step]:
    steps = forwards[:warmup]
    for k in range(len(forwards) - warmup):
        steps += [forwards[warmup + k], backwards[k]]
    return steps + backwards[len(forwards) - warmup :]


def _single_chunk(name: str, num_chunks: int) -> None:
    if num_chunks != 1:
        raise ValueError(f"schedule {name!r} has no interleaved form (virtual stages must be 1)")


SCHEDULES: dict[str, Schedule] = {"gpipe": gpipe, "1f1b": one_f_one_b}


def schedule_for(name: str) -> Schedule:
    try:
        return SCHEDULES[name]
    except KeyError:
        raise ValueError(f"unknown schedule {name!r}; known: {', '.join(SCHEDULES)}") from None


def stage_steps(
    name: str, stage: int, num_stages: int, num_micro_batches: int, num_chunks: int
) -> list[Step]:
    return schedule_for(name)(stage, num_stages, num_micro_batches, num_chunks)
