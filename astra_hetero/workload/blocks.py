"""Operators fused into trace-sized compute segments, timed per GPU type.

Consecutive operators between two collectives (and within one layer) become one Chakra compute node:
ASTRA-sim's `duration_micros` has microsecond resolution, and per-operator nodes would multiply the
trace size five-fold without changing what the simulators can see.
"""

from __future__ import annotations

from dataclasses import dataclass

from astra_hetero.workload.costs import (
    Collective,
    LayerStep,
    Op,
    Shape,
    embedding_backward,
    embedding_forward,
    head_backward,
    head_forward,
    layer_backward,
    layer_forward,
)
from astra_hetero.workload.timing import DeviceCostModel


@dataclass(frozen=True)
class Segment:
    label: str
    flops: float
    bytes: float
    time_ns: float


Block = tuple[Segment | Collective, ...]


def fuse(steps: list[LayerStep], phase: str, cost: DeviceCostModel, x: Shape) -> Block:
    out: list[Segment | Collective] = []
    pending: list[Op] = []

    def flush() -> None:
        if pending:
            label = pending[0].name if len(pending) == 1 else f"{pending[0].name}..{pending[-1].name}"
            out.append(
                Segment(
                    label,
                    sum(o.flops for o in pending),
                    sum(o.bytes for o in pending),
                    sum(cost.time_ns(o, phase, x) for o in pending),
                )
            )
            pending.clear()

    for step in steps:
        if isinstance(step, Collective):
            flush()
            out.append(step)
        else:
            pending.append(step)
    flush()
    return tuple(out)


@dataclass(frozen=True)
class DeviceBlocks:
    """Every block a rank of one GPU type may execute, fused and timed once."""

    layer_fwd: Block
    layer_bwd: Block
    embedding_fwd: Block
    embedding_bwd: Block
    head_fwd: Block
    head_bwd: Block
    optimizer_step_ns_per_param: float


def device_blocks(cost: DeviceCostModel, x: Shape, recompute: str) -> DeviceBlocks:
    # Adam step per parameter: read grad, master, m, v (16 B), write master, m, v, BF16 weight (14 B).
    optimizer = cost.time_ns(Op("optimizer_step", 10.0, 30.0), "step", x)
    return DeviceBlocks(
        layer_fwd=fuse(layer_forward(x), "fwd", cost, x),
        layer_bwd=fuse(layer_backward(x, recompute), "bwd", cost, x),
        embedding_fwd=fuse(list(embedding_forward(x)), "fwd", cost, x),
        embedding_bwd=fuse(list(embedding_backward(x)), "bwd", cost, x),
        head_fwd=fuse(list(head_forward(x)), "fwd", cost, x),
        head_bwd=fuse(list(head_backward(x)), "bwd", cost, x),
        optimizer_step_ns_per_param=optimizer,
    )
