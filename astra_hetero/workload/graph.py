"""Execution graphs of one rank *class*: compute segments, TP/DP collectives, pipeline send/recv.

Ranks that share a stage, a micro-batch count and a GPU type run the same program; only their comm
groups and pipeline peers differ. A graph is therefore built once per class with *roles* in place of
those ("tp", "dp", "embedding" groups; "prev", "next" peers) and bound to each rank when encoded.

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

from astra_hetero.workload.blocks import Block, Segment
from astra_hetero.workload.costs import Collective
from astra_hetero.workload.gradsync import GradientSync, ParamGathers, UnitHook, finish_iteration
from astra_hetero.workload.program import RECV, SEND, RankContext, RankGraph
from astra_hetero.workload.schedule import FORWARD, Step

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


class _Pass:
    """Emits one forward or backward pass, fusing compute segments across block boundaries.

    A compute node ends only where something must wait on it (a collective, a gradient bucket, the
    end of the pass), so e.g. one layer's closing residual joins the next layer's first norm.
    """

    def __init__(self, graph: RankGraph, deps: list[int], ctx: RankContext) -> None:
        self.graph, self.deps = graph, deps
        self.with_tp, self.tp_size = ctx.has_tp_group, ctx.tp_size
        self.pending: list[tuple[str, Segment]] = []

    def block(self, prefix: str, block: Block) -> None:
        for index, item in enumerate(block):
            if isinstance(item, Collective):
                if self.with_tp:
                    self.flush()
                    self.deps = [
                        self.graph.collective(
                            f"{prefix}.{item.kind}{index}",
                            item.kind,
                            item.bytes,
                            "tp",
                            self.tp_size,
                            self.deps,
                        )
                    ]
            else:
                self.pending.append((prefix, item))

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


def build_rank_graph(ctx: RankContext, steps: list[Step]) -> RankGraph:
    graph = RankGraph()
    sync = GradientSync(graph, ctx, steps)
    gathers = ParamGathers(sync)
    forwards = backwards = 0
    for step in steps:
        if step.kind == FORWARD:
            gathers.before_forward(forwards)
            _forward(graph, ctx, step, gathers)
            forwards += 1
        else:
            _backward(graph, ctx, step, sync.unit_hook(backwards, step.chunk))
            sync.after_backward(backwards)
            backwards += 1
    finish_iteration(graph, ctx, sync)
    return graph


def _names(ctx: RankContext, step: Step) -> tuple[str, str]:
    """(compute prefix, p2p prefix): layers name their chunk already; p2p names need it."""
    prefix = f"{step.kind}.mb{step.micro_batch}"
    return prefix, prefix + (f".c{step.chunk}" if ctx.num_chunks > 1 else "")


def _recv(graph: RankGraph, ctx: RankContext, peer: str, name: str, tag: int) -> list[int]:
    ctrl = [graph.last_compute] if graph.last_compute >= 0 else []
    return [graph.p2p(name, RECV, peer, tag, ctx.activation_bytes, ctrl)]


def _forward(graph: RankGraph, ctx: RankContext, step: Step, gathers: ParamGathers) -> None:
    mb, chunk, virtual = step.micro_batch, step.chunk, ctx.virtual_stage(step.chunk)
    first, last = ctx.is_first_virtual(chunk), ctx.is_last_virtual(chunk)
    prefix, p2p_prefix = _names(ctx, step)
    deps = (
        [] if first else _recv(graph, ctx, "prev", f"{p2p_prefix}.recv_act", p2p_tag(virtual - 1, mb, False))
    )
    run = _Pass(graph, deps, ctx)
    if first:
        gathers.before_unit(run, chunk, "embedding")
        run.block(f"{prefix}.embed", ctx.blocks.embedding_fwd)
    for layer in range(*ctx.chunks[chunk]):
        gathers.before_unit(run, chunk, f"L{layer}")
        run.block(f"{prefix}.L{layer}", ctx.blocks.layer(layer)[0])
    if last:
        gathers.before_unit(run, chunk, "head")
        run.block(f"{prefix}.head", ctx.blocks.head_fwd)
    deps = run.flush()
    if not last:
        tag = p2p_tag(virtual, mb, False)
        graph.p2p(f"{p2p_prefix}.send_act", SEND, "next", tag, ctx.activation_bytes, deps)


def _backward(graph: RankGraph, ctx: RankContext, step: Step, on_unit: UnitHook | None) -> None:
    mb, chunk, virtual = step.micro_batch, step.chunk, ctx.virtual_stage(step.chunk)
    first, last = ctx.is_first_virtual(chunk), ctx.is_last_virtual(chunk)
    prefix, p2p_prefix = _names(ctx, step)
    deps = [] if last else _recv(graph, ctx, "next", f"{p2p_prefix}.recv_grad", p2p_tag(virtual, mb, True))
    run = _Pass(graph, deps, ctx)
    if last:
        run.block(f"{prefix}.head", ctx.blocks.head_bwd)
        if on_unit:
            on_unit(run, "head")
    for layer in reversed(range(*ctx.chunks[chunk])):
        forward, backward = ctx.blocks.layer(layer)
        if ctx.full_recompute:
            run.block(f"{prefix}.L{layer}.recompute", forward)
        run.block(f"{prefix}.L{layer}", backward)
        if on_unit:
            on_unit(run, f"L{layer}")
    if first:
        run.block(f"{prefix}.embed", ctx.blocks.embedding_bwd)
        if on_unit:
            on_unit(run, "embedding")
    deps = run.flush()
    if not first:
        tag = p2p_tag(virtual - 1, mb, True)
        graph.p2p(f"{p2p_prefix}.send_grad", SEND, "prev", tag, ctx.activation_bytes, deps)
