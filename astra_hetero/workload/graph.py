"""Execution graphs of one rank *class*: compute segments, TP/DP collectives, pipeline send/recv.

Ranks that share a stage, a micro-batch count and a GPU type run the same program; only their comm
groups and pipeline peers differ. A graph is therefore built once per class with *roles* in place of
those ("tp", "dp", "embedding", "cp", "ep", "etp", "edp", "moe" groups; "prev", "next" pipeline peers
and "cp_prev", "cp_next" context-parallel ring neighbours) and bound to each rank when encoded.

Program order is the pipeline schedule; compute nodes are chained with control dependencies in that
order, so any simulator that honours dependencies runs 1F1B, GPipe or interleaved 1F1B as scheduled.
Node ids are assigned in creation order and every dependency points to an earlier id.

With virtual stages a rank runs several model chunks. The forward pass of chunk c on stage s (virtual
stage g = c·p + s) receives from virtual stage g − 1 and sends to g + 1: the next stage's chunk c, or
from the last stage to stage 0's chunk c + 1, so "prev"/"next" wrap around the pipeline. The p2p tag
names the virtual-stage boundary, which keeps it unique between any two ranks. The embedding runs in
virtual stage 0, the LM head and loss in the last one.
"""

from __future__ import annotations

from collections.abc import Iterable

from astra_hetero.workload.blocks import Block, Segment, TimedGroup
from astra_hetero.workload.context_parallel import SLOTS_PER_CP_RANK
from astra_hetero.workload.costs import Collective
from astra_hetero.workload.gradsync import BucketedSync, DataParallelWork, UnitHook, finish_iteration
from astra_hetero.workload.ops import Transfer
from astra_hetero.workload.program import RECV, SEND, RankContext, RankGraph
from astra_hetero.workload.schedule import FORWARD, Step
from astra_hetero.workload.sharding import ShardedUnits

MAX_TAG = 2**31 - 1  # Chakra's comm_tag is an int32


def p2p_tag(boundary: int, micro_batch: int, backward: bool) -> int:
    """Unique per message across the boundary between virtual stages `boundary` and `boundary + 1`
    (with one chunk per stage, virtual stages are the stages)."""
    if micro_batch >= 1_000_000:
        raise ValueError(f"micro-batch {micro_batch} does not fit the p2p tag layout")
    tag = (boundary * 1_000_000 + micro_batch) * 2 + int(backward)
    if tag > MAX_TAG:
        raise ValueError(f"p2p tag for virtual-stage boundary {boundary} exceeds int32")
    return tag


CP_TAG_BASE = 1 << 30  # context-parallel ring messages: their own tag range (pipeline tags stay below)
CP_PASSES = 3  # forward, backward, forward recomputed in the backward (full recompute)


def cp_tag(layer: int, micro_batch: int, recompute_pass: int, cp: int, slot: int, micro_batches: int) -> int:
    """Unique per ring message between two CP neighbours (who run the same micro-batches): layer,
    micro-batch, pass (0 forward, 1 backward, 2 recomputed forward) and the message's slot in the block."""
    slots = SLOTS_PER_CP_RANK * cp
    tag = CP_TAG_BASE + ((layer * micro_batches + micro_batch) * CP_PASSES + recompute_pass) * slots + slot
    if tag > MAX_TAG:
        raise ValueError(
            f"context-parallel ring tags of layer {layer}, micro-batch {micro_batch} exceed int32 "
            f"({micro_batches} micro-batches per replica)"
        )
    return tag


class _Pass:
    """Emits one forward or backward pass, fusing compute segments across block boundaries.

    A compute node ends only where something must wait on it (a collective, a gradient bucket, the
    end of the pass), so e.g. one layer's closing residual joins the next layer's first norm.
    """

    def __init__(self, graph: RankGraph, deps: list[int], ctx: RankContext) -> None:
        self.graph, self.deps, self.ctx = graph, deps, ctx
        self.pending: list[tuple[str, Segment]] = []

    def block(self, prefix: str, block: Block, tag: tuple[int, int, int] = (0, 0, 0)) -> None:
        """`tag`: (layer, micro-batch, pass) of a layer block, naming its ring messages' tags."""
        for index, item in enumerate(block):
            if isinstance(item, Collective):
                size = self.ctx.group_size(item.group)
                if size > 1:
                    self.flush()
                    name = f"{prefix}.{item.kind}{index}"
                    self.deps = [
                        self.graph.collective(name, item.kind, item.bytes, item.group, size, self.deps)
                    ]
            elif isinstance(item, TimedGroup):
                self.flush()
                self.deps = self._group(f"{prefix}.{item.name}", item, tag)
            else:
                self.pending.append((prefix, item))

    def _group(self, prefix: str, group: TimedGroup, tag: tuple[int, int, int]) -> list[int]:
        """Emit a concurrent group's nodes; return what follows it must wait for (its exits)."""
        entry = self.deps
        done: list[list[int]] = []  # per node: the nodes whose completion stands for it
        for index, (node, waits) in enumerate(zip(group.nodes, group.deps, strict=True)):
            deps = _union(done[w] for w in waits) if waits else list(entry)
            if isinstance(node, Segment):
                done.append([self.graph.compute(f"{prefix}.{node.label}", node, deps)])
            elif isinstance(node, Collective):
                size = self.ctx.group_size(node.group)
                if size > 1:
                    name = f"{prefix}.{node.kind}{index}"
                    done.append([self.graph.collective(name, node.kind, node.bytes, node.group, size, deps)])
                else:  # a collective of one rank: waiting for it is waiting for its inputs
                    done.append(deps)
            else:
                done.append([self._transfer(f"{prefix}.{node.direction}{index}", node, tag, deps)])
        return _union(done[e] for e in group.exits)

    def _transfer(self, name: str, node: Transfer, tag: tuple[int, int, int], deps: list[int]) -> int:
        layer, micro_batch, recompute_pass = tag
        cp, count = self.ctx.group_size("cp"), self.ctx.num_micro_batches
        value = cp_tag(layer, micro_batch, recompute_pass, cp, node.slot, count)
        kind = SEND if node.direction == "send" else RECV
        return self.graph.p2p(name, kind, node.peer, value, node.bytes, deps)

    def wait(self, node_id: int) -> None:
        """Everything that follows in this pass also waits for `node_id`."""
        self.flush()
        self.deps = [*self.deps, node_id]

    def flush(self) -> list[int]:
        if self.pending:
            (first_prefix, first), (last_prefix, last) = self.pending[0], self.pending[-1]
            name = f"{first_prefix}.{first.label}"
            if len(self.pending) > 1:
                name += f"..{last_prefix.rsplit('.', 1)[-1]}.{last.label}"
            segments = [s for _, s in self.pending]
            merged = Segment(
                name,
                sum(s.flops for s in segments),
                sum(s.bytes for s in segments),
                sum(s.time_ns for s in segments),
            )
            self.deps = [self.graph.compute(name, merged, self.deps)]
            self.pending = []
        return self.deps


def _union(lists: Iterable[list[int]]) -> list[int]:
    seen: dict[int, None] = {}
    for ids in lists:
        seen.update(dict.fromkeys(ids))
    return list(seen)


def build_rank_graph(ctx: RankContext, steps: list[Step]) -> RankGraph:
    graph = RankGraph()
    work: DataParallelWork = (
        ShardedUnits(graph, ctx) if ctx.sharding_stage == 3 else BucketedSync(graph, ctx, steps)
    )
    forwards = backwards = 0
    for step in steps:
        if step.kind == FORWARD:
            work.before_forward(forwards)
            _forward(graph, ctx, step, work)
            forwards += 1
        else:
            hooks = (
                work.before_backward_unit(backwards, step.chunk),
                work.after_backward_unit(backwards, step.chunk),
            )
            _backward(graph, ctx, step, hooks)
            work.after_backward(backwards)
            backwards += 1
    finish_iteration(graph, ctx, work)
    return graph


def _names(ctx: RankContext, step: Step) -> tuple[str, str]:
    """(compute prefix, p2p prefix): layers name their chunk already; p2p names need it."""
    prefix = f"{step.kind}.mb{step.micro_batch}"
    return prefix, prefix + (f".c{step.chunk}" if ctx.num_chunks > 1 else "")


def _recv(graph: RankGraph, ctx: RankContext, peer: str, name: str, tag: int) -> list[int]:
    ctrl = [graph.last_compute] if graph.last_compute >= 0 else []
    return [graph.p2p(name, RECV, peer, tag, ctx.activation_bytes, ctrl)]


def _forward(graph: RankGraph, ctx: RankContext, step: Step, gathers: DataParallelWork) -> None:
    mb, chunk, virtual = step.micro_batch, step.chunk, ctx.virtual_stage(step.chunk)
    first, last = ctx.is_first_virtual(chunk), ctx.is_last_virtual(chunk)
    prefix, p2p_prefix = _names(ctx, step)
    framework = ctx.blocks.micro_batch_segment
    if framework is not None and chunk == 0:  # the framework's per-micro-batch work, once per stage
        graph.compute(f"{prefix}.{framework.label}", framework, [])
    deps = (
        [] if first else _recv(graph, ctx, "prev", f"{p2p_prefix}.recv_act", p2p_tag(virtual - 1, mb, False))
    )
    run = _Pass(graph, deps, ctx)
    if first:
        gathers.before_unit(run, chunk, "embedding")
        run.block(f"{prefix}.embed", ctx.blocks.embedding_fwd)
    for layer in range(*ctx.chunks[chunk]):
        gathers.before_unit(run, chunk, f"L{layer}")
        run.block(f"{prefix}.L{layer}", ctx.blocks.layer(layer)[0], (layer, mb, 0))
    if last:
        gathers.before_unit(run, chunk, "head")
        run.block(f"{prefix}.head", ctx.blocks.head_fwd)
    deps = run.flush()
    if not last:
        tag = p2p_tag(virtual, mb, False)
        _send(graph, ctx, f"{p2p_prefix}.send_act", "next", tag, deps)


def _send(graph: RankGraph, ctx: RankContext, name: str, peer: str, tag: int, deps: list[int]) -> None:
    """A pipeline send; without overlap_p2p_comm the rank's next compute waits for it."""
    node = graph.p2p(name, SEND, peer, tag, ctx.activation_bytes, deps)
    if not ctx.overlap_p2p_comm:
        graph.held.append(node)


def _backward(
    graph: RankGraph, ctx: RankContext, step: Step, hooks: tuple[UnitHook | None, UnitHook | None]
) -> None:
    before, on_unit = hooks
    mb, chunk, virtual = step.micro_batch, step.chunk, ctx.virtual_stage(step.chunk)
    first, last = ctx.is_first_virtual(chunk), ctx.is_last_virtual(chunk)
    prefix, p2p_prefix = _names(ctx, step)
    deps = [] if last else _recv(graph, ctx, "next", f"{p2p_prefix}.recv_grad", p2p_tag(virtual, mb, True))
    run = _Pass(graph, deps, ctx)
    if last:
        if before:
            before(run, "head")
        run.block(f"{prefix}.head", ctx.blocks.head_bwd)
        if on_unit:
            on_unit(run, "head")
    for layer in reversed(range(*ctx.chunks[chunk])):
        if before:
            before(run, f"L{layer}")
        forward, backward = ctx.blocks.layer(layer)
        if ctx.full_recompute:
            run.block(f"{prefix}.L{layer}.recompute", forward, (layer, mb, 2))
        run.block(f"{prefix}.L{layer}", backward, (layer, mb, 1))
        if on_unit:
            on_unit(run, f"L{layer}")
    if first:
        if before:
            before(run, "embedding")
        run.block(f"{prefix}.embed", ctx.blocks.embedding_bwd)
        if on_unit:
            on_unit(run, "embedding")
    deps = run.flush()
    if not first:
        tag = p2p_tag(virtual - 1, mb, True)
        _send(graph, ctx, f"{p2p_prefix}.send_grad", "prev", tag, deps)
