"""Cross-field checks of a study file: every axis, column and value a derived column, table or figure
names exists, units agree within a figure, and every cell of a table or mark of a figure stands for
exactly one point. Each error names the field and says what would be valid."""

from __future__ import annotations

from collections.abc import Sequence

from astra_hetero.backends.base import backend_names
from astra_hetero.errors import SpecError
from astra_hetero.studies.axes import AxisInfo, value_label
from astra_hetero.studies.columns import METRIC_NAMES, METRICS, Column
from astra_hetero.studies.schema import (
    Derived,
    FigureLayout,
    PlanTransform,
    StudyFile,
    TableLayout,
    Variant,
    Where,
)

RESERVED = ("point", "backend", "status", "run_dir", "error")
DERIVED_UNITS = {"percent_difference": "%", "ratio": "x"}


def columns_of(study_file: StudyFile) -> dict[str, Column]:
    """Every value column of the study's table, metrics first, then derived columns in file order."""
    columns = {c.name: c for c in METRICS}
    for d in study_file.derived:
        columns[d.name] = derived_column(d, columns)
    return columns


def derived_column(derived: Derived, columns: dict[str, Column]) -> Column:
    unit = DERIVED_UNITS.get(derived.kind, columns[derived.of].unit)
    words = {"percent_difference": "difference", "ratio": "ratio", "difference": "difference"}[derived.kind]
    reference = ", ".join(f"{axis} = {value}" for axis, value in derived.relative_to.items())
    label = derived.description or f"{columns[derived.of].label}: {words} to {reference}"
    return Column(derived.name, label, unit)


def check_study(study_file: StudyFile, axes: Sequence[AxisInfo]) -> None:
    by_name = {a.name: a for a in axes}
    for name in by_name:
        if name in RESERVED or name in METRIC_NAMES:
            raise SpecError(f"axes.{name}", f"{name!r} is a column of the results table; rename the axis")
    valid_backends = backend_names()
    if study_file.backend is not None and study_file.backend not in valid_backends:
        raise SpecError(
            "backend", f"unknown backend {study_file.backend!r}; valid: {', '.join(valid_backends)}"
        )
    for name, axis in study_file.axes.items():
        if isinstance(axis, list):
            _check_backends(name, axis, valid_backends)
            _check_plan_transforms(name, axis)
    columns = {c.name: c for c in METRICS}
    for i, derived in enumerate(study_file.derived):
        where = f"derived[{i}]"
        if derived.name in columns or derived.name in by_name or derived.name in RESERVED:
            raise SpecError(f"{where}.name", f"{derived.name!r} is already a column")
        _check_column(derived.of, columns, f"{where}.of")
        _check_where(derived.relative_to, by_name, f"{where}.relative_to")
        columns[derived.name] = derived_column(derived, columns)
    for i, table in enumerate(study_file.tables):
        _check_table(table, by_name, columns, f"tables[{i}]")
    names = [f.name for f in study_file.figures]
    for i, figure in enumerate(study_file.figures):
        if names.count(figure.name) > 1:
            raise SpecError(f"figures[{i}].name", f"{figure.name!r} names two figures")
        _check_figure(figure, by_name, columns, f"figures[{i}]")


def _check_backends(axis: str, variants: list[Variant], valid: list[str]) -> None:
    for i, variant in enumerate(variants):
        if variant.backend is not None and variant.backend not in valid:
            raise SpecError(
                f"axes.{axis}[{i}].backend", f"unknown backend {variant.backend!r}; valid: {', '.join(valid)}"
            )


def _check_plan_transforms(axis: str, variants: list[Variant]) -> None:
    for i, variant in enumerate(variants):
        transform = variant.transform
        if not isinstance(transform, PlanTransform) or transform.pick != "baseline":
            continue
        if not transform.search.baseline or transform.search.planner == "homogeneous":
            raise SpecError(
                f"axes.{axis}[{i}].transform.search",
                "pick: baseline needs the search to find the homogeneous-assumption baseline "
                "(baseline: true, and a planner other than homogeneous)",
            )


def _check_table(
    table: TableLayout, axes: dict[str, AxisInfo], columns: dict[str, Column], where: str
) -> None:
    used = [*table.rows, *([table.pivot] if table.pivot else [])]
    for i, name in enumerate(table.rows):
        _check_axis(name, axes, f"{where}.rows[{i}]")
    if table.pivot is not None:
        _check_axis(table.pivot, axes, f"{where}.pivot")
    if len(set(used)) != len(used):
        raise SpecError(where, "an axis appears twice among rows and pivot")
    for i, name in enumerate(table.values):
        _check_column(name, columns, f"{where}.values[{i}]")
    _check_where(table.where, axes, f"{where}.where")
    _check_covered(used, table.where, axes, where, "rows or pivot")


def _check_figure(
    figure: FigureLayout, axes: dict[str, AxisInfo], columns: dict[str, Column], where: str
) -> None:
    placed = [("x", figure.x), ("series", figure.series), ("panels", figure.panels)]
    used = [name for _, name in placed if name is not None]
    for role, name in placed:
        if name is not None:
            _check_axis(name, axes, f"{where}.{role}")
    if len(set(used)) != len(used):
        raise SpecError(where, "x, series and panels must be different axes")
    if figure.kind == "stacked_bar" and figure.series is not None:
        raise SpecError(f"{where}.series", "a stacked bar stacks its y columns; split by `panels` instead")
    for i, name in enumerate(figure.y):
        _check_column(name, columns, f"{where}.y[{i}]")
    units = {columns[name].unit for name in figure.y}
    if len(units) > 1:
        raise SpecError(
            f"{where}.y", f"columns of different units ({', '.join(sorted(units))}) share one axis"
        )
    _check_where(figure.where, axes, f"{where}.where")
    _check_covered(used, figure.where, axes, where, "x, series or panels")


def _check_axis(name: str, axes: dict[str, AxisInfo], where: str) -> None:
    if name not in axes:
        raise SpecError(where, f"no axis {name!r}; axes: {', '.join(axes)}")


def _check_column(name: str, columns: dict[str, Column], where: str) -> None:
    if name not in columns:
        raise SpecError(where, f"no column {name!r}; columns: {', '.join(columns)}")


def _check_where(where_values: Where, axes: dict[str, AxisInfo], where: str) -> None:
    for name, wanted in where_values.items():
        _check_axis(name, axes, f"{where}.{name}")
        for value in wanted if isinstance(wanted, list) else [wanted]:
            if value_label(value) not in axes[name].labels:
                raise SpecError(
                    f"{where}.{name}",
                    f"{value!r} is not a value of axis {name!r}; values: {', '.join(axes[name].labels)}",
                )


def _check_covered(
    used: list[str], where_values: Where, axes: dict[str, AxisInfo], where: str, roles: str
) -> None:
    """Each varying axis must be placed or pinned to one value, or several points share one cell."""
    for name, axis in axes.items():
        pinned = name in where_values and not (
            isinstance(where_values[name], list) and len(where_values[name]) > 1
        )  # type: ignore[arg-type]
        if name not in used and not pinned and len(axis.levels) > 1:
            raise SpecError(
                where,
                f"axis {name!r} has {len(axis.levels)} values but is not among the "
                f"{roles}; place it there or pin it with `where: {{{name}: ...}}`",
            )
