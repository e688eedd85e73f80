"""The `search:` section of a plan spec: what the planner may vary, how hard it looks, what it prices.

Plan dimensions accept a scalar (fixed) or a list (the values allowed); left out, they take the
defaults of `dimensions.DIMENSIONS` (tp, pp and dp: every value that fits the cluster and model).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, PositiveFloat, PositiveInt, Tag, create_model, field_validator

from astra_hetero.planner.dimensions import Dimension, active_dimensions
from astra_hetero.spec.schema import Strict

NonNegative = Annotated[float, Field(ge=0)]

# Tags look like type names ("[" inside) so that error paths leave them out (spec.load._field_path).
_ONE, _LIST = "Value[one]", "Values[list]"


def one_or_list(value: Any) -> Any:
    """A dimension's setting: one value (fixed) or a non-empty list (the values allowed). Chosen by
    the form written, so that an error speaks of that form (`[0]` is "≥ 1" at [0], not "an integer")."""
    return Annotated[
        Annotated[value, Tag(_ONE)] | Annotated[list[value], Field(min_length=1), Tag(_LIST)],
        Discriminator(lambda v: _LIST if isinstance(v, list) else _ONE),
    ]


class _SearchBase(Strict):
    job: str | None = Field(
        None,
        description="a spec of several jobs (`jobs:`): the job to plan beside the others, which stay fixed",
    )
    neighbours: Literal["simulate", "ignore"] = Field(
        "simulate",
        description="with `job`: rank its plans by their time beside the other jobs (simulate), or by their "
        "time alone on the same GPUs (ignore: what a planner blind to the neighbours picks)",
    )
    tp: one_or_list(PositiveInt) | None = Field(None, description="TP degrees; default all that fit")
    pp: one_or_list(PositiveInt) | None = Field(None, description="pipeline depths; default all")
    dp: one_or_list(PositiveInt) | None = Field(None, description="replica counts; default all")
    cp: one_or_list(PositiveInt) | None = Field(
        None,
        description="context-parallel degrees; default 1 and the powers of two that leave each CP rank "
        "4096 or more tokens of a sequence",
    )
    use_all_gpus: bool = Field(
        True, description="false: plans may leave GPUs idle (e.g. drop the slowest node group)"
    )
    mapping: Literal["grid", "stages", "replicas", "default", "spec"] = Field(
        "grid",
        description="grid: any node group per cell; stages: one group per stage row; replicas: one per "
        "replica column; default: cluster order; spec: the spec's own mapping",
    )
    stage_order: Literal["contiguous", "any"] = Field(
        "contiguous",
        description="contiguous: a pipeline passes through each node group's stages in one run "
        "(every order of the runs is tried); any: every sequence of groups along a pipeline",
    )
    max_distinct_replicas: PositiveInt = Field(
        2, description="most distinct pipelines (grid columns) in one grid; 1 = stage-homogeneous grids"
    )
    layers: Literal["search", "uniform", "spec"] = Field(
        "search", description="search: balanced split, every split when few, refined around the best"
    )
    micro_batches: Literal["search", "uniform", "spec"] = "search"
    max_splits: PositiveInt = Field(
        16,
        description="per grid, enumerate every split of layers and micro-batches when there are at most "
        "this many (else every layer split when those are few enough, else the balanced split)",
    )
    planner: Literal["branch_and_bound", "exhaustive", "homogeneous"] = Field(
        "branch_and_bound", description="exhaustive simulates every feasible candidate (small spaces)"
    )
    max_simulations: PositiveInt = Field(120, description="simulations of the search, refinement included")
    time_budget_s: PositiveFloat | None = Field(None, description="stop simulating after this long")
    estimate_margin: NonNegative | None = Field(
        0.05,
        description="skip candidates whose estimate, corrected by the most optimistic estimate/simulation "
        "ratio seen, is still this much slower than the best; null = bounds only (exact, slower)",
    )
    refine_top: int = Field(3, ge=0, description="best plans whose splits are refined")
    refine_rounds: PositiveInt = Field(4, description="hill-climbing rounds per refined plan")
    baseline: bool = Field(True, description="also find and run the homogeneous-assumption baseline")
    baseline_simulations: PositiveInt = Field(24, description="simulations the baseline planner may use")
    prices_per_gpu_hour: dict[str, PositiveFloat] = Field(
        default_factory=dict, description="price of one GPU-hour per GPU type (e.g. h100-sxm: 2.5)"
    )
    max_slowdown: NonNegative = Field(
        0.1, description="the cheapest plan at most this much slower than the best is reported"
    )

    @field_validator("tp", "pp", "dp", "cp", mode="after")
    @classmethod
    def _distinct(cls, value: Any) -> Any:
        return sorted(set(value)) if isinstance(value, list) else value


def _option_field(dimension: Dimension) -> tuple[Any, Any]:
    """The option's field type with its constraints (model_fields keeps them apart from the
    annotation: without them `micro_batch_size: [0]` passed), as a scalar or a non-empty list."""
    info = dimension.model.model_fields[dimension.key]
    value = Annotated[(info.annotation, *info.metadata)] if info.metadata else info.annotation
    return (one_or_list(value) | None, Field(None))


SearchSettings = create_model(  # type: ignore[call-overload]
    "SearchSettings",
    __base__=_SearchBase,
    __doc__="The `search:` section (see the module docstring).",
    **{d.field: _option_field(d) for d in active_dimensions()},
)


def allowed(value: Any) -> tuple[Any, ...] | None:
    """A dimension's setting as a tuple of allowed values (None: not narrowed)."""
    if value is None:
        return None
    return tuple(value) if isinstance(value, list) else (value,)
