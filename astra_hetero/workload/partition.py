"""Non-uniform work: layers per pipeline stage (and per model chunk) and micro-batches per replica.

With virtual stages (v model chunks per stage) chunk c of stage s is virtual stage g = c·pp + s and
holds the g-th run of consecutive layers: the model runs through stages 0..pp−1 with chunk 0, then
again with chunk 1, and so on (Megatron-LM's layout order). The embedding belongs to virtual stage 0
(chunk 0 of stage 0), the LM head and loss to the last one (chunk v−1 of stage pp−1).

`auto` balances by device capability with the cost model: it minimises the slowest stage (layers) or
the slowest replica (micro-batches) by handing out one unit at a time to whichever member would finish
soonest with it; for costs of the form n·c + e this greedy is optimal. With virtual stages it first
balances the stages' totals, then splits each stage's layers over its chunks so that the chunks take
equal time (the chunk holding the embedding or the head gets fewer layers when those cost more than a
layer), and hands out micro-batches in whole groups of pp, as the interleaved schedule needs.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from astra_hetero.errors import InfeasiblePlan
from astra_hetero.spec.schema import ParallelismSpec, Spec
from astra_hetero.workload.blocks import Block, DeviceBlocks, Segment, TimedGroup
from astra_hetero.workload.layout import Layout


@dataclass(frozen=True)
class Partition:
    layers_per_stage: tuple[int, ...]
    micro_batches_per_replica: tuple[int, ...]
    # layers_per_chunk[stage][chunk]; defaults to one chunk per stage holding the stage's layers
    layers_per_chunk: tuple[tuple[int, ...], ...] = field(default=())

    def __post_init__(self) -> None:
        if not self.layers_per_chunk:
            object.__setattr__(self, "layers_per_chunk", tuple((n,) for n in self.layers_per_stage))
        if tuple(sum(row) for row in self.layers_per_chunk) != tuple(self.layers_per_stage):
            raise ValueError(f"chunk sizes {self.layers_per_chunk} do not add up to {self.layers_per_stage}")

    @property
    def num_stages(self) -> int:
        return len(self.layers_per_stage)

    @property
    def num_chunks(self) -> int:
        return len(self.layers_per_chunk[0])

    @property
    def layers_per_virtual_stage(self) -> tuple[int, ...]:
        """Layers of virtual stage g = chunk·pp + stage, in model order."""
        return tuple(
            self.layers_per_chunk[s][c] for c in range(self.num_chunks) for s in range(self.num_stages)
        )

    def chunk_range(self, stage: int, chunk: int) -> tuple[int, int]:
        virtual = chunk * self.num_stages + stage
        start = sum(self.layers_per_virtual_stage[:virtual])
        return start, start + self.layers_per_chunk[stage][chunk]

    def chunk_ranges(self, stage: int) -> tuple[tuple[int, int], ...]:
        return tuple(self.chunk_range(stage, c) for c in range(self.num_chunks))

    def layer_range(self, stage: int) -> tuple[int, int]:
        """First layer of the stage and one past its last (contiguous only with one chunk per stage)."""
        ranges = self.chunk_ranges(stage)
        return ranges[0][0], ranges[-1][1]


def block_time_ns(block: Block) -> float:
    """The block's compute (a concurrent group's included)."""
    return sum(
        item.time_ns if isinstance(item, Segment) else item.compute_ns
        for item in block
        if isinstance(item, Segment | TimedGroup)
    )


@dataclass(frozen=True)
class PassCosts:
    """What one micro-batch costs one device, forward plus backward, per piece of the model."""

    per_layer: float
    embedding: float
    head: float


def pass_costs(blocks: DeviceBlocks, full_recompute: bool) -> PassCosts:
    # layers of several kinds (sliding-window patterns) are charged at their mean over the model
    per_layer = sum(
        share * (block_time_ns(fwd) * (2 if full_recompute else 1) + block_time_ns(bwd))
        for (fwd, bwd), share in blocks.layer_mix()
    )
    return PassCosts(
        per_layer,
        block_time_ns(blocks.embedding_fwd) + block_time_ns(blocks.embedding_bwd),
        block_time_ns(blocks.head_fwd) + block_time_ns(blocks.head_bwd),
    )


def stage_costs(blocks: DeviceBlocks, stage: int, pp: int, full_recompute: bool) -> tuple[float, float]:
    """(time per layer, fixed extra time) for one micro-batch, forward plus backward, on one device."""
    costs = pass_costs(blocks, full_recompute)
    return costs.per_layer, _extra(costs, stage == 0, stage == pp - 1)


def _extra(costs: PassCosts, first: bool, last: bool) -> float:
    return (costs.embedding if first else 0.0) + (costs.head if last else 0.0)


def greedy_min_max(
    total: int,
    unit_cost: Sequence[float],
    fixed: Sequence[float],
    offset: Sequence[float] | None = None,
    cap: Sequence[int] | None = None,
    floor: int = 1,
) -> list[int] | None:
    """Integers floor ≤ n_i ≤ cap_i summing to `total` that minimise max_i (n_i + offset_i)·unit_i + fixed_i.

    Returns None when the caps cannot hold `total` (or `total` cannot give every member `floor`).
    """
    offset = offset or [0.0] * len(unit_cost)
    cap = cap or [total] * len(unit_cost)
    counts = [floor] * len(unit_cost)
    if any(c < floor for c in cap) or sum(cap) < total or sum(counts) > total:
        return None

    def finish(i: int, n: int) -> float:
        return (n + offset[i]) * unit_cost[i] + fixed[i]

    # each step gives one more to the member that would finish first with it (ties: the lowest
    # index); a heap of (that finish, index) over the members below their caps picks it
    heap = [(finish(i, counts[i] + 1), i) for i in range(len(counts)) if counts[i] < cap[i]]
    heapq.heapify(heap)
    for _ in range(total - sum(counts)):
        _, best = heapq.heappop(heap)
        counts[best] += 1
        if counts[best] < cap[best]:
            heapq.heappush(heap, (finish(best, counts[best] + 1), best))
    return counts


def even_split(total: int, parts: int) -> list[int]:
    """Uniform split; any remainder goes to the middle stages, which carry neither embedding nor head."""
    base, extra = divmod(total, parts)
    counts = [base] * parts
    order = sorted(range(parts), key=lambda i: (i in (0, parts - 1), i))
    for i in order[:extra]:
        counts[i] += 1
    return counts


def split_into_chunks(num_layers: int, stage: int, par: ParallelismSpec, costs: PassCosts) -> list[int]:
    """A stage's layers over its chunks, so that the chunks take equal time on the stage's device."""
    v = par.virtual_stages
    fixed = [_extra(costs, stage == 0 and c == 0, stage == par.pp - 1 and c == v - 1) for c in range(v)]
    counts = greedy_min_max(num_layers, [costs.per_layer] * v, fixed)
    if counts is None:
        raise InfeasiblePlan("partition.layers", f"stage {stage}: {num_layers} layers cannot fill {v} chunks")
    return counts


def replicas_in_lockstep(par: ParallelismSpec) -> bool:
    """Whether the replicas must run the same micro-batches: their collectives span replicas inside
    every pass (an expert group wider than a cell) or after every micro-batch (ZeRO-2 and -3 reduce
    each micro-batch's gradients), so unequal counts would leave some ranks waiting forever."""
    return par.ep * par.expert_tp > par.model_parallel_cell or par.sharding_stage >= 2


def micro_batch_group(par: ParallelismSpec) -> int:
    """Granularity of a replica's micro-batch count: the interleaved schedule needs multiples of pp."""
    return par.pp if par.virtual_stages > 1 else 1


def build_partition(
    spec: Spec,
    layout: Layout,
    blocks_for: Callable[[int], DeviceBlocks],
    max_layers: Callable[[int], int] | None = None,
) -> Partition:
    """`blocks_for(rank)` gives the timed blocks of the GPU at that rank; `max_layers(stage)` the most
    layers that fit in the memory of every device serving that stage (auto never exceeds it)."""
    par = spec.parallelism
    full = par.recompute == "full"
    # costs[stage][replica]: what one micro-batch costs that cell's GPU type
    costs = [
        [pass_costs(blocks_for(layout.rank_of(s, r, 0)), full) for r in range(par.dp)] for s in range(par.pp)
    ]
    # the slowest device serving each stage sets its pace
    per_stage = [
        max(row, key=lambda c, s=s: c.per_layer + _extra(c, s == 0, s == par.pp - 1))
        for s, row in enumerate(costs)
    ]
    chunks = _layer_split(spec, per_stage, max_layers)
    layers = [sum(row) for row in chunks]
    return Partition(tuple(layers), tuple(_micro_batch_split(spec, costs, layers)), tuple(map(tuple, chunks)))


def _layer_split(
    spec: Spec, per_stage: list[PassCosts], max_layers: Callable[[int], int] | None
) -> list[list[int]]:
    """layers[stage][chunk] from the spec's `partition.layers`."""
    par, num_layers = spec.parallelism, spec.model.num_layers
    pp, v = par.pp, par.virtual_stages
    layers_spec = spec.partition.layers
    if isinstance(layers_spec, list) and layers_spec and isinstance(layers_spec[0], list):
        return [list(row) for row in layers_spec]  # type: ignore[arg-type]
    if isinstance(layers_spec, list) and len(layers_spec) == pp * v and v > 1:
        return [[int(layers_spec[c * pp + s]) for c in range(v)] for s in range(pp)]  # type: ignore[arg-type]
    if isinstance(layers_spec, list):
        totals = [int(n) for n in layers_spec]  # type: ignore[arg-type]
    elif layers_spec == "auto":
        caps = [max_layers(s) for s in range(pp)] if max_layers else None
        extras = [_extra(c, s == 0, s == pp - 1) for s, c in enumerate(per_stage)]
        balanced = greedy_min_max(num_layers, [c.per_layer for c in per_stage], extras, cap=caps, floor=v)
        if balanced is None:
            raise InfeasiblePlan(
                "partition.layers",
                f"no split of {num_layers} layers over {pp} stages ({v} chunks each) fits in device "
                f"memory (at most {caps} layers per stage)",
            )
        totals = balanced
    elif v > 1:  # uniform: Megatron-LM's equal layers per virtual stage (checked when loading)
        return [[num_layers // (pp * v)] * v for _ in range(pp)]
    else:
        totals = even_split(num_layers, pp)
    return [split_into_chunks(n, s, par, per_stage[s]) for s, n in enumerate(totals)]


def _micro_batch_split(spec: Spec, costs: list[list[PassCosts]], layers: list[int]) -> list[int]:
    par = spec.parallelism
    total_mb = par.global_batch_size // par.micro_batch_size
    batches_spec = spec.partition.micro_batches
    if isinstance(batches_spec, list):
        return list(batches_spec)
    if batches_spec != "auto" or replicas_in_lockstep(par):
        return [total_mb // par.dp] * par.dp
    group = micro_batch_group(par)
    bottleneck = [
        max(
            n * costs[s][r].per_layer + _extra(costs[s][r], s == 0, s == par.pp - 1)
            for s, n in enumerate(layers)
        )
        for r in range(par.dp)
    ]
    # a replica's time ≈ (its micro-batches + pipeline fill) × its slowest stage; the interleaved
    # schedule fills in (pp − 1)/v micro-batches' time instead of pp − 1
    fill = (par.pp - 1) / par.virtual_stages / group
    groups = greedy_min_max(
        total_mb // group, [group * b for b in bottleneck], [0.0] * par.dp, [fill] * par.dp
    )
    return [n * group for n in groups or []]
