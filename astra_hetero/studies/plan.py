"""A study file → its points: the product of its axes over the base spec, each point a sweep point
(built and run by the sweep machinery) that also knows its value on every axis and its transforms.

Overrides are applied in order: the study's `set`, each axis in file order, then `reduced.set` when
the reduced study is asked for. Paths address the validated base spec as sweeps do. The checks that
tie tables, figures and derived columns to the axes and columns that exist are in `checks.py`.
"""

from __future__ import annotations

import copy
import itertools
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from astra_hetero.bounds import MAX_SWEEP_POINTS
from astra_hetero.errors import SpecError
from astra_hetero.jobs.load import RunSpec
from astra_hetero.planner.settings import SearchSettings
from astra_hetero.spec.load import spec_error_from_validation
from astra_hetero.spec.yamlfile import read_yaml, read_yaml_mapping
from astra_hetero.studies.axes import AxisInfo, AxisLevel, value_label
from astra_hetero.studies.checks import check_study
from astra_hetero.studies.schema import ParameterAxis, PlanTransform, Reduced, StudyFile, Transform, Variant
from astra_hetero.studies.validity import check_overrides, check_point_count, check_some_point_valid
from astra_hetero.sweep.plan import SweepPoint, base_data, set_path


@dataclass(frozen=True)
class StudyPoint(SweepPoint):
    levels: dict[str, str] = field(default_factory=dict)  # axis -> label
    transforms: tuple[Transform, ...] = ()
    workspace: str | None = None  # where transforms keep work shared between points (OUT/plans)

    def spec(self) -> RunSpec:
        from astra_hetero.studies.transforms import apply_transform

        spec = super().spec()
        workspace = Path(self.workspace) if self.workspace is not None else None
        for transform in self.transforms:
            spec = apply_transform(spec, transform, workspace)
        return spec


@dataclass(frozen=True)
class Study:
    file: StudyFile
    axes: tuple[AxisInfo, ...]
    points: tuple[StudyPoint, ...]
    reduced: bool = False
    source: Path | None = None
    job_names: tuple[str, ...] = ()  # the jobs of a shared-cluster base spec (their columns)

    @property
    def name(self) -> str:
        return self.file.name

    def axis(self, name: str) -> AxisInfo:
        return next(a for a in self.axes if a.name == name)


def load_study(path: str | Path, reduced: bool = False, max_points: int = MAX_SWEEP_POINTS) -> Study:
    path = Path(path)
    return plan_study(
        read_yaml_mapping(path, "", "study file"), path.parent, reduced, source=path, max_points=max_points
    )


def plan_study(
    data: Any,
    directory: Path,
    reduced: bool = False,
    source: Path | None = None,
    max_points: int = MAX_SWEEP_POINTS,
) -> Study:
    """The study's points, after every check that needs no simulation: the file's fields and
    references, its reduced version (whether or not it is asked for), the number of points, overrides
    that can never be valid, and that at least one point is a valid spec."""
    if not isinstance(data, dict):
        raise SpecError("", f"a study file must be a mapping, got {type(data).__name__}")
    data = import_axes(data, directory)
    try:
        study_file = StudyFile.model_validate(data)
    except ValidationError as exc:
        raise spec_error_from_validation(exc) from None
    if reduced and study_file.reduced is None:
        raise SpecError("reduced", "this study has no reduced version; run it without --reduced")
    axes = tuple(_axis_info(name, axis) for name, axis in study_file.axes.items())
    if not reduced:
        check_point_count(axes, max_points)
    base = base_data(study_file.base, directory)
    job_names = [job["name"] for job in base.get("jobs", [])]  # a shared cluster's jobs have columns
    check_study(study_file, axes, job_names)
    _check_reduced_search(study_file)
    reduced_axes = _kept_axes(axes, study_file, True) if study_file.reduced is not None else axes
    kept = reduced_axes if reduced else axes
    check_point_count(kept, max_points)
    check_overrides(study_file, base)
    _apply(base, study_file.set, "set")
    points = tuple(
        _point(index, combination, base, study_file, reduced)
        for index, combination in enumerate(itertools.product(*(a.levels for a in kept)))
    )
    names = [p.name for p in points]
    if len(set(names)) != len(names):
        clash = next(n for n in names if names.count(n) > 1)
        raise SpecError("axes", f"two points would share the name {clash!r}; rename a variant")
    check_some_point_valid(points)
    return Study(study_file, kept, points, reduced, source, tuple(job_names))


def import_axes(data: dict[str, Any], directory: Path) -> dict[str, Any]:
    """`data` with each axis written `{from: FILE, axis: NAME}` replaced by that axis of the study file
    FILE (relative to `directory`; NAME defaults to the axis's own name), as written there."""
    axes = data.get("axes")
    if not isinstance(axes, dict) or not any(_imported(axis) for axis in axes.values()):
        return data
    resolved = {
        name: _import_axis(name, axis, directory) if _imported(axis) else axis for name, axis in axes.items()
    }
    return {**data, "axes": resolved}


def _imported(axis: Any) -> bool:
    return isinstance(axis, dict) and "from" in axis


def _import_axis(name: str, axis: dict[str, Any], directory: Path) -> Any:
    where = f"axes.{name}"
    unknown = sorted(set(axis) - {"from", "axis"})
    if unknown:
        raise SpecError(
            f"{where}.{unknown[0]}", "unknown key; an imported axis has `from` and optionally `axis`"
        )
    if not isinstance(axis["from"], str):
        raise SpecError(f"{where}.from", "must be the path of a study file (relative to this one)")
    wanted = axis.get("axis", name)
    path = directory / axis["from"]
    other = read_yaml(path, f"{where}.from", "study file")
    axes = other.get("axes") if isinstance(other, dict) else None
    axes = axes if isinstance(axes, dict) else {}
    if wanted not in axes:
        raise SpecError(
            f"{where}.axis", f"{path} has no axis {wanted!r}; its axes: {', '.join(axes) or 'none'}"
        )
    found = axes[wanted]
    if _imported(found):
        raise SpecError(
            f"{where}.from", f"{path} imports axis {wanted!r} in turn; import it from where it is defined"
        )
    return found


def _axis_info(name: str, axis: list[Variant] | ParameterAxis) -> AxisInfo:
    if isinstance(axis, ParameterAxis):
        levels = tuple(AxisLevel(value_label(v), v) for v in axis.values)
        info = AxisInfo(name, levels, axis.description, axis.path)
    else:
        levels = tuple(AxisLevel(v.name, v.name, v.description, v) for v in axis)
        info = AxisInfo(name, levels)
    labels = info.labels
    if not labels:
        raise SpecError(f"axes.{name}", "needs at least one variant")
    repeated = sorted(label for label, count in Counter(labels).items() if count > 1)
    if repeated:
        raise SpecError(f"axes.{name}", f"values must be distinct; repeated: {', '.join(repeated)}")
    return info


def _kept_axes(axes: tuple[AxisInfo, ...], study_file: StudyFile, reduced: bool) -> tuple[AxisInfo, ...]:
    """The axes' levels the reduced version keeps (its references checked), or all of them."""
    if not reduced or study_file.reduced is None:
        return axes
    keep = study_file.reduced.axes
    for name, values in keep.items():
        if name not in study_file.axes:
            raise SpecError(f"reduced.axes.{name}", f"no such axis; axes: {', '.join(study_file.axes)}")
        known = next(a for a in axes if a.name == name).labels
        for index, value in enumerate(values):
            if value_label(value) not in known:
                raise SpecError(
                    f"reduced.axes.{name}[{index}]",
                    f"{value!r} is not a value of this axis; values: {', '.join(known)}",
                )
    kept = tuple(
        AxisInfo(
            a.name,
            tuple(
                v for v in a.levels if a.name not in keep or v.label in {value_label(x) for x in keep[a.name]}
            ),
            a.description,
            a.path,
        )
        for a in axes
    )
    labels = {a.name: a.labels for a in kept}
    for i, derived in enumerate(study_file.derived):
        for name, value in derived.relative_to.items():
            if value_label(value) not in labels[name]:
                raise SpecError(
                    f"reduced.axes.{name}",
                    f"must keep {value!r}: derived[{i}] ({derived.name}) is relative to it",
                )
    return kept


def _point(
    index: int, combination: tuple[AxisLevel, ...], base: dict[str, Any], study_file: StudyFile, reduced: bool
) -> StudyPoint:
    spec_data = copy.deepcopy(base)
    overrides: dict[str, Any] = {}
    backends: dict[str, str] = {}
    transforms: list[Transform] = []
    axis_names = list(study_file.axes)
    for name, level in zip(axis_names, combination, strict=True):
        axis = study_file.axes[name]
        if isinstance(axis, ParameterAxis):
            set_path(spec_data, axis.path, level.value, f"axes.{name}.path")
            overrides[axis.path] = level.value
            continue
        variant = level.variant
        assert variant is not None  # every level of a variant axis carries its variant
        position = axis.index(variant)
        _apply(spec_data, variant.set, f"axes.{name}[{position}].set")
        overrides.update(variant.set)
        if variant.transform is not None:
            transforms.append(_reduced_transform(variant.transform, study_file.reduced if reduced else None))
        if variant.backend is not None:
            backends[f"axes.{name}[{position}].backend"] = variant.backend
    if reduced and study_file.reduced is not None:
        _apply(spec_data, study_file.reduced.set, "reduced.set")
    if len(set(backends.values())) > 1:
        listed = ", ".join(f"{where} = {value}" for where, value in backends.items())
        raise SpecError(next(iter(backends)), f"variants of one point pin different backends ({listed})")
    levels = {name: level.label for name, level in zip(axis_names, combination, strict=True)}
    parameters = {name for name, axis in study_file.axes.items() if isinstance(axis, ParameterAxis)}
    return StudyPoint(
        index,
        point_name(levels, parameters),
        overrides,
        spec_data,
        backend=next(iter(backends.values()), None),
        levels=levels,
        transforms=tuple(transforms),
    )


def point_name(levels: dict[str, str], parameters: set[str]) -> str:
    """`gpt3-175b_H2_nic_gbps=100`: variant names as they are, parameter values as axis=value."""
    parts = [f"{axis}={label}" if axis in parameters else label for axis, label in levels.items()]
    return re.sub(r"[^A-Za-z0-9_.=+-]+", "-", "_".join(parts))[:150]


def _check_reduced_search(study_file: StudyFile) -> None:
    """`reduced.search` fits every `plan` transform, whether or not the reduced study is asked for."""
    if study_file.reduced is None or not study_file.reduced.search:
        return
    transforms = [
        v.transform
        for axis in study_file.axes.values()
        if isinstance(axis, list)
        for v in axis
        if isinstance(v.transform, PlanTransform)
    ]
    if not transforms:
        raise SpecError("reduced.search", "the study has no `plan` transform for it to narrow")
    for transform in transforms:
        _reduced_transform(transform, study_file.reduced)


def _reduced_transform(transform: Transform, reduced: Reduced | None) -> Transform:
    """A `plan` transform with the reduced study's search settings in place of its own."""
    if reduced is None or not reduced.search or not isinstance(transform, PlanTransform):
        return transform
    settings = {**transform.search.model_dump(exclude_unset=True), **reduced.search}
    try:
        return transform.model_copy(update={"search": SearchSettings.model_validate(settings)})
    except ValidationError as exc:
        error = spec_error_from_validation(exc)
        raise SpecError(f"reduced.search.{error.field}".rstrip("."), error.reason) from None


def _apply(spec_data: dict[str, Any], overrides: dict[str, Any], where: str) -> None:
    for key, value in overrides.items():
        set_path(spec_data, key, value, where)
