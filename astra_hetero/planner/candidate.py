"""A candidate plan as a typed, hashable object, and its translation into a complete spec.

`grid[stage][replica]` names a node group (None everywhere: the default cluster-order mapping).
`options` holds the values of the searched fields (see `dimensions.DIMENSIONS`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from astra_hetero.errors import SpecError
from astra_hetero.planner.dimensions import describe_options, section_options, with_options
from astra_hetero.planner.shape import Shape
from astra_hetero.spec.load import spec_error_from_validation
from astra_hetero.spec.schema import MappingSpec, ParallelismSpec, PartitionSpec, Spec

Grid = tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class Plan:
    shape: Shape
    options: tuple[tuple[str, Any], ...]  # (option name, value), in dimension-table order
    grid: Grid | None
    layers: tuple[int, ...]
    micro_batches: tuple[int, ...]
    allow_idle: bool = False

    @property
    def tp(self) -> int:
        return self.shape.tp

    @property
    def pp(self) -> int:
        return self.shape.pp

    @property
    def dp(self) -> int:
        return self.shape.dp

    @property
    def cp(self) -> int:
        return self.shape.cp

    def option(self, name: str, default: Any = None) -> Any:
        return dict(self.options).get(name, default)

    def with_splits(self, layers: tuple[int, ...], micro_batches: tuple[int, ...]) -> Plan:
        return Plan(self.shape, self.options, self.grid, layers, micro_batches, self.allow_idle)

    @property
    def mapping_text(self) -> str:
        """`h100 a100 | a100 a100`: stages separated by `|`, replicas by spaces."""
        if self.grid is None:
            return "cluster order"
        return " | ".join(" ".join(row) for row in self.grid)

    @property
    def label(self) -> str:
        """`tp2·pp2·dp2 mbs=1 1f1b sp [h100 h100 | a100 a100] layers 7 1`."""
        return (
            f"{self.shape.label} {describe_options(self.options)} [{self.mapping_text}] "
            f"layers {' '.join(map(str, self.layers))}"
        )


def parallelism_for(base: Spec, shape: Shape, options: tuple[tuple[str, Any], ...]) -> ParallelismSpec:
    """The spec's parallelism section with the shape and options put in (validated: SpecError)."""
    own = section_options(options, "parallelism")
    degrees = {"tp": shape.tp, "pp": shape.pp, "dp": shape.dp, "cp": shape.cp}
    data = {**base.parallelism.model_dump(), **degrees, **own}
    try:
        return ParallelismSpec.model_validate(data)
    except ValidationError as exc:
        error = spec_error_from_validation(exc)
        raise SpecError(f"parallelism.{error.field}", error.reason) from None


def plan_spec(
    base: Spec, plan: Plan, parallelism: ParallelismSpec | None = None, partition: PartitionSpec | None = None
) -> Spec:
    """The complete spec of `plan`: `base` with its parallelism, mapping and partition replaced.

    Sections are validated one by one; the checks that span sections are the caller's (the spec
    loader's `check_consistency`, then the generator's memory check).
    """
    mapping = MappingSpec(
        grid=[list(row) for row in plan.grid] if plan.grid is not None else None,
        allow_idle_gpus=plan.allow_idle,
    )
    if partition is None:
        partition = PartitionSpec(layers=list(plan.layers), micro_batches=list(plan.micro_batches))
    parallelism = parallelism or parallelism_for(base, plan.shape, plan.options)
    spec = with_options(base, parallelism, plan.options)
    return spec.model_copy(update={"mapping": mapping, "partition": partition})
