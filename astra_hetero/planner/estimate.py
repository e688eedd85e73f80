"""A fast estimate of a candidate's iteration time, and a lower bound that no simulation can beat.

Both read the same per-cell times: F and B, one micro-batch's forward and backward on one TP rank of
the cell (compute plus the layer's TP collectives, which sit on the rank's compute chain).

Estimate (ranks candidates): per replica, the pipeline's fill and drain (every stage once, plus the
activation transfers) and (m − 1) rounds of its slowest stage; then each stage's data-parallel
gradient sync, which starts during its last backward pass and may outlast the pipeline; then the
optimizer step (and, with the distributed optimizer, the parameter all-gather).

Lower bound (branch and bound): a rank computes, one node at a time, every micro-batch's F and B of
its stage plus its optimizer step; before its first forward the first micro-batch must have passed
every earlier stage, and after its last backward that gradient must pass back through them. TP
collectives count at their bandwidth floor, everything else that takes time (data-parallel sync,
pipeline transfers, latency, reductions) counts as zero — so the bound holds for any network model.
"""

from __future__ import annotations

from dataclasses import dataclass

from astra_hetero.planner.context import OptionContext
from astra_hetero.planner.costs import Links, ring_ns
from astra_hetero.workload.costs import BYTES_BF16

# The engine rounds each rank's cumulative compute to the microsecond (±0.5 µs per rank).
_ROUNDING_NS_PER_STAGE = 1000.0


@dataclass(frozen=True)
class Cell:
    device_class: int
    node: int  # the node of its TP-index-0 GPU


@dataclass(frozen=True)
class Assessment:
    estimate_ns: float
    bound_ns: float


def assess(
    ctx: OptionContext, cells: list[list[Cell]], layers: tuple[int, ...], micro_batches: tuple[int, ...]
) -> Assessment:
    pp, dp = len(cells), len(cells[0])
    fwd = [[0.0] * dp for _ in range(pp)]
    bwd = [[0.0] * dp for _ in range(pp)]
    fwd_floor = [[0.0] * dp for _ in range(pp)]
    bwd_floor = [[0.0] * dp for _ in range(pp)]
    optimizer = [[0.0] * dp for _ in range(pp)]
    for s in range(pp):
        for r in range(dp):
            times = _cell_times(ctx, s, layers[s], cells[s][r].device_class)
            fwd[s][r], bwd[s][r], fwd_floor[s][r], bwd_floor[s][r], optimizer[s][r] = times
    bound = max(
        _replica_bound(
            ctx,
            [fwd_floor[s][r] for s in range(pp)],
            [bwd_floor[s][r] for s in range(pp)],
            [optimizer[s][r] for s in range(pp)],
            micro_batches[r],
        )
        for r in range(dp)
    )
    estimate = _estimate(ctx, cells, layers, micro_batches, fwd, bwd, [max(row) for row in optimizer])
    return Assessment(
        estimate_ns=max(estimate, bound), bound_ns=max(0.0, bound - _ROUNDING_NS_PER_STAGE * pp)
    )


def branch_bound(ctx: OptionContext, cells_per_class: dict[int, int]) -> float:
    """Below every plan of this shape and these options that puts `cells_per_class` cells on each
    device class, whatever its grid and splits: the micro-batches' layers are work units that the
    cells share at best perfectly, and one micro-batch must pass every layer, forward and backward,
    on the fastest class at best."""
    unit = {k: t.layer_fwd_floor + t.layer_bwd_floor for k, t in ctx.times.items() if cells_per_class.get(k)}
    layers = ctx.problem.base.model.num_layers
    shared = ctx.num_micro_batches * layers / sum(cells_per_class[k] / unit[k] for k in unit)
    latency = layers * min(unit.values())
    return max(0.0, max(shared, latency) - _ROUNDING_NS_PER_STAGE * ctx.shape.pp)


def _cell_times(
    ctx: OptionContext, stage: int, num_layers: int, device_class: int
) -> tuple[float, float, float, float, float]:
    """(F, B, F floor, B floor, optimizer step) of one micro-batch on a cell, memoised per context."""
    key = ("cell", stage, num_layers, device_class)
    found = ctx.memo.get(key)
    if found is None:
        t, last = ctx.times[device_class], ctx.shape.pp - 1
        extra_f = (t.first_fwd if stage == 0 else 0.0) + (t.last_fwd if stage == last else 0.0)
        extra_b = (t.first_bwd if stage == 0 else 0.0) + (t.last_bwd if stage == last else 0.0)
        found = ctx.memo[key] = (
            num_layers * t.layer_fwd + extra_f,
            num_layers * t.layer_bwd + extra_b,
            num_layers * t.layer_fwd_floor + extra_f,
            num_layers * t.layer_bwd_floor + extra_b,
            t.optimizer.segment(ctx.params_on_rank(stage, num_layers), _optimizer_shards(ctx)).time_ns,
        )
    return found  # type: ignore[return-value]


def _optimizer_shards(ctx: OptionContext) -> int:
    return ctx.shape.dp if ctx.parallelism.distributed_optimizer else 1


def _replica_bound(
    ctx: OptionContext, fwd: list[float], bwd: list[float], optimizer: list[float], m: int
) -> float:
    v = ctx.virtual_stages
    best, before_f, before_b = 0.0, 0.0, 0.0
    for s in range(len(fwd)):
        finish_own = before_f + m * (fwd[s] + bwd[s])
        best = max(best, finish_own + optimizer[s], finish_own + before_b + optimizer[0])
        before_f += fwd[s] / v
        before_b += bwd[s] / v
    return best


def _estimate(
    ctx: OptionContext,
    cells: list[list[Cell]],
    layers: tuple[int, ...],
    micro_batches: tuple[int, ...],
    fwd: list[list[float]],
    bwd: list[list[float]],
    optimizer: list[float],
) -> float:
    pp, dp, v = len(cells), len(cells[0]), ctx.virtual_stages
    pipeline = 0.0
    for r in range(dp):
        work = [fwd[s][r] + bwd[s][r] for s in range(pp)]
        transfers = sum(2 * _p2p_ns(ctx, cells[s][r], cells[s + 1][r]) for s in range(pp - 1))
        fill = sum(work) / v + transfers * v
        pipeline = max(pipeline, fill + (micro_batches[r] - 1) * max(work))
    finish = 0.0
    drained = 0.0  # backward time of the stages before s: stage s's last backward ends this early
    for s in range(pp):
        slowest_bwd = max(bwd[s])
        last_backward_end = pipeline - drained
        sync, gather = _dp_sync_ns(ctx, s, layers[s], cells[s])
        bucket = ctx.parallelism.dp_bucket_mib * 1024**2
        overlap = slowest_bwd * max(0.0, 1 - bucket / max(ctx.grad_bytes(s, layers[s]), 1.0))
        synced = max(last_backward_end, last_backward_end - overlap + sync)
        finish = max(finish, synced + optimizer[s] + gather)
        drained += slowest_bwd
    return finish


def _links(ctx: OptionContext, cell: Cell) -> Links:
    return ctx.links[cell.device_class]


def _p2p_ns(ctx: OptionContext, a: Cell, b: Cell) -> float:
    key = ("p2p", a.device_class, b.device_class, a.node == b.node)
    found = ctx.memo.get(key)
    if found is None:
        la, lb = _links(ctx, a), _links(ctx, b)
        if a.node == b.node:
            found = ctx.activation_bytes / la.fabric_bytes_per_ns + la.fabric_hop_ns
        else:
            rate = min(la.network_bytes_per_ns, lb.network_bytes_per_ns)
            found = ctx.activation_bytes / rate + max(la.network_hop_ns, lb.network_hop_ns)
        ctx.memo[key] = found
    return found  # type: ignore[return-value]


def _dp_sync_ns(ctx: OptionContext, stage: int, num_layers: int, members: list[Cell]) -> tuple[float, float]:
    key = ("dp", stage, num_layers, *members)
    found = ctx.memo.get(key)
    if found is None:
        found = ctx.memo[key] = _dp_sync(ctx, stage, num_layers, members)  # type: ignore[assignment]
    return found  # type: ignore[return-value]


def _dp_sync(ctx: OptionContext, stage: int, num_layers: int, members: list[Cell]) -> tuple[float, float]:
    """(gradient sync, parameter all-gather after the step) of one stage's data-parallel group, as the
    hierarchical algorithm runs it: inside each node, across nodes on 1/n of the data, inside again."""
    d = len(members)
    if d < 2:
        return 0.0, 0.0
    grads = ctx.grad_bytes(stage, num_layers)
    by_node: dict[int, int] = {}
    for cell in members:
        by_node[cell.node] = by_node.get(cell.node, 0) + 1
    links = [_links(ctx, c) for c in members]
    intra = min(lk.fabric_bytes_per_ns for lk in links), max(lk.fabric_hop_ns for lk in links)
    inter = min(lk.network_bytes_per_ns for lk in links), max(lk.network_hop_ns for lk in links)
    memory = min(lk.memory_bytes_per_ns for lk in links)
    n, k = max(by_node.values()), len(by_node)

    def collective(kind: str, size: float) -> float:
        if k == 1:
            return ring_ns(kind, size, d, *intra, memory)
        if n == 1 or len(set(by_node.values())) > 1:
            return ring_ns(kind, size, d, *inter, memory)
        local = ring_ns("reduce_scatter", size, n, *intra, memory)
        return (2 if kind == "all_reduce" else 1) * local + ring_ns(kind, size / n, k, *inter, memory)

    if not ctx.parallelism.distributed_optimizer:
        return collective("all_reduce", grads), 0.0
    params_bytes = grads * BYTES_BF16 / (4 if ctx.parallelism.grad_reduce_in_fp32 else BYTES_BF16)
    return collective("reduce_scatter", grads), collective("all_gather", params_bytes)
