"""Per-GPU-type times the estimate and the bounds are made of, from the generator's own timed blocks.

Compute comes from exactly the blocks the traces are written from (`generate.timed_blocks`), so a
change to the cost model changes the planner's ranking with it. A block's TP collectives sit on the
rank's compute chain; each counts at its time alone on the cell's links under the spec's communication
model (`planner.comm`), which is what the engine charges it when nothing else crosses those links (TP
traffic stays inside a node) and never more than it charges.

A pass that ends in TP collectives (a forward through a layer ends with its all-reduce, the loss with
its per-token ones) holds the rank only until its last compute: in the traces the rank's next pass
waits for that compute, while the send to the next stage waits for the collectives too. A pass's
`tail` is that trailing communication.

A concurrent group (ring attention, TP collectives overlapped with their GEMMs) takes the longer of
its compute, which runs one kernel at a time, and its critical path, each node at its price. Where the
prices are each operation's time alone (or nothing), that is a lower bound as well: the bounds price
only TP collectives (a cell's own links) and leave the other groups' communication (expert, context
parallel) at zero, the estimates price those on a representative group of the GPU class.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from astra_hetero.workload.blocks import Block, DeviceBlocks, OptimizerCost, Segment, TimedGroup
from astra_hetero.workload.costs import Collective
from astra_hetero.workload.host import NO_HOST, HostCosts
from astra_hetero.workload.ops import Transfer

# one collective of the rank's group for its role, or one ring transfer, alone (ns)
CollectiveTime = Callable[[Collective | Transfer], float]


@dataclass(frozen=True)
class BlockTime:
    total: float  # compute and TP collectives
    tail: float  # collectives after the block's last compute (all of it when it has none)
    has_compute: bool

    @classmethod
    def of(cls, block: Block, collective_ns: CollectiveTime) -> BlockTime:
        total = tail = 0.0
        has_compute = False
        for item in block:
            if isinstance(item, Segment):
                total += item.time_ns
                tail, has_compute = 0.0, True
            elif isinstance(item, Collective):
                time_ns = collective_ns(item)
                total += time_ns
                tail += time_ns
            elif isinstance(item, TimedGroup):
                span, group_tail = group_time(item, collective_ns)
                total += span
                tail = group_tail if item.compute_ns > 0 else tail + span
                has_compute = has_compute or item.compute_ns > 0
        return cls(total, tail, has_compute)

    @classmethod
    def mean(cls, weighted: Sequence[tuple[BlockTime, float]]) -> BlockTime:
        """The share-weighted mean of blocks (one block: itself)."""
        if len(weighted) == 1:
            return weighted[0][0]
        return cls(
            sum(b.total * w for b, w in weighted),
            sum(b.tail * w for b, w in weighted),
            any(b.has_compute for b, _ in weighted),
        )


def group_time(group: TimedGroup, collective_ns: CollectiveTime) -> tuple[float, float]:
    """(time, communication after its last compute) of a concurrent group: the longer of its
    critical path and its compute (one kernel at a time, in node order)."""
    finish: list[float] = []
    compute_end = busy = 0.0
    for node, waits in zip(group.nodes, group.deps, strict=True):
        start = max((finish[w] for w in waits), default=0.0)
        if isinstance(node, Segment):
            start = max(start, busy)  # the GPU runs its kernels one after another
            busy = start + node.time_ns
            finish.append(busy)
            compute_end = busy
        else:
            finish.append(start + collective_ns(node))
    span = max([finish[e] for e in group.exits] + [busy])
    return span, span - compute_end


def pass_time(blocks: Sequence[tuple[BlockTime, int]]) -> tuple[float, float]:
    """(total, tail) of a pass running each block the given number of times, in order."""
    total = sum(b.total * n for b, n in blocks)
    tail = 0.0
    for block, count in reversed(blocks):
        if count == 0:
            continue
        if block.has_compute:
            return total, tail + block.tail
        tail += block.total * count
    return total, tail


@dataclass(frozen=True)
class ClassTimes:
    """One TP rank of one GPU type under one set of options, per micro-batch (ns)."""

    layer_fwd: BlockTime
    layer_bwd: BlockTime
    recompute: bool  # full recomputation: a layer's forward again before its backward
    first_fwd: BlockTime  # embedding (first virtual stage)
    first_bwd: BlockTime
    last_fwd: BlockTime  # final norm, LM head, loss (last virtual stage)
    last_bwd: BlockTime
    optimizer: OptimizerCost  # the optimizer step, affine in the rank's parameters
    host: HostCosts = NO_HOST  # the framework's fixed costs per micro-batch and iteration

    @property
    def layer(self) -> float:
        """One layer's forward and backward (recomputation included)."""
        return self.layer_fwd.total * (2 if self.recompute else 1) + self.layer_bwd.total

    def forward(self, num_layers: int, first: bool, last: bool) -> tuple[float, float]:
        """(total, tail) of one micro-batch's forward pass through a chunk of `num_layers` layers."""
        return pass_time(
            [(self.first_fwd, int(first)), (self.layer_fwd, num_layers), (self.last_fwd, int(last))]
        )

    def backward(self, num_layers: int, first: bool, last: bool) -> tuple[float, float]:
        layer = [(self.layer_fwd, 1)] if self.recompute else []
        layers = [item for _ in range(num_layers) for item in (*layer, (self.layer_bwd, 1))]
        return pass_time([(self.last_bwd, int(last)), *layers, (self.first_bwd, int(first))])

    def layer_backward_ns(self) -> float:
        """One layer's share of a backward pass (recomputation included)."""
        return self.layer_bwd.total + (self.layer_fwd.total if self.recompute else 0.0)


def class_times(blocks: DeviceBlocks, collective_ns: CollectiveTime, full_recompute: bool) -> ClassTimes:
    def timed(block: Block) -> BlockTime:
        return BlockTime.of(block, collective_ns)

    mix = blocks.layer_mix()  # layers of several kinds: their mean over the model
    return ClassTimes(
        layer_fwd=BlockTime.mean([(timed(fwd), share) for (fwd, _), share in mix]),
        layer_bwd=BlockTime.mean([(timed(bwd), share) for (_, bwd), share in mix]),
        recompute=full_recompute,
        first_fwd=timed(blocks.embedding_fwd),
        first_bwd=timed(blocks.embedding_bwd),
        last_fwd=timed(blocks.head_fwd),
        last_bwd=timed(blocks.head_bwd),
        optimizer=blocks.optimizer,
        host=blocks.host,
    )
