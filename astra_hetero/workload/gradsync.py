"""Data-parallel gradient reduction, parameter all-gathers and the optimizer step, as Megatron-LM runs them.

Each model chunk has its own gradient buffer cut into buckets in *reverse* parameter order (bucket 0
holds the chunk's last layers, or the LM head), closed when they reach `dp_bucket_mib`.

- `overlap_grad_reduce: true`, one chunk per stage: each bucket is reduced during the last backward
  pass as soon as its gradients are ready (Megatron-LM's backward hooks).
- `overlap_grad_reduce: true`, virtual stages: a chunk's buckets are reduced together once that
  chunk's last backward pass is done, issued pp_rank backward passes later so that every stage issues
  at the same step (Megatron-LM's default `align_grad_reduce`); chunks whose turn would come after the
  last backward are reduced after it.
- `overlap_grad_reduce: false`: one bucket per chunk (Megatron-LM disables bucketing), reduced after
  the whole backward, blocking, one chunk after another.

Then, as Megatron-LM's `finalize_model_grads`: the tied-embedding all-reduce once the data-parallel
reduction is complete, and the optimizer step.

All of these run on the data-parallel communicator, which NCCL runs as one stream: each waits for the
one issued before it. With context parallelism that communicator is Megatron-core's DP×CP group (the CP
ranks hold the same weights); a MoE model's expert weights have their own buffers, reduced the same way
over the expert-data-parallel group ("edp": the ranks that hold the same experts).

ZeRO-2 (`zero_stage: 2`) keeps only its shard of the gradients, so the buckets are reduce-scattered
during every backward pass, not only the last; ZeRO-3 is `sharding.py`'s.

With the distributed optimizer every gradient bucket has a parameter all-gather of the same buckets:
- `overlap_param_gather: false`: after the optimizer step, blocking, one bucket after another.
- `overlap_param_gather: true`: the all-gathers of the previous step are issued at the start of the
  iteration (one chunk: in forward order; virtual stages: chunks 0 and 1 at the start and chunk c when
  the stage reaches chunk c − 1's first forward pass, as Megatron-LM's `align_param_gather`), and the
  first forward pass through a bucket's layers waits for its all-gather.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from astra_hetero.workload.program import RankContext, RankGraph
from astra_hetero.workload.schedule import BACKWARD, Step


class PassLike(Protocol):
    def wait(self, node_id: int) -> None: ...
    def flush(self) -> list[int]: ...


UnitHook = Callable[[PassLike, str], None]
UnitSizes = Callable[["RankContext", int], list[tuple[str, float]]]


@dataclass(frozen=True)
class SyncGroup:
    """One set of gradient buffers and the communicator that reduces them."""

    role: str  # comm-group role: "dp" (dense weights, DP×CP) | "edp" (expert weights)
    size: int
    units: UnitSizes  # (parameter group, gradient bytes) of a chunk, in backward order


@dataclass(frozen=True)
class Bucket:
    units: tuple[str, ...]  # parameter groups ("head", "L12", "embedding") in backward order
    grad_bytes: float

    @property
    def label(self) -> str:
        return self.units[-1]


def chunk_units(ctx: RankContext, chunk: int) -> list[tuple[str, float]]:
    """(parameter group, gradient bytes) of one chunk in the order its backward pass produces them."""
    units = []
    if ctx.is_last_virtual(chunk):
        units.append(("head", ctx.head_grad_bytes))
    units += [(f"L{layer}", ctx.layer_grad_bytes) for layer in reversed(range(*ctx.chunks[chunk]))]
    if ctx.is_first_virtual(chunk):
        units.append(("embedding", ctx.embedding_stage_grad_bytes))
    return [(label, size) for label, size in units if size > 0]


def expert_units(ctx: RankContext, chunk: int) -> list[tuple[str, float]]:
    """The routed experts' gradient bytes of each MoE layer of a chunk, in backward order."""
    size = ctx.expert_layer_grad_bytes
    return [(f"L{layer}", size) for layer in reversed(range(*ctx.chunks[chunk]))] if size > 0 else []


def sync_groups(ctx: RankContext) -> list[SyncGroup]:
    """The gradient buffers of a rank, with a communicator of more than one rank each."""
    groups = [SyncGroup("dp", ctx.dp_size, chunk_units)] if ctx.has_dp_group else []
    if ctx.expert_layer_grad_bytes > 0 and ctx.edp_size > 1:
        groups.append(SyncGroup("edp", ctx.edp_size, expert_units))
    return groups


def plan_buckets(units: list[tuple[str, float]], bucket_bytes: float) -> list[Bucket]:
    buckets, pending, size = [], [], 0.0
    for label, grad_bytes in units:
        pending.append(label)
        size += grad_bytes
        if size >= bucket_bytes:
            buckets.append(Bucket(tuple(pending), size))
            pending, size = [], 0.0
    if pending:
        buckets.append(Bucket(tuple(pending), size))
    return buckets


class DataParallelStream:
    """Collectives on one data-parallel communicator, in issue order: each also waits for the last."""

    def __init__(self, graph: RankGraph, ctx: RankContext, role: str = "dp", size: int = 0) -> None:
        self.graph, self.ctx = graph, ctx
        self.role, self.size = role, size or ctx.dp_size
        self.last = -1

    def issue(self, name: str, kind: str, size: float, deps: list[int]) -> int:
        if self.last >= 0 and self.last not in deps:
            deps = [*deps, self.last]
        self.last = self.graph.collective(name, kind, size, self.role, self.size, deps)
        return self.last


class GradientSync:
    """Issues each chunk's gradient reductions at the point of the program Megatron-LM issues them."""

    def __init__(
        self, graph: RankGraph, ctx: RankContext, steps: list[Step], group: SyncGroup | None = None
    ) -> None:
        group = group or SyncGroup("dp", ctx.dp_size, chunk_units)
        self.graph, self.ctx, self.role = graph, ctx, group.role
        self.stream = DataParallelStream(graph, ctx, group.role, group.size)
        # ZeRO-2 keeps no full gradient buffer: every backward pass reduce-scatters its buckets
        self.every_backward = ctx.sharding_stage == 2
        overlapped = ctx.overlap_grad_reduce or self.every_backward
        size = ctx.grad_bucket_bytes if overlapped else float("inf")
        self.plans = [plan_buckets(group.units(ctx, c), size) for c in range(ctx.num_chunks)]
        self.kind = "reduce_scatter" if ctx.distributed_optimizer else "all_reduce"
        self.issued: list[int] = []
        self.synced: set[int] = set()
        backward_chunks = [s.chunk for s in steps if s.kind == BACKWARD]
        # backward index of each chunk's last backward pass
        self.last_backward = {c: i for i, c in enumerate(backward_chunks)}
        self.as_ready = overlapped and (ctx.num_chunks == 1 or self.every_backward)
        self.triggers: dict[int, list[int]] = {}
        if overlapped and ctx.num_chunks > 1 and not self.every_backward:
            # backward index after which each chunk is reduced; past the last backward: in finish()
            for chunk, index in sorted(self.last_backward.items(), key=lambda item: item[1]):
                self.triggers.setdefault(index + ctx.stage, []).append(chunk)

    @property
    def active(self) -> bool:
        return self.stream.size > 1

    def unit_hook(self, backward_index: int, chunk: int) -> UnitHook | None:
        """During a chunk's last backward pass (one chunk per stage; every pass under ZeRO-2): issue
        each bucket once its last parameter group's gradients are computed."""
        last = backward_index == self.last_backward[chunk]
        if not (self.active and self.as_ready and (last or self.every_backward)):
            return None
        closing = {bucket.label: bucket for bucket in self.plans[chunk]}
        self.synced.add(chunk)

        def hook(run: PassLike, unit: str) -> None:
            if unit in closing:
                run.flush()  # the reduction waits on exactly the compute that produced its gradients
                self._reduce(closing[unit], [self.graph.last_compute])

        return hook

    def after_backward(self, backward_index: int) -> None:
        if self.active:
            for chunk in self.triggers.get(backward_index, []):
                self._reduce_chunk(chunk)

    def finish(self) -> list[int]:
        """Issue what is left after the backward; return every reduction for the optimizer to wait on."""
        if self.active:
            for chunk in range(self.ctx.num_chunks):
                if chunk not in self.synced:
                    self._reduce_chunk(chunk, blocking=not self.ctx.overlap_grad_reduce)
        return list(self.issued)

    def _reduce_chunk(self, chunk: int, blocking: bool = False) -> None:
        """`blocking`: issued by the host only once the previous reduction is done (it follows the
        backward through that one)."""
        self.synced.add(chunk)
        for bucket in self.plans[chunk]:
            self._reduce(bucket, [] if blocking and self.issued else [self.graph.last_compute])

    def _reduce(self, bucket: Bucket, deps: list[int]) -> None:
        name = f"{self.role}.grad_{self.kind}.{bucket.label}"
        self.issued.append(self.stream.issue(name, self.kind, bucket.grad_bytes, deps))


class ParamGathers:
    """The distributed optimizer's parameter all-gathers overlapped with the forward passes."""

    def __init__(self, sync: GradientSync) -> None:
        self.graph, self.ctx, self.plans, self.stream = sync.graph, sync.ctx, sync.plans, sync.stream
        ctx, plans = self.ctx, self.plans
        self.enabled = ctx.overlap_param_gather and ctx.distributed_optimizer and sync.active
        self.nodes: dict[tuple[int, int], int] = {}  # (chunk, bucket index) -> all-gather node
        self.bucket_of = [{u: i for i, b in enumerate(plan) for u in b.units} for plan in plans]
        self.issue_at: dict[int, int] = {}  # forward index -> chunk issued just before it
        if not self.enabled:
            return
        if ctx.num_chunks == 1:
            self._gather(0, reversed(range(len(plans[0]))), [])  # first layers' bucket first
            return
        for chunk in (0, 1):
            self._gather(chunk, range(len(plans[chunk])), [])
        for chunk in range(2, ctx.num_chunks):
            # chunk c's gather is launched at the forward pass where stage 0 would reach chunk c − 1
            self.issue_at[(chunk - 1) * ctx.num_stages - ctx.stage] = chunk

    def before_forward(self, forward_index: int) -> None:
        chunk = self.issue_at.get(forward_index)
        if chunk is not None:
            deps = [self.graph.last_compute] if self.graph.last_compute >= 0 else []
            self._gather(chunk, range(len(self.plans[chunk])), deps)

    def before_unit(self, run: PassLike, chunk: int, unit: str) -> None:
        """The first forward use of a bucket's parameters waits for its all-gather."""
        key = (chunk, self.bucket_of[chunk].get(unit, -1))
        node = self.nodes.pop(key, None)
        if node is not None:
            run.wait(node)

    def _gather(self, chunk: int, buckets: range | reversed[int], deps: list[int]) -> None:
        for index in buckets:
            bucket = self.plans[chunk][index]
            self.nodes[(chunk, index)] = param_all_gather(self.stream, bucket, deps)


def param_all_gather(stream: DataParallelStream, bucket: Bucket, deps: list[int]) -> int:
    size = bucket.grad_bytes * stream.ctx.param_bytes_per_grad_byte
    return stream.issue(f"{stream.role}.param_all_gather.{bucket.label}", "all_gather", size, deps)


class BucketedSync:
    """Megatron-LM's data-parallel work (ZeRO 0-2): gradient buckets per communicator and, with the
    distributed optimizer, their parameter all-gathers. The graph calls its hooks."""

    def __init__(self, graph: RankGraph, ctx: RankContext, steps: list[Step]) -> None:
        self.graph, self.ctx = graph, ctx
        self.syncs = [GradientSync(graph, ctx, steps, group) for group in sync_groups(ctx)]
        self.gathers = [ParamGathers(sync) for sync in self.syncs]

    def before_forward(self, forward_index: int) -> None:
        for gathers in self.gathers:
            gathers.before_forward(forward_index)

    def before_unit(self, run: PassLike, chunk: int, unit: str) -> None:
        for gathers in self.gathers:
            gathers.before_unit(run, chunk, unit)

    def before_backward_unit(self, backward_index: int, chunk: int) -> UnitHook | None:
        del backward_index, chunk
        return None

    def after_backward_unit(self, backward_index: int, chunk: int) -> UnitHook | None:
        hooks = [h for h in (s.unit_hook(backward_index, chunk) for s in self.syncs) if h is not None]
        if not hooks:
            return None

        def hook(run: PassLike, unit: str) -> None:
            for each in hooks:
                each(run, unit)

        return hook

    def after_backward(self, backward_index: int) -> None:
        for sync in self.syncs:
            sync.after_backward(backward_index)

    def finish(self) -> list[int]:
        return [node for sync in self.syncs for node in sync.finish()]

    def after_step(self, last: int) -> None:
        """The distributed optimizer's blocking parameter all-gathers after the step."""
        if not (self.ctx.distributed_optimizer and not self.ctx.overlap_param_gather):
            return
        for sync in self.syncs:
            for plan in sync.plans:  # blocking: one bucket after another
                for bucket in plan:
                    last = param_all_gather(sync.stream, bucket, [last])


class DataParallelWork(Protocol):
    """What the graph asks of a rank's data-parallel work, wherever in the program it stands."""

    def before_forward(self, forward_index: int) -> None: ...
    def before_unit(self, run: PassLike, chunk: int, unit: str) -> None: ...
    def before_backward_unit(self, backward_index: int, chunk: int) -> UnitHook | None: ...
    def after_backward_unit(self, backward_index: int, chunk: int) -> UnitHook | None: ...
    def after_backward(self, backward_index: int) -> None: ...
    def finish(self) -> list[int]: ...
    def after_step(self, last: int) -> None: ...


def finish_iteration(graph: RankGraph, ctx: RankContext, work: DataParallelWork) -> None:
    waits = work.finish()
    if ctx.has_embedding_group:  # after the data-parallel reduction, as finalize_model_grads does
        waits.append(
            graph.collective(
                "embedding.grad_all_reduce",
                "all_reduce",
                ctx.embedding_grad_bytes,
                "embedding",
                2,
                [graph.last_compute, *waits],
            )
        )
    framework = ctx.blocks.step_segment
    if framework is not None:  # the framework's per-iteration host work, before the optimizer
        waits = [graph.compute("framework.step", framework, waits)]
    step = ctx.blocks.optimizer.segment(ctx.params_on_rank, ctx.params_on_rank / ctx.updated_params)
    work.after_step(graph.compute("optimizer.step", step, waits))
