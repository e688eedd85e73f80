"""What to time: the spec's own operators at its own shapes (and optionally more shapes, so that the
calibration table can interpolate between them)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from astra_hetero.spec.schema import Spec
from astra_hetero.workload.costs import (
    Op,
    Shape,
    embedding_backward,
    embedding_forward,
    head_backward,
    head_forward,
    layer_backward,
    layer_forward,
    optimizer_ops,
    shape_of,
)
from astra_hetero.workload.precision import Dtypes


@dataclass(frozen=True)
class ProfilePoint:
    op: Op
    phase: str  # "fwd" | "bwd" | "step"
    shape: Shape


def profile_points(
    spec: Spec, seq_lens: Sequence[int] = (), micro_batch_sizes: Sequence[int] = ()
) -> list[ProfilePoint]:
    """One point per operator the spec's run emits, per requested shape; optimizer-phase operators
    (sized per million parameters, independent of the shape) once."""
    base = shape_of(spec.model, spec.parallelism, spec.compute.attention, Dtypes.from_spec(spec))
    recompute = spec.parallelism.recompute
    points: list[ProfilePoint] = []
    for s in seq_lens or [base.s]:
        for b in micro_batch_sizes or [base.b]:
            x = replace(base, s=s, b=b)
            passes = {
                "fwd": [*embedding_forward(x), *layer_forward(x), *head_forward(x)],
                "bwd": [*head_backward(x), *layer_backward(x, recompute), *embedding_backward(x)],
            }
            for phase, steps in passes.items():
                seen: set[str] = set()
                for step in steps:
                    if isinstance(step, Op) and step.name not in seen:
                        seen.add(step.name)
                        points.append(ProfilePoint(step, phase, x))
    shard, full = optimizer_ops(base)
    points += [ProfilePoint(op, "step", base) for op in (*shard, *full)]
    return points
