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
from astra_hetero.workload.costs import (
    Collective,
    Op,
    Shape,
    embedding_backward,
    embedding_forward,
    head_backward,
    head_forward,
    layer_backward,
    layer_forward,
)
from astra_hetero.workload.layout import Layout
from astra_hetero.workload.timing import DeviceCostModel


@dataclass(frozen=True)
class Partition:
    layers_per_stage: tuple[int, ...]
    micro_batches_per_replica: tuple[int, ...]

    def layer_range(self, stage: int) -> tuple[int, int]:
        start = sum(self.layers_per_stage[:stage])
        return start, start + self.layers_per_stage[stage]


def ops_time_ns(cost: DeviceCostModel, ops: Sequence[Op | Collective], phase: str, x: Shape) -> float:
    return sum(cost.time_ns(op, phase, x) for op in ops if isinstance(op, Op))


def stage_costs(cost: DeviceCostModel, x: Shape, recompute: str, stage: int, pp: int) -> tuple[float, float]:
    """(time per layer, fixed extra time) for one micro-batch, forward plus backward, on one device."""
    per_layer = ops_time_ns(cost, layer_forward(x), "fwd", x) + ops_time_ns(
        cost, layer_backward(x, recompute), "bwd", x
    )
    if recompute == "full":
        per_layer += ops_time_ns(cost, layer_forward(x), "fwd", x)
    extra = 0.0
    if stage == 0:
        extra += ops_time_ns(cost, embedding_forward(x), "fwd", x) + ops_time_ns(
            cost, embedding_backward(x), "bwd", x
        )
    if stage == pp - 1:
        extra += ops_time_ns(cost, head_forward(x), "fwd", x) + ops_time_ns(cost, head_backward(x), "bwd", x)
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
    x: Shape,
    cost_for: Callable[[int], DeviceCostModel],
    max_layers: Callable[[int], int] | None = None,
) -> Partition:
    """`cost_for(rank)` gives the cost model of the GPU at that rank; `max_layers(stage)` the most
    layers that fit in the memory of every device serving that stage (auto never exceeds it)."""
    par, model = spec.parallelism, spec.model
    per_stage = [
        max(
            (
                stage_costs(cost_for(layout.rank_of(s, r, 0)), x, par.recompute, s, par.pp)
                for r in range(par.dp)
            ),
            key=lambda c: c[0] + c[1],
        )
        for s in range(par.pp)
    ]
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
        bottleneck = []
        for r in range(par.dp):
            stage_times = [
                n * pl + ex
                for n, (pl, ex) in zip(
                    layers,
                    (
                        stage_costs(cost_for(layout.rank_of(s, r, 0)), x, par.recompute, s, par.pp)
                        for s in range(par.pp)
                    ),
                    strict=True,
                )
            ]
            bottleneck.append(max(stage_times))
        batches = greedy_min_max(total_mb, bottleneck, [0.0] * par.dp, [par.pp - 1] * par.dp) or []
    else:
        batches = [total_mb // par.dp] * par.dp
    return Partition(tuple(layers), tuple(batches))
