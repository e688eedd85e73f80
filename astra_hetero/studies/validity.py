"""What a study file asks for that can never run, found when it loads rather than point by point.

- too many points: the product of the axes is bounded like a sweep's (`--max-points`), and the error
  names each axis with its count;
- an override whose value is invalid by itself (`set: {parallelism.tp: 0}`, a negative NIC rate on a
  parameter axis): applied alone to the base spec, the schema refuses that very field, so no
  combination with the other axes can make it valid;
- a study none of whose points is a valid spec (`parallelism.dp: 5` on a cluster no point divides by
  5): each point would fail alone, after the others had run.
Points that are invalid only in some combinations still run; they fail alone, as a sweep's do.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterable
from typing import Any

from astra_hetero.errors import SpecError
from astra_hetero.jobs.load import parse_run_spec, validate_run_sections
from astra_hetero.studies.axes import AxisInfo
from astra_hetero.studies.schema import ParameterAxis, StudyFile
from astra_hetero.sweep.plan import SweepPoint, set_path


def check_point_count(axes: tuple[AxisInfo, ...], max_points: int) -> None:
    count = math.prod(len(axis.levels) for axis in axes)
    if count > max_points:
        product = " × ".join(f"{axis.name} ({len(axis.levels):,})" for axis in axes)
        raise SpecError(
            "axes",
            f"{count:,} points ({product}), more than --max-points {max_points:,}; cut an axis, use "
            "`reduced:`, or raise the limit",
        )


def check_overrides(study_file: StudyFile, base: dict[str, Any]) -> None:
    """SpecError naming the first override whose value its own field refuses, wherever it is written."""
    for where, path, value, field in _overrides(study_file):
        data = copy.deepcopy(base)
        set_path(data, path, value, where)
        try:
            validate_run_sections(data)
        except SpecError as exc:
            if _within(exc.field, path):
                raise SpecError(field, exc.reason) from None
            # refused elsewhere: another override may make it consistent; the point decides


def check_some_point_valid(points: Iterable[SweepPoint]) -> None:
    """SpecError if no point's spec is valid (stops at the first valid one). The spec before the
    point's transforms: they take a valid spec, and a `plan` transform is a whole plan search."""
    first: tuple[SweepPoint, SpecError] | None = None
    count = 0
    for point in points:
        count += 1
        try:
            parse_run_spec(point.spec_data)
            return
        except SpecError as exc:
            first = first or (point, exc)
    if first is not None:
        point, exc = first
        raise SpecError(
            exc.field,
            f"{exc.reason} — in every one of the study's {count} points (the first: {point.name}); "
            "check the study's `set:` and axes",
        )


def _overrides(study_file: StudyFile) -> Iterable[tuple[str, str, Any, str]]:
    """(where, dotted path, value, field) of every override the file writes, the reduced version's
    included: `where` as the points apply it (`set_path`), `field` the study file's field it came from."""
    for path, value in study_file.set.items():
        yield "set", path, value, f"set.{path}"
    for name, axis in study_file.axes.items():
        if isinstance(axis, ParameterAxis):
            for i, value in enumerate(axis.values):
                yield f"axes.{name}.path", axis.path, value, f"axes.{name}.values[{i}]"
            continue
        for i, variant in enumerate(axis):
            for path, value in variant.set.items():
                yield f"axes.{name}[{i}].set", path, value, f"axes.{name}[{i}].set.{path}"
    if study_file.reduced is not None:
        for path, value in study_file.reduced.set.items():
            yield "reduced.set", path, value, f"reduced.set.{path}"


def _within(field: str, path: str) -> bool:
    return field == path or field.startswith((f"{path}.", f"{path}["))
