"""Operators fused into trace-sized compute segments, timed per GPU type.

Consecutive operators between two collectives (and within one layer) become one Chakra compute node:
ASTRA-sim's `duration_micros` has microsecond resolution, and per-operator nodes would multiply the
trace size five-fold without changing what the simulators can see. A concurrent group (ring attention,
overlapped TP collectives) keeps its nodes apart, each operator or piece timed as its own segment.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from astra_hetero.workload.costs import (
    OPTIMIZER_UNIT_PARAMS,
    Collective,
    Concurrent,
    LayerStep,
    Op,
    Piece,
    Shape,
    embedding_backward,
    embedding_forward,
    head_backward,
    head_forward,
    layer_backward,
    layer_forward,
    optimizer_ops,
)
from astra_hetero.workload.host import NO_HOST, HostCosts
from astra_hetero.workload.ops import Transfer
from astra_hetero.workload.timing import DeviceCostModel
from astra_hetero.workload.tp_overlap import overlap_tp


@dataclass(frozen=True)
class Segment:
    label: str
    flops: float
    bytes: float
    time_ns: float


@dataclass(frozen=True)
class TimedGroup:
    """A concurrent group with its operators timed: node i waits for `deps[i]` (none: for what
    precedes the group); what follows waits for `exits`."""

    name: str
    nodes: tuple[Segment | Collective | Transfer, ...]
    deps: tuple[tuple[int, ...], ...]
    exits: tuple[int, ...]

    @property
    def compute_ns(self) -> float:
        return sum(n.time_ns for n in self.nodes if isinstance(n, Segment))


Block = tuple[Segment | Collective | TimedGroup, ...]


def _timed(
    group: Concurrent, phase: str, cost: DeviceCostModel, x: Shape, host: HostCosts = NO_HOST
) -> TimedGroup:
    nodes: list[Segment | Collective | Transfer] = []
    for node in group.nodes:
        if isinstance(node, Piece):
            whole = node.op
            nodes.append(
                Segment(
                    node.label,
                    whole.flops * node.fraction,
                    whole.bytes * node.fraction,
                    cost.time_ns(whole, phase, x) * node.fraction,
                )
            )
        elif isinstance(node, Op):
            time_ns = host.segment_ns(cost.time_ns(node, phase, x), node.kernels)
            nodes.append(Segment(node.name, node.flops, node.bytes, time_ns))
        else:
            nodes.append(node)
    return TimedGroup(group.name, tuple(nodes), group.deps, group.exits)


def fuse(
    steps: list[LayerStep], phase: str, cost: DeviceCostModel, x: Shape, host: HostCosts = NO_HOST
) -> Block:
    """The steps as segments of back-to-back kernels between collectives and concurrent groups; a
    segment takes the longer of its kernels' GPU time and their launches by `host`."""
    out: list[Segment | Collective | TimedGroup] = []
    pending: list[Op] = []

    def flush() -> None:
        if pending:
            label = pending[0].name if len(pending) == 1 else f"{pending[0].name}..{pending[-1].name}"
            gpu_ns = sum(cost.time_ns(o, phase, x) for o in pending)
            time_ns = host.segment_ns(gpu_ns, sum(o.kernels for o in pending))
            if time_ns > gpu_ns:
                label += " (launch-bound)"
            out.append(Segment(label, sum(o.flops for o in pending), sum(o.bytes for o in pending), time_ns))
            pending.clear()

    for step in steps:
        if isinstance(step, Collective):
            flush()
            out.append(step)
        elif isinstance(step, Concurrent):
            flush()
            out.append(_timed(step, phase, cost, x, host))
        else:
            pending.append(step)
    flush()
    return tuple(out)


@dataclass(frozen=True)
class OptimizerCost:
    """The iteration's closing work on one rank, affine in its parameter count: gradient norm (for
    clipping) and Adam step over the parameters it updates, gradient-buffer zeroing over all of them."""

    fixed_ns: float
    ns_per_updated_param: float
    ns_per_param: float
    flops_per_updated_param: float
    bytes_per_updated_param: float
    bytes_per_param: float

    def segment(self, params: float, shards: int) -> Segment:
        """`params` on the rank, of which 1/`shards` it updates (distributed optimizer: shards = dp)."""
        updated = params / shards
        return Segment(
            "optimizer_step",
            self.flops_per_updated_param * updated,
            self.bytes_per_updated_param * updated + self.bytes_per_param * params,
            self.fixed_ns + self.ns_per_updated_param * updated + self.ns_per_param * params,
        )


def optimizer_cost(cost: DeviceCostModel, x: Shape) -> OptimizerCost:
    shard, full = optimizer_ops(x)
    fixed = cost.model.rates.kernel_ns * sum(op.kernels for op in (*shard, *full))

    def per_param(ops: list[Op]) -> float:
        kernels_ns = cost.model.rates.kernel_ns * sum(op.kernels for op in ops)
        return max(sum(cost.time_ns(op, "step", x) for op in ops) - kernels_ns, 0.0) / OPTIMIZER_UNIT_PARAMS

    return OptimizerCost(
        fixed,
        per_param(shard),
        per_param(full),
        sum(op.flops for op in shard) / OPTIMIZER_UNIT_PARAMS,
        sum(op.bytes for op in shard) / OPTIMIZER_UNIT_PARAMS,
        sum(op.bytes for op in full) / OPTIMIZER_UNIT_PARAMS,
    )


LayerBlocks = tuple[Block, Block]  # (forward, backward)


@dataclass(frozen=True)
class DeviceBlocks:
    """Every block a rank of one GPU type may execute, fused and timed once.

    `layer_fwd`/`layer_bwd` are the first layer's; where layers differ (local and global attention
    layers of a sliding-window pattern) `other_layers` holds the blocks of each further kind and
    `layer_kinds` the kind of every model layer (0: the first layer's kind)."""

    layer_fwd: Block
    layer_bwd: Block
    embedding_fwd: Block
    embedding_bwd: Block
    head_fwd: Block
    head_bwd: Block
    optimizer: OptimizerCost
    other_layers: tuple[LayerBlocks, ...] = ()
    layer_kinds: tuple[int, ...] = ()
    host: HostCosts = NO_HOST  # the framework's fixed costs per micro-batch and iteration

    @property
    def micro_batch_segment(self) -> Segment | None:
        ns = self.host.micro_batch_ns
        return Segment("framework.micro_batch", 0.0, 0.0, ns) if ns > 0 else None

    @property
    def step_segment(self) -> Segment | None:
        ns = self.host.step_ns
        return Segment("framework.step", 0.0, 0.0, ns) if ns > 0 else None

    def layer(self, index: int) -> LayerBlocks:
        """(forward, backward) blocks of model layer `index`."""
        kind = self.layer_kinds[index] if self.layer_kinds else 0
        return (self.layer_fwd, self.layer_bwd) if kind == 0 else self.other_layers[kind - 1]

    def layer_mix(self) -> list[tuple[LayerBlocks, float]]:
        """Each kind's blocks with its share of the model's layers (one kind: share 1)."""
        kinds = [(self.layer_fwd, self.layer_bwd), *self.other_layers]
        if not self.layer_kinds:
            return [(kinds[0], 1.0)]
        n = len(self.layer_kinds)
        return [(blocks, self.layer_kinds.count(k) / n) for k, blocks in enumerate(kinds)]


def device_blocks(
    cost: DeviceCostModel,
    x: Shape,
    recompute: str,
    windows: tuple[int, ...] = (),
    host: HostCosts = NO_HOST,
) -> DeviceBlocks:
    """`windows`: each model layer's attention window (0: global); empty: every layer as `x`.
    `host`: the framework's launch cost per kernel and fixed costs (`host.py`)."""
    distinct = tuple(dict.fromkeys(windows)) or (x.window,)

    def overlap(steps: list[LayerStep]) -> list[LayerStep]:
        return overlap_tp(steps, x.tp_overlap_method, x.t) if x.tp_overlap else steps

    kinds = []
    for w in distinct:
        at = replace(x, window=w)
        kinds.append(
            (
                fuse(overlap(layer_forward(at)), "fwd", cost, at, host),
                fuse(overlap(layer_backward(at, recompute)), "bwd", cost, at, host),
            )
        )
    return DeviceBlocks(
        layer_fwd=kinds[0][0],
        layer_bwd=kinds[0][1],
        embedding_fwd=fuse(embedding_forward(x), "fwd", cost, x, host),
        embedding_bwd=fuse(embedding_backward(x), "bwd", cost, x, host),
        head_fwd=fuse(head_forward(x), "fwd", cost, x, host),
        head_bwd=fuse(head_backward(x), "bwd", cost, x, host),
        optimizer=optimizer_cost(cost, x),
        other_layers=tuple(kinds[1:]),
        layer_kinds=tuple(distinct.index(w) for w in windows) if len(distinct) > 1 else (),
        host=host,
    )
