"""What the planner's estimate adds to a stage's passes for the newer parallelisms: the expert groups a
candidate's layout forms (they may span replicas, nodes and GPU classes, so a class's representative
group would misprice their all-to-alls), and ZeRO-2/3's data-parallel stream, which runs beside every
micro-batch (ZeRO-2 reduce-scatters each backward pass's buckets; ZeRO-3 gathers every unit before its
forward and its backward and reduce-scatters its gradients). Estimates only: the bounds leave these out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from astra_hetero.planner.context import OptionContext
from astra_hetero.planner.pipeline import Passes
from astra_hetero.planner.sync import Bucket
from astra_hetero.workload.comm_groups import expert_groups

Members = tuple[tuple[int, ...], ...]


class CellLike(Protocol):
    device_class: int
    ranks: tuple[int, ...]


class TimedPlan(Protocol):
    """The candidate's pieces the estimate has worked out (`estimate._Timed`)."""

    ctx: OptionContext
    pp: int
    chunks: list[tuple[int, ...]]

    def dp_members(self, s: int) -> Members: ...
    def buckets(self, s: int, k: int) -> tuple[tuple[Bucket, ...], ...]: ...
    def collective(self, members: Members, kind: str, buffer_bytes: float, together: bool) -> float: ...


def expert_members(
    ctx: OptionContext, row: Sequence[CellLike], k: int
) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """The expert groups (by role) of the first cell of class k in a stage (`row`: its cells)."""
    par = ctx.parallelism
    if ctx.problem.base.model.moe is None or par.ep * par.expert_tp <= 1:
        return ()
    ranks = [r for cell in row for r in cell.ranks]
    first = next(c.ranks[0] for c in row if c.device_class == k)
    found = {role: tuple(g) for role, g in expert_groups(ranks, par) if first in g}
    return tuple(sorted(found.items()))


def with_zero2_stream(plan: TimedPlan, s: int, k: int, passes: Passes) -> Passes:
    """Each backward pass reduce-scatters its buckets beside the passes that follow: the stream paces
    a micro-batch's forward and backward where it outlasts them."""
    members = plan.dp_members(s)
    streams = [
        sum(plan.collective(members, "reduce_scatter", b.grad_bytes, True) for b in chunk)
        for chunk in plan.buckets(s, k)
    ]
    bwd = tuple(max(b, stream - f) for f, b, stream in zip(passes.fwd, passes.bwd, streams, strict=True))
    return Passes(passes.fwd, passes.fwd_tail, bwd, passes.bwd_tail)


def with_zero3_stream(plan: TimedPlan, s: int, passes: Passes) -> Passes:
    """Every unit is gathered before its forward and its backward (the next one while it computes)
    and reduce-scattered after its backward: a pass takes the longer of its compute and its stream,
    plus the first gather, which nothing hides."""
    ctx, members = plan.ctx, plan.dp_members(s)
    layer, head, embedding = ctx.unit_grad_bytes(s)
    to_param = ctx.dtypes.param_bytes / ctx.grad_width

    def gather(grad_bytes: float) -> float:
        return plan.collective(members, "all_gather", grad_bytes * to_param, True) if grad_bytes else 0.0

    def scatter(grad_bytes: float) -> float:
        return plan.collective(members, "reduce_scatter", grad_bytes, True) if grad_bytes else 0.0

    chunks = plan.chunks[s]
    fwd, bwd = list(passes.fwd), list(passes.bwd)
    for c, layers in enumerate(chunks):
        units = [layer] * layers + [head] * (s == plan.pp - 1 and c == len(chunks) - 1)
        units = [embedding] * (s == 0 and c == 0) + units
        gathers = [gather(u) for u in units]
        stream_fwd = sum(gathers)
        stream_bwd = stream_fwd + sum(scatter(u) for u in units)
        first = gathers[0] if gathers else 0.0
        fwd[c] = max(fwd[c], stream_fwd) + first
        bwd[c] = max(bwd[c], stream_bwd) + first
    return Passes(tuple(fwd), passes.fwd_tail, tuple(bwd), passes.bwd_tail)
