"""Execution graphs of one rank *class*: compute segments, TP/DP collectives, pipeline send/recv.

Ranks that share a stage, a micro-batch count and a GPU type run the same program; only their comm
groups and pipeline peers differ. A graph is therefore built once per class with *roles* in place of
those ("tp", "dp", "embedding" groups; "prev", "next" peers) and bound to each rank when encoded.

Program order is the pipeline schedule; compute nodes are chained with control dependencies in that
order, so any simulator that honours dependencies runs 1F1B or GPipe as scheduled. Node ids are
assigned in creation order and every dependency points to an earlier id.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from astra_hetero.workload.blocks import Block, DeviceBlocks, Segment
from astra_hetero.workload.costs import Collective

COMP, COLL, SEND, RECV = "comp", "coll", "send", "recv"


class TraceNode:
    __slots__ = (
        "id",
        "name",
        "kind",
        "data_deps",
        "ctrl_deps",
        "time_ns",
        "flops",
        "bytes",
        "comm_type",
        "group",
        "peer",
        "tag",
    )

    def __init__(self, node_id: int, name: str, kind: str, data_deps: list[int], ctrl_deps: list[int]):
        self.id = node_id
        self.name = name
        self.kind = kind
        self.data_deps = data_deps
        self.ctrl_deps = ctrl_deps
        self.time_ns = 0.0
        self.flops = 0.0
        self.bytes = 0  # tensor bytes for compute; message bytes for communication
        self.comm_type = ""
        self.group = ""  # comm-group role for collectives: "tp" | "dp" | "embedding"
        self.peer = ""  # pipeline-peer role for send/recv: "prev" | "next"
        self.tag = 0


@dataclass(frozen=True)
class RankContext:
    """Everything a rank class's program depends on (identical for every rank of the class)."""

    stage: int
    num_stages: int
    num_micro_batches: int
    first_layer: int
    num_layers: int
    blocks: DeviceBlocks
    tp_size: int
    dp_size: int
    has_tp_group: bool
    has_dp_group: bool
    has_embedding_group: bool  # tied embeddings span the first and last stage
    activation_bytes: int
    grad_bucket_bytes: float
    layer_grad_bytes: float
    extra_grad_bytes: float  # embedding / head gradients held by this stage
    embedding_grad_bytes: int
    params_on_rank: float
    distributed_optimizer: bool
    optimizer_shards: int  # dp with the distributed optimizer, else 1
    param_bytes_per_grad_byte: float
    full_recompute: bool


def p2p_tag(stage_boundary: int, micro_batch: int, backward: bool) -> int:
    """Unique per message between two neighbouring stages (fits comfortably in int32)."""
    return (stage_boundary * 1_000_000 + micro_batch) * 2 + int(backward)


@dataclass
class RankGraph:
    nodes: list[TraceNode] = field(default_factory=list)
    last_compute: int = -1

    def add(
        self, name: str, kind: str, data_deps: list[int], ctrl_deps: list[int] | None = None
    ) -> TraceNode:
        node = TraceNode(len(self.nodes), name, kind, data_deps, ctrl_deps or [])
        self.nodes.append(node)
        return node

    def compute(self, name: str, segment: Segment, data_deps: list[int]) -> int:
        ctrl = [self.last_compute] if self.last_compute >= 0 and self.last_compute not in data_deps else []
        node = self.add(name, COMP, data_deps, ctrl)
        node.time_ns, node.flops, node.bytes = segment.time_ns, segment.flops, int(segment.bytes)
        self.last_compute = node.id
        return node.id

    def collective(
        self, name: str, comm_type: str, size: float, group: str, group_size: int, deps: list[int]
    ) -> int:
        """`size` is the collective's full buffer; the node carries Chakra's `comm_size`, which for an
        all-gather is each rank's input (ASTRA-sim gathers N × comm_size), for the others the buffer."""
        node = self.add(name, COLL, deps)
        if comm_type == "all_gather":
            size /= group_size
        node.comm_type, node.bytes, node.group = comm_type, int(size), group
        return node.id

    def p2p(self, name: str, kind: str, peer: str, tag: int, size: int, deps: list[int]) -> int:
        node = self.add(name, kind, deps)
        node.peer, node.tag, node.bytes = peer, tag, int(size)
        return node.id


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


def build_rank_graph(ctx: RankContext, steps: list[tuple[str, int]]) -> RankGraph:
    graph = RankGraph()
    last_backward = max((i for i, (kind, _) in enumerate(steps) if kind == "B"), default=-1)
    buckets = _GradientBuckets(graph, ctx)
    for index, (kind, mb) in enumerate(steps):
        if kind == "F":
            _forward(graph, ctx, mb)
        else:
            _backward(graph, ctx, mb, buckets if index == last_backward else None)
    _finish_iteration(graph, ctx, buckets)
    return graph


def _recv(graph: RankGraph, ctx: RankContext, peer: str, boundary: int, mb: int, backward: bool) -> list[int]:
    ctrl = [graph.last_compute] if graph.last_compute >= 0 else []
    name = f"{'B' if backward else 'F'}.mb{mb}.recv_{'grad' if backward else 'act'}"
    return [graph.p2p(name, RECV, peer, p2p_tag(boundary, mb, backward), ctx.activation_bytes, ctrl)]


def _forward(graph: RankGraph, ctx: RankContext, mb: int) -> None:
    first, last = ctx.stage == 0, ctx.stage == ctx.num_stages - 1
    deps = [] if first else _recv(graph, ctx, "prev", ctx.stage - 1, mb, backward=False)
    prefix = f"F.mb{mb}"
    run = _Pass(graph, deps, ctx)
    if first:
        run.block(f"{prefix}.embed", ctx.blocks.embedding_fwd)
    for layer in range(ctx.first_layer, ctx.first_layer + ctx.num_layers):
        run.block(f"{prefix}.L{layer}", ctx.blocks.layer_fwd)
    if last:
        run.block(f"{prefix}.head", ctx.blocks.head_fwd)
    deps = run.flush()
    if not last:
        graph.p2p(
            f"{prefix}.send_act", SEND, "next", p2p_tag(ctx.stage, mb, False), ctx.activation_bytes, deps
        )


def _backward(graph: RankGraph, ctx: RankContext, mb: int, buckets: _GradientBuckets | None) -> None:
    first, last = ctx.stage == 0, ctx.stage == ctx.num_stages - 1
    deps = [] if last else _recv(graph, ctx, "next", ctx.stage, mb, backward=True)
    prefix = f"B.mb{mb}"
    run = _Pass(graph, deps, ctx)
    if last:
        run.block(f"{prefix}.head", ctx.blocks.head_bwd)
    for layer in reversed(range(ctx.first_layer, ctx.first_layer + ctx.num_layers)):
        if ctx.full_recompute:
            run.block(f"{prefix}.L{layer}.recompute", ctx.blocks.layer_fwd)
        run.block(f"{prefix}.L{layer}", ctx.blocks.layer_bwd)
        if buckets is not None and buckets.fills(ctx.layer_grad_bytes):
            run.flush()  # the bucket's sync waits on exactly this layer's gradients
        if buckets is not None:
            buckets.add(ctx.layer_grad_bytes, f"L{layer}")
    if first:
        run.block(f"{prefix}.embed", ctx.blocks.embedding_bwd)
    deps = run.flush()
    if not first:
        graph.p2p(
            f"{prefix}.send_grad", SEND, "prev", p2p_tag(ctx.stage - 1, mb, True), ctx.activation_bytes, deps
        )


class _GradientBuckets:
    """Data-parallel gradient sync in buckets issued as the last backward produces them (overlapped)."""

    def __init__(self, graph: RankGraph, ctx: RankContext) -> None:
        self.graph, self.ctx = graph, ctx
        self.pending = 0.0
        self.issued: list[tuple[int, float]] = []  # (node id, gradient bytes)

    def fills(self, grad_bytes: float) -> bool:
        return self.ctx.has_dp_group and self.pending + grad_bytes >= self.ctx.grad_bucket_bytes

    def add(self, grad_bytes: float, label: str) -> None:
        self.pending += grad_bytes
        if self.pending >= self.ctx.grad_bucket_bytes:
            self.flush(label)

    def flush(self, label: str) -> None:
        if self.pending <= 0 or not self.ctx.has_dp_group:
            self.pending = 0.0
            return
        kind = "reduce_scatter" if self.ctx.distributed_optimizer else "all_reduce"
        node = self.graph.collective(
            f"dp.grad_{kind}.{label}", kind, self.pending, "dp", self.ctx.dp_size, [self.graph.last_compute]
        )
        self.issued.append((node, self.pending))
        self.pending = 0.0


def _finish_iteration(graph: RankGraph, ctx: RankContext, buckets: _GradientBuckets) -> None:
    buckets.add(ctx.extra_grad_bytes, "embedding_head")
    buckets.flush("tail")
    waits = [node for node, _ in buckets.issued]
    if ctx.has_embedding_group:
        waits.append(
            graph.collective(
                "embedding.grad_all_reduce",
                "all_reduce",
                ctx.embedding_grad_bytes,
                "embedding",
                2,
                [graph.last_compute],
            )
        )
    step = ctx.blocks.optimizer.segment(ctx.params_on_rank, ctx.optimizer_shards)
    last = graph.compute("optimizer.step", step, waits)
    if ctx.distributed_optimizer and ctx.has_dp_group:
        for node, grad_bytes in buckets.issued:
            graph.collective(
                f"dp.param_all_gather.{graph.nodes[node].name.rsplit('.', 1)[-1]}",
                "all_gather",
                grad_bytes * ctx.param_bytes_per_grad_byte,
                "dp",
                ctx.dp_size,
                [last],
            )
