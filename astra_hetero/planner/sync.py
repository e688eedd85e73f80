"""The data-parallel end of an iteration as the generator writes it (`workload/gradsync.py`), timed.

Gradient buckets are the generator's (`plan_buckets` over each chunk's parameter groups in backward
order). When each bucket's reduction is issued follows Megatron-LM's rules as gradsync.py encodes them:

- `overlap_grad_reduce`, one chunk: a bucket as soon as the last backward pass has produced it (at
  its share of that pass's time);
- `overlap_grad_reduce`, virtual stages: a chunk's buckets `stage` backward passes after the chunk's
  last one, or after the last backward pass when that comes first;
- no overlap: one bucket per chunk, after the backward, one after another.

All run on one data-parallel stream (each waits for the one before), start when every replica has
issued them, then come the tied-embedding all-reduce, the optimizer step and, with the distributed
optimizer, the parameter all-gathers (after the step, or at the start of the iteration with
`overlap_param_gather`).
"""

from __future__ import annotations

from dataclasses import dataclass

from astra_hetero.planner.context import OptionContext
from astra_hetero.planner.costs import ClassTimes
from astra_hetero.planner.pipeline import StageRun
from astra_hetero.workload.gradsync import plan_buckets


@dataclass(frozen=True)
class Bucket:
    grad_bytes: float
    ready: float  # share of the chunk's backward pass done when the bucket is complete (0..1]


def chunk_buckets(
    ctx: OptionContext, stage: int, chunks: tuple[int, ...], times: ClassTimes
) -> tuple[tuple[Bucket, ...], ...]:
    """Each chunk's gradient buckets in issue order, with when in the backward pass each is ready."""
    par, pp, v = ctx.parallelism, ctx.shape.pp, len(chunks)
    layer_bytes, head_bytes, embedding_bytes = ctx.unit_grad_bytes(stage)
    size = par.dp_bucket_mib * 1024**2 if par.overlap_grad_reduce else float("inf")
    found = []
    for c, num_layers in enumerate(chunks):
        first, last = stage == 0 and c == 0, stage == pp - 1 and c == v - 1
        units: list[tuple[str, float, float]] = []  # (label, gradient bytes, backward time)
        if last:
            units.append(("head", head_bytes, times.last_bwd.total))
        units += [(f"L{i}", layer_bytes, times.layer_backward_ns()) for i in range(num_layers)]
        if first:
            units.append(("embedding", embedding_bytes, times.first_bwd.total))
        units = [u for u in units if u[1] > 0]
        total = sum(u[2] for u in units) or 1.0
        done_at: dict[str, float] = {}
        elapsed = 0.0
        for label, _, time_ns in units:
            elapsed += time_ns
            done_at[label] = elapsed / total
        buckets = plan_buckets([(label, grad) for label, grad, _ in units], size)
        found.append(tuple(Bucket(b.grad_bytes, done_at[b.label]) for b in buckets))
    return tuple(found)


def issue_times(
    ctx: OptionContext, stage: int, run: StageRun, buckets: tuple[tuple[Bucket, ...], ...]
) -> list[tuple[float, Bucket]]:
    """(when one replica issues it, bucket) for every reduction of `stage`, in stream order. A
    blocking one (no overlap) gets the backward's end: the stream makes it wait for the one before."""
    par, v = ctx.parallelism, len(buckets)
    last = run.backward_ends[-1]  # the rank's last compute
    if not par.overlap_grad_reduce:
        return [(last, b) for chunk in buckets for b in chunk]
    if v == 1:
        start, end = run.backward_starts[-1], run.backward_ends[-1]
        return [(start + b.ready * (end - start), b) for b in buckets[0]]
    last_backward = {c: i for i, c in enumerate(run.backward_chunks)}
    triggers: dict[int, list[int]] = {}
    for chunk, index in sorted(last_backward.items(), key=lambda item: item[1]):
        triggers.setdefault(index + stage, []).append(chunk)
    found: list[tuple[float, Bucket]] = []
    synced: set[int] = set()
    for index, end in enumerate(run.backward_ends):
        for chunk in triggers.get(index, []):
            found += [(end, b) for b in buckets[chunk]]
            synced.add(chunk)
    for chunk in range(v):
        if chunk not in synced:
            found += [(last, b) for b in buckets[chunk]]
    return found
