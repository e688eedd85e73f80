"""The plan options the search varies besides the shape (tp, pp, dp), the grid and the splits.

Each row names a spec field (a `parallelism` field, or another section's: `precision` is the
compute format of `precision.compute`) and the values tried when the `search:` section says nothing
about it. The table is the whole contract: a row adds the `search:` key (scalar = fixed, list =
allowed values), the column in plans.csv and the loop in the space. A row whose field the schema
lacks is skipped, so rows may name fields before they exist (e.g. `virtual_stages` of the
interleaved schedule). Schedules come from the schedule registry, so a new schedule is searched as
soon as it is registered; combinations the spec checks reject (e.g. an interleaved schedule with one
virtual stage) are counted as infeasible, never simulated.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from astra_hetero.planner.shape import Shape
from astra_hetero.spec.schema import ParallelismSpec, PrecisionSpec, Spec
from astra_hetero.workload.schedule import SCHEDULES

SECTIONS: dict[str, type[BaseModel]] = {"parallelism": ParallelismSpec, "precision": PrecisionSpec}


@dataclass(frozen=True)
class Dimension:
    field: str  # the option's name: the `search:` key and plans.csv column
    values: Callable[[Spec], tuple[Any, ...]]  # tried by default, given the spec as written
    short: str  # in plan labels: "mbs=2", or the bare value when empty ("1f1b")
    # True where the option cannot change the workload (e.g. the distributed optimizer with one
    # replica) or is not allowed (sequence parallelism without TP): only the schema's default is
    # tried there. tests/planner checks each claim of the first kind against the generated traces.
    inert: Callable[[Shape], bool] = lambda shape: False
    # Values from least to most work when all else is equal (each later one only adds compute or
    # exposed communication, and saves memory or nothing): a plan is dominated by the same plan with
    # an earlier value that fits in memory.
    by_work: tuple[Any, ...] = ()
    section: str = "parallelism"  # the spec section that holds it
    attr: str = ""  # its name there (default: `field`)
    quiet: bool = False  # left out of plan labels at its schema default (options most plans leave alone)

    @property
    def key(self) -> str:
        return self.attr or self.field

    @property
    def model(self) -> type[BaseModel]:
        return SECTIONS[self.section]

    @property
    def default(self) -> Any:
        return self.model.model_fields[self.key].default

    def written(self, spec: Spec) -> Any:
        """Its value in `spec`."""
        return getattr(getattr(spec, self.section), self.key)


def _as_written(field: str, section: str = "parallelism") -> Callable[[Spec], tuple[Any, ...]]:
    """Not searched unless the `search:` section lists values: the spec's own (or default) value."""
    return lambda spec: (getattr(getattr(spec, section), field),)


def _expert_degrees(spec: Spec) -> tuple[int, ...]:
    """MoE models: powers of two dividing the expert count (the spec checks reject those that do not
    divide a stage's GPUs); dense models: as written (1)."""
    moe = spec.model.moe
    if moe is None:
        return (spec.parallelism.ep,)
    return tuple(e for e in (1, 2, 4, 8, 16, 32, 64) if moe.num_experts % e == 0)


def _micro_batch_sizes(spec: Spec) -> tuple[int, ...]:
    """Powers of two up to 8 that divide the global batch (larger ones rarely pay and cost memory)."""
    return tuple(b for b in (1, 2, 4, 8) if spec.parallelism.global_batch_size % b == 0)


DIMENSIONS: tuple[Dimension, ...] = (
    Dimension("micro_batch_size", _micro_batch_sizes, "mbs"),
    Dimension("schedule", lambda spec: tuple(SCHEDULES), ""),
    # Megatron-LM interleaves only pipelines of 2 or more stages; the other rules (schedule 1f1b,
    # pp·v ≤ layers, micro-batches in groups of pp) are the spec checks', which count what they reject
    Dimension("virtual_stages", lambda spec: (1, 2), "v", lambda shape: shape.pp == 1),
    Dimension("sequence_parallel", lambda spec: (False, True), "sp", lambda shape: shape.tp == 1),
    Dimension(
        "recompute",
        lambda spec: ("none", "selective", "full"),
        "recompute",
        by_work=("none", "selective", "full"),
    ),
    Dimension("distributed_optimizer", lambda spec: (False, True), "dist-opt", lambda shape: shape.dp == 1),
    Dimension(
        "overlap_grad_reduce", _as_written("overlap_grad_reduce"), "overlap-grad", lambda shape: shape.dp == 1
    ),
    Dimension(
        "overlap_param_gather",
        _as_written("overlap_param_gather"),
        "overlap-param",
        lambda shape: shape.dp == 1,
    ),
    Dimension("ep", _expert_degrees, "ep", quiet=True),
    Dimension("etp", _as_written("etp"), "etp", quiet=True),
    Dimension("moe_token_dispatcher", _as_written("moe_token_dispatcher"), "", quiet=True),
    Dimension("moe_grouped_gemm", _as_written("moe_grouped_gemm"), "", quiet=True),
    Dimension("cp_comm", _as_written("cp_comm"), "cp-comm", lambda shape: shape.cp == 1, quiet=True),
    # Transformer Engine's overlap needs sequence parallelism: the spec checks reject it without. With
    # overlap a plan does the same work and holds the same memory with its TP communication hidden, so
    # the plan without it is dominated wherever the plan with it is allowed (listed first: by_work).
    # As written unless `search:` lists it: overlapped plans' traces hold more nodes (chunked
    # collectives), and searching it doubles the option sets of every TP shape.
    Dimension(
        "tp_comm_overlap",
        _as_written("tp_comm_overlap"),
        "tp-overlap",
        lambda shape: shape.tp == 1,
        by_work=(True, False),
        quiet=True,
    ),
    Dimension(
        "overlap_p2p_comm",
        _as_written("overlap_p2p_comm"),
        "overlap-p2p",
        lambda shape: shape.pp == 1,
        quiet=True,
    ),
    # searched when `search:` lists stages; contradictions with distributed_optimizer are spec errors
    Dimension("zero_stage", _as_written("zero_stage"), "zero", quiet=True),
    Dimension("fsdp", _as_written("fsdp"), "fsdp", quiet=True),
    # The GEMM format changes numerics as well as speed, so it is searched only where `search:` lists
    # formats (e.g. precision: [bf16, fp8]); a GPU without the format makes the plan infeasible.
    Dimension("precision", _as_written("compute", "precision"), "", section="precision", attr="compute"),
)


def active_dimensions() -> tuple[Dimension, ...]:
    """The rows whose field the schema has."""
    return tuple(d for d in DIMENSIONS if d.key in d.model.model_fields)


def section_options(options: tuple[tuple[str, Any], ...], section: str) -> dict[str, Any]:
    """The options that set fields of `section`, by their names there."""
    rows = {d.field: d for d in DIMENSIONS}
    return {
        rows[name].key: value for name, value in options if name in rows and rows[name].section == section
    }


def with_options(base: Spec, parallelism: ParallelismSpec, options: tuple[tuple[str, Any], ...]) -> Spec:
    """`base` with `parallelism` and the options of the other sections put in (validated)."""
    update: dict[str, Any] = {"parallelism": parallelism}
    for section in SECTIONS:
        values = section_options(options, section) if section != "parallelism" else {}
        if values:
            current = getattr(base, section)
            update[section] = type(current).model_validate({**current.model_dump(), **values})
    return base.model_copy(update=update)


def option_names() -> tuple[str, ...]:
    return tuple(d.field for d in active_dimensions())


def work_rank(options: tuple[tuple[str, Any], ...]) -> tuple[tuple[tuple[str, Any], ...], int]:
    """(the options without the work-ordered ones, how much extra work those add): two plans that
    differ only in the second part are ordered by it."""
    ordered = {d.field: d.by_work for d in DIMENSIONS if d.by_work}
    rest = tuple((k, v) for k, v in options if k not in ordered)
    work = sum(ordered[k].index(v) for k, v in options if k in ordered and v in ordered[k])
    return rest, work


def describe_options(options: tuple[tuple[str, Any], ...]) -> str:
    """`mbs=1 1f1b sp recompute=selective`: booleans by their name when on, left out when off."""
    short = {d.field: d.short for d in DIMENSIONS}
    quiet = {d.field: d.default for d in DIMENSIONS if d.quiet}
    words = []
    for name, value in options:
        if name in quiet and value == quiet[name]:
            continue
        tag = short.get(name, name)
        if isinstance(value, bool):
            words += [tag] if value else []
        else:
            words.append(f"{tag}={value}" if tag else str(value))
    return " ".join(words)
