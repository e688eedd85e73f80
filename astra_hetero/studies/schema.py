"""The study file, validated: what to run (a base spec and axes of variants), what to compute from the
results (derived columns) and how to show them (tables and figures).

    name: heterogeneity-levels
    title: Heterogeneity levels H0-H4 on 128 GPUs
    base: ../gpt3_175b_128gpu_h100.yaml   # a spec file (relative to the study file) or an inline spec
    set: {collectives.max_in_flight_per_rank: 1}        # optional, every point
    axes:                                 # points = the product of the axes, in file order
      level:                              # a list of named variants ...
        - {name: H0, description: homogeneous}
        - {name: H1, set: {cluster.node_groups: [...]}}
      prediction:
        - {name: ours}
        - {name: most-common, transform: {kind: homogenize, device: most_common}}
      nic_gbps: {path: cluster.node_groups[1].nic.gbps, values: [100, 200, 400]}   # ... or one path
    derived:   [{name: error_pct, of: iteration_time_us, relative_to: {prediction: ours}}]
    tables:    [{title: ..., rows: [level], pivot: prediction, values: [iteration_time_us]}]
    figures:   [{name: error, title: ..., kind: bar, x: level, y: [error_pct], series: prediction}]
    reduced:   {description: ..., set: {scope: {layers_per_stage: 1}}, axes: {level: [H0, H4]}}

A variant may also pin its `backend` (a packet-level point beside an embedded one) and apply a
`transform` to its spec once the overrides are in place. Transforms run when the point runs, in the
worker, so that an expensive one (a plan search, `kind: plan`) runs in parallel like the simulations
do; a new kind of point is a new transform kind, not a new file format.

An axis may also be taken from another study file, `level: {from: heterogeneity_levels.yaml}`
(optionally `axis: NAME` when it is named differently there), so that two studies share one
definition of their levels (see plan.py).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, PositiveFloat, Tag

from astra_hetero.planner.settings import SearchSettings

NAME = r"^[A-Za-z0-9_.+=-]+$"  # safe in directory names and CSV headers
IDENTIFIER = r"^[a-z][a-z0-9_]*$"


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class HomogenizeTransform(Strict):
    """What a homogeneous simulator would be given: every node's GPU, intra-node fabric and NIC
    replaced by the cluster's most common device, or by the average device (see transforms.py)."""

    kind: Literal["homogenize"]
    device: Literal["most_common", "average"]


class PlanTransform(Strict):
    """The plan `astra-hetero plan` picks for the point's cluster, model and global batch (see
    planning.py): its best plan, or the homogeneous-assumption baseline it also finds (the best plan
    when every GPU is taken for the cluster's most common one, layers and micro-batches split
    uniformly over the cluster in order, then run on the real cluster). One search serves both picks."""

    kind: Literal["plan"]
    pick: Literal["best", "baseline"] = Field(description="the search's best plan, or its baseline")
    search: SearchSettings = Field(  # type: ignore[valid-type]
        default_factory=SearchSettings,
        description="the planner's `search:` section (its time_budget_s caps the search's time)",
    )


# Tagged by `kind`; the tags look like type names ("[" inside) so that error paths leave them out.
_TRANSFORM_TAGS = {"homogenize": "HomogenizeTransform[kind]", "plan": "PlanTransform[kind]"}


def _transform_kind(value: Any) -> str | None:
    kind = value.get("kind") if isinstance(value, dict) else getattr(value, "kind", None)
    return _TRANSFORM_TAGS.get(kind) if isinstance(kind, str) else None


Transform = Annotated[
    Annotated[HomogenizeTransform, Tag(_TRANSFORM_TAGS["homogenize"])]
    | Annotated[PlanTransform, Tag(_TRANSFORM_TAGS["plan"])],
    Discriminator(
        _transform_kind,
        custom_error_type="transform_kind",
        custom_error_message=f"kind must be one of: {', '.join(_TRANSFORM_TAGS)}",
    ),
]


class Variant(Strict):
    name: str = Field(pattern=NAME, description="the point's value on this axis (CSV cell, directory name)")
    description: str = Field("", description="what this variant is, for the report")
    set: dict[str, Any] = Field(default_factory=dict, description="dotted spec path -> value")
    transform: Transform | None = None
    backend: str | None = Field(None, description="simulate this variant's points on this backend")


class ParameterAxis(Strict):
    """One spec path taking each of `values` in turn (numbers give a numeric axis in figures)."""

    path: str
    values: list[Any] = Field(min_length=1)
    description: str = ""


# A list is named variants, a mapping one parameter; telling pydantic which keeps its errors to that form.
# The tags look like type names ("[" inside) so that error paths leave them out, as they do union labels.
_VARIANTS, _PARAMETER = "list[Variant]", "ParameterAxis[path, values]"


def _axis_form(value: Any) -> str:
    return _PARAMETER if isinstance(value, dict) else _VARIANTS


Axis = Annotated[
    Annotated[list[Variant], Tag(_VARIANTS)] | Annotated[ParameterAxis, Tag(_PARAMETER)],
    Discriminator(_axis_form),
]
AxisName = Annotated[str, Field(pattern=IDENTIFIER)]
Where = dict[str, str | int | float | list[str | int | float]]


class Derived(Strict):
    """A column computed against a reference point: the point with the same value on every other axis
    and the `relative_to` values on the axes named there."""

    name: str = Field(pattern=IDENTIFIER)
    of: str = Field(description="the column compared, e.g. iteration_time_us")
    relative_to: dict[str, str | int | float] = Field(min_length=1)
    kind: Literal["percent_difference", "ratio", "difference"] = Field(
        "percent_difference", description="100·(x − ref)/ref, x/ref, or x − ref in the column's unit"
    )
    description: str = ""


class TableLayout(Strict):
    title: str = Field(min_length=1)
    rows: list[str] = Field(min_length=1, description="axes whose values label a row")
    pivot: str | None = Field(None, description="an axis spread over the columns, one per value")
    values: list[str] = Field(min_length=1, description="columns shown (for each pivot value)")
    where: Where = Field(default_factory=dict, description="keep only points with these axis values")
    caption: str = ""


class FigureLayout(Strict):
    name: str = Field(  # a file name: past 255 bytes (with the staging prefix) the OS refuses it
        pattern=r"^[a-z0-9][a-z0-9_-]*$", max_length=100, description="file name: <name>.png"
    )
    title: str = Field(min_length=1, description="what the figure shows")
    kind: Literal["bar", "stacked_bar", "line"]
    x: str = Field(description="an axis")
    y: list[str] = Field(min_length=1, description="columns of one unit; stacked for stacked_bar")
    series: str | None = Field(None, description="an axis: one bar or line per value (bar, line)")
    panels: str | None = Field(None, description="an axis: one panel per value")
    where: Where = Field(default_factory=dict)
    x_label: str | None = None
    y_label: str | None = Field(None, description="default: from the columns, with their unit")
    reference_lines: list[float] = Field(default_factory=list, description="horizontal lines at these y")
    caption: str = ""


class Reduced(Strict):
    """A smaller version of the study (CI, a first look): `--reduced` applies it."""

    description: str = Field(min_length=1)
    set: dict[str, Any] = Field(default_factory=dict, description="applied after every axis")
    axes: dict[str, list[str | int | float]] = Field(
        default_factory=dict, description="keep only these values of the axes named"
    )
    search: dict[str, Any] = Field(
        default_factory=dict, description="search settings that replace those of every `plan` transform"
    )


class StudyFile(Strict):
    name: str = Field(pattern=NAME)
    title: str = Field(min_length=1)
    description: str = ""
    base: str | dict[str, Any]
    set: dict[str, Any] = Field(default_factory=dict, description="dotted spec path -> value, every point")
    backend: str | None = Field(None, description="default backend; the command line's --backend wins")
    timeout_s: PositiveFloat | None = Field(None, description="per point (ASTRA-sim backends)")
    axes: dict[AxisName, Axis] = Field(min_length=1)
    derived: list[Derived] = Field(default_factory=list)
    tables: list[TableLayout] = Field(default_factory=list)
    figures: list[FigureLayout] = Field(default_factory=list)
    reduced: Reduced | None = None
