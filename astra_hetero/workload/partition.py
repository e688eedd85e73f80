"""Non-uniform work: layers per pipeline stage and micro-batches per data-parallel replica.

`auto` balances by device capability with the cost model: it minimises the slowest stage (layers) or
the slowest replica (micro-batches) by handing out one unit at a time to whichever member would finish
soonest with it. For costs of the form n·c + e this greedy is optimal.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from astra_hetero.errors import InfeasiblePlan
from astra_hetero.spec.schema import Spec
from astra_hetero.workload.blocks import Block, DeviceBlocks, Segment
from astra_hetero.workload.layout import Layout


@dataclass(frozen=True)
class Partition:
    layers_per_stage: tuple[int, ...]
    micro_batches_per_replica: tuple[int, ...]

    def layer_range(self, stage: int) -> tuple[int, int]:
        start = sum(self.layers_per_stage[:stage])
        return start, start + self.layers_per_stage[stage]


def block_time_ns(block: Block) -> float:
    return sum(item.time_ns for item in block if isinstance(item, Segment))


def stage_costs(blocks: DeviceBlocks, stage: int, pp: int, full_recompute: bool) -> tuple[float, float]:
    """(time per layer, fixed extra time) for one micro-batch, forward plus backward, on one device."""
    per_layer = block_time_ns(blocks.layer_fwd) * (2 if full_recompute else 1) + block_time_ns(
        blocks.layer_bwd
    )
    extra = 0.0
    if stage == 0:
        extra += block_time_ns(blocks.embedding_fwd) + block_time_ns(blocks.embedding_bwd)
    if stage == pp - 1:
        extra += block_time_ns(blocks.head_fwd) + block_time_ns(blocks.head_bwd)
    return per_layer, extra


def greedy_min_max(
    total: int,
    unit_cost: Sequence[float],
    fixed: Sequence[float],
    offset: Sequence[float] | None = None,
    cap: Sequence[int] | None = None,
) -> list[int] | None:
    """Integers 1 ≤ n_i ≤ cap_i summing to `total` that minimise max_i (n_i + offset_i)·unit_i + fixed_i.

    Returns None when the caps cannot hold `total`.
    """
    offset = offset or [0.0] * len(unit_cost)
    cap = cap or [total] * len(unit_cost)
    counts = [1] * len(unit_cost)
    if any(c < 1 for c in cap) or sum(cap) < total:
        return None

    def finish(i: int, n: int) -> float:
        return (n + offset[i]) * unit_cost[i] + fixed[i]

    for _ in range(total - len(counts)):
        open_members = [i for i in range(len(counts)) if counts[i] < cap[i]]
        best = min(open_members, key=lambda i: (finish(i, counts[i] + 1), i))
        counts[best] += 1
    return counts


def even_split(total: int, parts: int) -> list[int]:
    """Uniform split; any remainder goes to the middle stages, which carry neither embedding nor head."""
    base, extra = divmod(total, parts)
    counts = [base] * parts
    order = sorted(range(parts), key=lambda i: (i in (0, parts - 1), i))
    for i in order[:extra]:
        counts[i] += 1
    return counts


def build_partition(
    spec: Spec,
    layout: Layout,
    blocks_for: Callable[[int], DeviceBlocks],
    max_layers: Callable[[int], int] | None = None,
) -> Partition:
    """`blocks_for(rank)` gives the timed blocks of the GPU at that rank; `max_layers(stage)` the most
    layers that fit in the memory of every device serving that stage (auto never exceeds it)."""
    par, model = spec.parallelism, spec.model
    full = par.recompute == "full"
    # costs[stage][replica]: what one micro-batch costs that cell's GPU type
    costs = [
        [stage_costs(blocks_for(layout.rank_of(s, r, 0)), s, par.pp, full) for r in range(par.dp)]
        for s in range(par.pp)
    ]
    per_stage = [max(row, key=lambda c: c[0] + c[1]) for row in costs]
    layers_spec = spec.partition.layers
    if isinstance(layers_spec, list):
        layers = list(layers_spec)
    elif layers_spec == "auto":
        caps = [max_layers(s) for s in range(par.pp)] if max_layers else None
        balanced = greedy_min_max(
            model.num_layers, [c[0] for c in per_stage], [c[1] for c in per_stage], cap=caps
        )
        if balanced is None:
            raise InfeasiblePlan(
                "partition.layers",
                f"no split of {model.num_layers} layers over {par.pp} "
                f"stages fits in device memory (at most {caps} layers per stage)",
            )
        layers = balanced
    else:
        layers = even_split(model.num_layers, par.pp)

    total_mb = par.global_batch_size // par.micro_batch_size
    batches_spec = spec.partition.micro_batches
    if isinstance(batches_spec, list):
        batches = list(batches_spec)
    elif batches_spec == "auto":
        bottleneck = [
            max(n * costs[s][r][0] + costs[s][r][1] for s, n in enumerate(layers)) for r in range(par.dp)
        ]
        batches = greedy_min_max(total_mb, bottleneck, [0.0] * par.dp, [par.pp - 1] * par.dp) or []
    else:
        batches = [total_mb // par.dp] * par.dp
    return Partition(tuple(layers), tuple(batches))
