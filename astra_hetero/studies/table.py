"""The study's results table: one row per point (its axis values, backend, status, metrics read from
its result.json, derived columns), written as OUT/results.csv."""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from astra_hetero import rundir
from astra_hetero.backends.astrasim.ns3_outputs import read_ns3_outputs
from astra_hetero.backends.astrasim.partial import read_partial
from astra_hetero.errors import AstraHeteroError
from astra_hetero.results.io import read_result
from astra_hetero.studies.axes import value_label
from astra_hetero.studies.checks import columns_of
from astra_hetero.studies.columns import Column, result_metrics
from astra_hetero.studies.plan import Study
from astra_hetero.studies.run import StudyOutcome
from astra_hetero.studies.schema import Derived
from astra_hetero.sweep.run import first_line

CSV_NAME = "results.csv"
# What a point stopped at its budget shows: its partial record's field -> column.
PARTIAL_COLUMNS = {
    "wall_time_s": "wall_time_s",
    "ranks_finished": "partial_ranks_finished",
    "simulated_us": "partial_simulated_us",
    "flows_completed": "ns3_flows",
}


@dataclass(frozen=True)
class Row:
    point: str
    levels: dict[str, str]  # axis -> label
    backend: str
    status: str  # "ok" | "failed" | "partial" (stopped at its budget: `values` has what it had done)
    run_dir: str
    values: dict[str, float] = field(default_factory=dict)  # metric and derived columns
    error: str = ""
    resumed: bool = False
    warnings: tuple[str, ...] = ()
    provenance: dict[str, Any] | None = None  # result.json's meta.provenance (provenance.py)

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass(frozen=True)
class ResultsTable:
    study: Study
    columns: dict[str, Column]  # value columns in order: metrics, then derived
    rows: tuple[Row, ...]

    @property
    def axes(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.study.axes)

    def select(self, where: dict[str, Any]) -> list[Row]:
        """Rows that succeeded and match `where` (axis -> value or list of values)."""
        wanted = {
            axis: {value_label(v) for v in (value if isinstance(value, list) else [value])}
            for axis, value in where.items()
        }
        return [r for r in self.rows if r.ok and all(r.levels.get(a) in vs for a, vs in wanted.items())]


def build_table(study: Study, outcomes: Sequence[StudyOutcome]) -> ResultsTable:
    rows = [_row(outcome) for outcome in outcomes]
    columns = columns_of(study.file, study.job_names)
    for derived in study.file.derived:
        rows = add_derived(rows, derived, [a.name for a in study.axes])
    return ResultsTable(study, columns, tuple(rows))


def _row(outcome: StudyOutcome) -> Row:
    point = outcome.point
    base = {
        "point": point.name,
        "levels": point.levels,
        "backend": point.backend or "",
        "run_dir": str(outcome.run_dir),
        "resumed": outcome.resumed,
    }
    if not outcome.ok:
        partial = read_partial(outcome.run_dir)
        if partial is not None:
            values = {
                column: float(partial[key])
                for key, column in PARTIAL_COLUMNS.items()
                if isinstance(partial.get(key), int | float)
            }
            return Row(status="partial", values=values, error=first_line(outcome.error), **base)
        return Row(status="failed", error=first_line(outcome.error) or "failed", **base)
    try:
        result = read_result(outcome.run_dir)
        values = result_metrics(result, rundir.RunDir(outcome.run_dir).read_manifest())
        stats = read_ns3_outputs(outcome.run_dir) if point.backend == "ns3" else None
    except AstraHeteroError as exc:
        return Row(status="failed", error=first_line(str(exc)), **base)
    values.update(stats.as_columns() if stats else {})
    return Row(
        status="ok", values=values, warnings=result.warnings, provenance=result.meta.get("provenance"), **base
    )


def add_derived(rows: list[Row], derived: Derived, axes: list[str]) -> list[Row]:
    """Each row gains `derived.name`, computed against the row that differs from it only on the axes
    of `relative_to`, and there takes the values named."""
    reference = {axis: value_label(v) for axis, v in derived.relative_to.items()}
    others = [a for a in axes if a not in reference]
    by_key = {
        tuple(r.levels[a] for a in others): r
        for r in rows
        if r.ok and all(r.levels[a] == v for a, v in reference.items())
    }
    out = []
    for row in rows:
        ref = by_key.get(tuple(row.levels[a] for a in others))
        value = _compare(
            row.values.get(derived.of), ref.values.get(derived.of) if ref else None, derived.kind
        )
        out.append(row if value is None else replace(row, values={**row.values, derived.name: value}))
    return out


def _compare(value: float | None, ref: float | None, kind: str) -> float | None:
    if value is None or ref is None:
        return None
    if kind == "difference":
        return value - ref
    if ref == 0:
        return None
    return 100.0 * (value - ref) / ref if kind == "percent_difference" else value / ref


def csv_text(table: ResultsTable) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    value_columns = list(table.columns)
    writer.writerow(["point", *table.axes, "backend", "status", *value_columns, "run_dir", "error"])
    for row in table.rows:
        writer.writerow(
            [
                row.point,
                *(row.levels[a] for a in table.axes),
                row.backend,
                row.status,
                *(_cell(row.values.get(c)) for c in value_columns),
                row.run_dir,
                row.error,
            ]
        )
    return buffer.getvalue()


def _cell(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return json.dumps(round(value, 6) if isinstance(value, float) else value)
