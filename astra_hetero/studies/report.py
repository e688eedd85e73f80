"""The study's report: report.md (what was run, the axes, the declared tables and figures, every point,
failures and warnings) with its PNGs beside it, and results.csv, published together into OUT."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from astra_hetero.outputs import publish
from astra_hetero.results.figure_files import markdown_figure
from astra_hetero.results.report import TextTable, format_number, to_markdown
from astra_hetero.studies.columns import Column, display_unit
from astra_hetero.studies.provenance import (
    PROVENANCE_NAME,
    provenance_lines,
    provenance_text,
    study_provenance,
)
from astra_hetero.studies.schema import TableLayout
from astra_hetero.studies.table import CSV_NAME, ResultsTable, Row, csv_text

REPORT_NAME = "report.md"
OVERVIEW_COLUMNS = ("iteration_time_us", "mean_compute_us", "mean_exposed_comm_us", "mean_idle_us")


@dataclass(frozen=True)
class ReportFiles:
    csv: Path
    report: Path
    figures: tuple[Path, ...]
    skipped_figures: tuple[tuple[str, str], ...]  # (name, why) of declared figures not drawn


def write_report(
    table: ResultsTable, out: Path, study_file: Path | None = None, fmt: str = "png"
) -> ReportFiles:
    """Write results.csv, report.md and the figures (as `fmt`: png, svg, pdf) into `out` (all or
    nothing)."""
    from astra_hetero.studies.figures import figure_gap, render_figure

    out = Path(out)
    drawn: list[tuple[str, str]] = []
    skipped: dict[str, str] = {}
    record = study_provenance(table, study_file)
    with publish(out) as staging:
        (staging / CSV_NAME).write_text(csv_text(table))
        (staging / PROVENANCE_NAME).write_text(provenance_text(record))
        for layout in table.study.file.figures:
            gap = figure_gap(layout, table)
            if gap:
                skipped[layout.name] = gap
            else:
                render_figure(layout, table, staging / f"{layout.name}.{fmt}")
                drawn.append((layout.name, layout.title))
        (staging / REPORT_NAME).write_text(report_markdown(table, study_file, skipped, fmt, record))
    return ReportFiles(
        out / CSV_NAME,
        out / REPORT_NAME,
        tuple(out / f"{name}.{fmt}" for name, _ in drawn),
        tuple(skipped.items()),
    )


def report_markdown(
    table: ResultsTable,
    study_file: Path | None,
    skipped: dict[str, str],
    fmt: str = "png",
    record: dict | None = None,
) -> str:
    study = table.study
    parts = [f"# {study.file.title}", study.file.description.strip(), _summary(table, study_file)]
    if record is not None:
        parts.append("## Provenance\n\n" + "\n".join(provenance_lines(record)))
    parts.append("## Axes\n\n" + "\n\n".join(_axis_section(table, a.name) for a in study.axes))
    if study.file.tables:
        parts.append("## Tables\n\n" + to_markdown(declared_table(table, t) for t in study.file.tables))
    if study.file.figures:
        parts.append(
            "## Figures\n\n"
            + "\n\n".join(
                f"### {f.title}\n\n"
                + (
                    f"_This figure ({f.name}) is not drawn: {skipped[f.name]}._"
                    if f.name in skipped
                    else markdown_figure(f"{f.name}.{fmt}", f.title)
                )
                + (f"\n\n{f.caption.strip()}" if f.caption else "")
                for f in study.file.figures
            )
        )
    parts.append("## All points\n\n" + to_markdown([points_table(table)]))
    failed = [r for r in table.rows if not r.ok]
    if failed:
        parts.append("## Failed points\n\n" + "\n".join(f"- `{r.point}`: {r.error}" for r in failed))
    warnings = _warnings(table.rows)
    if warnings:
        parts.append(
            "## Warnings from the backends\n\n"
            + "\n".join(
                f"- {text} ({', '.join(f'`{p}`' for p in points)})" for text, points in warnings.items()
            )
        )
    return "\n\n".join(p for p in parts if p) + "\n"


def _summary(table: ResultsTable, study_file: Path | None) -> str:
    rows = table.rows
    ok = sum(r.ok for r in rows)
    resumed = sum(r.resumed for r in rows)
    backends = Counter(r.backend for r in rows)
    lines = [
        f"- study file: `{study_file}`" if study_file else "",
        f"- points: {len(rows)} ({ok} ok, {len(rows) - ok} failed; {resumed} complete from an earlier run)",
        "- backends: " + ", ".join(f"{name} ({count} points)" for name, count in backends.items()),
    ]
    if table.study.reduced and table.study.file.reduced is not None:
        lines.append(f"- **reduced study**: {table.study.file.reduced.description.strip()}")
    scopes = {_scope_text(p.spec_data["scope"]) for p in table.study.points if p.spec_data.get("scope")}
    if scopes:
        lines.append(
            "- **cut-down iterations** (`scope`: " + "; ".join(sorted(scopes)) + "): times are those "
            "of the layers and micro-batches simulated, not of a full iteration"
        )
    return "\n".join(line for line in lines if line)


def _scope_text(scope: dict) -> str:
    parts = []
    for key, unit, per in (
        ("layers_per_stage", "layer", "stage"),
        ("micro_batches_per_replica", "micro-batch", "replica"),
    ):
        count = scope.get(key)
        if count is not None:
            parts.append(
                f"at most {count} {unit}{'' if count == 1 else ('es' if unit.endswith('h') else 's')} "
                f"per {per}"
            )
    return ", ".join(parts)


def _axis_section(table: ResultsTable, name: str) -> str:
    axis = table.study.axis(name)
    head = (
        f"**{name}**"
        + (f" (`{axis.path}`)" if axis.path else "")
        + (f": {axis.description.strip()}" if axis.description else "")
    )
    if any(level.description for level in axis.levels):
        return (
            head
            + "\n\n"
            + "\n".join(
                f"- `{level.label}`" + (f": {level.description.strip()}" if level.description else "")
                for level in axis.levels
            )
        )
    return head + "\n\nvalues: " + ", ".join(f"`{label}`" for label in axis.labels)


def declared_table(table: ResultsTable, layout: TableLayout) -> TextTable:
    rows = table.select(layout.where)
    columns = [table.columns[name] for name in layout.values]
    pivots = (
        [None]
        if layout.pivot is None
        else [
            label
            for label in table.study.axis(layout.pivot).labels
            if any(r.levels[layout.pivot] == label for r in rows)
        ]
    )
    formats = _formatters(columns, rows)
    headers = [*layout.rows] + [
        formats[c.name][1] + ("" if p is None else f" · {p}") for p in pivots for c in columns
    ]
    cells: dict[tuple[str, ...], dict[str | None, Row]] = defaultdict(dict)
    for row in rows:
        key = tuple(row.levels[a] for a in layout.rows)
        cells[key][None if layout.pivot is None else row.levels[layout.pivot]] = row
    body = []
    for key in sorted(cells, key=lambda k: _order(table, layout.rows, k)):
        body.append((*key, *(formats[c.name][0](cells[key].get(p), c.name) for p in pivots for c in columns)))
    return TextTable(layout.title, tuple(headers), tuple(body), layout.caption.strip())


def points_table(table: ResultsTable) -> TextTable:
    columns = [table.columns[name] for name in OVERVIEW_COLUMNS]
    formats = _formatters(columns, [r for r in table.rows if r.ok])
    axes = table.axes
    body = tuple(
        (
            f"`{r.point}`",
            *(r.levels[a] for a in axes),
            r.backend,
            r.status + (" (earlier run)" if r.resumed else ""),
            *(formats[c.name][0](r, c.name) for c in columns),
        )
        for r in table.rows
    )
    headers = ("point", *axes, "backend", "status", *(formats[c.name][1] for c in columns))
    return TextTable("every point", headers, body, "run directories: points/<point>/")


def _formatters(columns: list[Column], rows: list[Row]) -> dict[str, tuple[Callable, str]]:
    """Per column, (cell function, header): columns of one unit share the unit that suits their largest
    value in `rows`, so that a table shows all its times in ms, or all in s."""
    largest: dict[str, float] = defaultdict(float)
    for column in columns:
        for row in rows:
            if (value := row.values.get(column.name)) is not None:
                largest[column.unit] = max(largest[column.unit], abs(value))
    formats = {}
    for column in columns:
        scale, suffix = display_unit(column.unit, largest[column.unit])

        def cell(row: Row | None, name: str, scale: float = scale, count: bool = column.unit == "") -> str:
            value = None if row is None else row.values.get(name)
            if value is None:
                return "–"
            return f"{value:,.0f}" if count and float(value).is_integer() else format_number(value / scale)

        formats[column.name] = (cell, column.label + suffix)
    return formats


def _order(table: ResultsTable, axes: list[str], key: tuple[str, ...]) -> tuple[int, ...]:
    return tuple(table.study.axis(a).labels.index(label) for a, label in zip(axes, key, strict=True))


def _warnings(rows: tuple[Row, ...]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = defaultdict(list)
    for row in rows:
        for text in row.warnings:
            found[text].append(row.point)
    return dict(found)
