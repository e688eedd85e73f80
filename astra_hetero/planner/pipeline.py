"""One replica's pipeline, step by step, as the engine runs its traces (without the data-parallel part).

Each stage runs its schedule's steps (`workload.schedule`, the generator's own: GPipe, 1F1B,
interleaved 1F1B) one after another. A forward pass of chunk c on stage s waits for the same
micro-batch's forward on the virtual stage before (stage s − 1, or the last stage's chunk c − 1) plus
the activation transfer; a backward pass waits for the next virtual stage's backward plus the gradient
transfer. That is the engine's semantics for these traces: compute in program order, a receive
completing when the data sent right after the producing pass has arrived. Communication is taken at
the times the caller gives (alone or shared), so bubbles, warm-up and drain come out of the schedule
itself rather than a closed form.
"""

from __future__ import annotations

from dataclasses import dataclass

from astra_hetero.workload.schedule import FORWARD, stage_steps


@dataclass(frozen=True)
class StageRun:
    backward_starts: tuple[float, ...]  # every backward pass of the stage, in program order (ns)
    backward_ends: tuple[float, ...]  # ... and its last compute
    backward_chunks: tuple[int, ...]
    end: float  # the stage's last pass, its tail included


@dataclass(frozen=True)
class Passes:
    """One micro-batch through each model chunk of a stage (ns): the whole pass, and its tail (TP
    collectives after its last compute, which hold back the send but not the rank's next pass)."""

    fwd: tuple[float, ...]
    fwd_tail: tuple[float, ...]
    bwd: tuple[float, ...]
    bwd_tail: tuple[float, ...]


@dataclass(frozen=True)
class Replica:
    """What the pipeline needs of one replica: each stage's passes; send_fwd[s]: activations from
    stage s to the next (the last stage's entry feeds stage 0's next chunk); send_bwd[s]: gradients
    from stage s + 1 (mod pp) back to stage s; ready[s][c]: the first forward pass of chunk c on stage
    s starts no earlier (parameter gathers)."""

    schedule: str
    num_micro_batches: int
    stages: tuple[Passes, ...]
    send_fwd: tuple[float, ...]
    send_bwd: tuple[float, ...]
    ready: tuple[tuple[float, ...], ...] | None = None


def run(replica: Replica) -> tuple[StageRun, ...]:
    pp, v, m = len(replica.stages), len(replica.stages[0].fwd), replica.num_micro_batches
    steps = [stage_steps(replica.schedule, s, pp, m, v) for s in range(pp)]
    # by (stage, chunk, micro-batch): when the pass's output may be sent (None until run), and when
    # its last compute ended (the last virtual stage turns its forward around from there)
    f_out: list[list[list[float | None]]] = [[[None] * m for _ in range(v)] for _ in range(pp)]
    f_compute: list[list[list[float]]] = [[[0.0] * m for _ in range(v)] for _ in range(pp)]
    b_out: list[list[list[float | None]]] = [[[None] * m for _ in range(v)] for _ in range(pp)]
    free = [0.0] * pp  # the rank's last compute so far
    finish = [0.0] * pp  # its last pass, tail included
    position = [0] * pp
    starts: list[list[float]] = [[] for _ in range(pp)]
    ends: list[list[float]] = [[] for _ in range(pp)]
    chunks: list[list[int]] = [[] for _ in range(pp)]
    left = sum(len(s) for s in steps)
    while left:
        progressed = False
        for s in range(pp):
            mine, passes = steps[s], replica.stages[s]
            while position[s] < len(mine):
                step = mine[position[s]]
                c, mb = step.chunk, step.micro_batch
                forward = step.kind == FORWARD
                if forward:
                    ready = _forward_ready(replica, f_out, s, c, mb)
                    duration, tail = passes.fwd[c], passes.fwd_tail[c]
                else:
                    ready = _backward_ready(replica, b_out, f_compute, s, c, mb)
                    duration, tail = passes.bwd[c], passes.bwd_tail[c]
                if ready is None:
                    break
                start = max(free[s], ready)
                free[s] = start + duration - tail
                finish[s] = max(finish[s], start + duration)
                if forward:
                    f_out[s][c][mb] = start + duration
                    f_compute[s][c][mb] = free[s]
                else:
                    b_out[s][c][mb] = start + duration
                    starts[s].append(start)
                    ends[s].append(free[s])
                    chunks[s].append(c)
                position[s] += 1
                left -= 1
                progressed = True
        if not progressed:  # the generator's schedules never deadlock; a new one must not either
            raise ValueError(f"schedule {replica.schedule!r} deadlocks on {pp} stages")
    return tuple(StageRun(tuple(starts[s]), tuple(ends[s]), tuple(chunks[s]), finish[s]) for s in range(pp))


def _forward_ready(replica: Replica, f_out, s: int, c: int, mb: int) -> float | None:
    pp = len(replica.stages)
    gate = replica.ready[s][c] if replica.ready is not None and mb == 0 else 0.0
    if s > 0:
        before = f_out[s - 1][c][mb]
        return None if before is None else max(gate, before + replica.send_fwd[s - 1])
    if c > 0:
        before = f_out[pp - 1][c - 1][mb]
        return None if before is None else max(gate, before + replica.send_fwd[pp - 1])
    return gate


def _backward_ready(replica: Replica, b_out, f_compute, s: int, c: int, mb: int) -> float | None:
    pp, v = len(replica.stages), len(replica.stages[0].fwd)
    if s < pp - 1:
        after = b_out[s + 1][c][mb]
        return None if after is None else after + replica.send_bwd[s]
    if c < v - 1:
        after = b_out[0][c + 1][mb]
        return None if after is None else after + replica.send_bwd[pp - 1]
    return f_compute[s][c][mb]  # program order ran that forward already
