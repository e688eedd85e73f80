"""A study's declared figures as PNGs: bars, stacked bars or lines of result columns against an axis,
split into series and panels by other axes. Each figure carries its title, axis labels with units, and
a legend; missing values (failed points) leave a gap rather than a zero.

matplotlib is imported here only, and drives an Agg canvas attached to each figure (no pyplot state).
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from astra_hetero.results.plots import save_figure
from astra_hetero.results.report import format_number
from astra_hetero.studies.columns import Column, display_unit
from astra_hetero.studies.schema import FigureLayout
from astra_hetero.studies.table import ResultsTable, Row

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

DPI = 110
MAX_ANNOTATED_BARS = 24
COLORS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c")


@dataclass(frozen=True)
class Panel:
    """What one panel draws: the rows in it, the columns, the x values in order, the unit divisor."""

    layout: FigureLayout
    table: ResultsTable
    rows: Sequence[Row]
    columns: Sequence[Column]
    x_levels: list[str | None]
    scale: float

    def values(self, column: Column, **levels: str | None) -> list[float]:
        """The column at each x (NaN where no successful point is), in display units."""
        return [
            _value(self.rows, {self.layout.x: x, **levels}, column.name, self.scale) for x in self.x_levels
        ]

    def series(self) -> list[tuple[str, list[float]]]:
        """(legend label, values) per column × series value."""
        layout, several = self.layout, len(self.columns) > 1
        levels = _present(self.table, layout.series, self.rows)
        return [
            (
                _series_label(c, layout.series, level, several),
                self.values(c, **({layout.series: level} if layout.series else {})),
            )
            for c in self.columns
            for level in levels
        ]


def figure_gap(layout: FigureLayout, table: ResultsTable) -> str:
    """Why `layout` cannot be drawn ('' when it can): no successful point matches it, or every value
    it would show is missing (a derived column whose reference points failed) — an empty figure
    would say nothing, so the report says why instead."""
    rows = table.select(layout.where)
    failed = [r for r in table.rows if not r.ok]
    example = f" (e.g. `{failed[0].point}`: {_shortened(failed[0].error)})" if failed else ""
    if not rows:
        return f"no successful point matches it{example}"
    if not any(c in r.values for r in rows for c in layout.y):
        references = [
            f"{d.name} needs the points with {', '.join(f'{a} = {v}' for a, v in d.relative_to.items())}"
            for d in table.study.file.derived
            if d.name in layout.y
        ]
        because = f" ({'; '.join(references)}, and they failed)" if references and failed else ""
        return f"every value it would show is missing{because}{example}"
    return ""


def _shortened(error: str, limit: int = 160) -> str:
    """An error's first line, cut at a word past `limit` characters."""
    line = error.strip().splitlines()[0] if error.strip() else "failed"
    return line if len(line) <= limit else line[:limit].rsplit(" ", 1)[0] + " …"


def render_figure(layout: FigureLayout, table: ResultsTable, path: Path) -> Path | None:
    """Draw `layout` from the table's successful rows; None when it cannot be (see `figure_gap`)."""
    if figure_gap(layout, table):
        return None
    path = Path(path)
    save_figure(study_figure(layout, table), path, dpi=DPI)
    return path


def study_figure(layout: FigureLayout, table: ResultsTable) -> Figure:
    rows = table.select(layout.where)
    columns = [table.columns[name] for name in layout.y]
    values = [r.values[c.name] for r in rows for c in columns if c.name in r.values]
    scale, unit = display_unit(columns[0].unit, max((abs(v) for v in values), default=0.0))
    panels = _present(table, layout.panels, rows)
    x_levels = _present(table, layout.x, rows)
    marks = len(layout.y) * len(_present(table, layout.series, rows)) if layout.kind == "bar" else 1
    per_panel = 1.0 + len(x_levels) * min(0.35 * marks + 0.3, 1.6)
    fig = _figure(width=min(2.5 + len(panels) * per_panel, 16.0), height=4.6)
    axes = fig.subplots(1, len(panels), sharey=True, squeeze=False)[0]
    draw = {"bar": _bars, "stacked_bar": _stacked, "line": _lines}[layout.kind]
    for ax, panel in zip(axes, panels, strict=True):
        in_panel = [r for r in rows if layout.panels is None or r.levels[layout.panels] == panel]
        draw(ax, Panel(layout, table, in_panel, columns, x_levels, scale))
        for y in layout.reference_lines:
            ax.axhline(y / scale, color="black", linewidth=0.8, linestyle=":")
        if layout.panels is not None:
            ax.set_title(f"{layout.panels} = {panel}", fontsize="medium")
        ax.set_xlabel(layout.x_label or layout.x)
        ax.grid(axis="y", linewidth=0.4, alpha=0.5)
    unit = _with_sign(unit, columns)
    label = f"{layout.y_label}{unit}" if layout.y_label else _y_label(columns, unit)
    axes[0].set_ylabel(textwrap.fill(label, 44))  # two lines rather than cut at the figure's edges
    width = fig.get_figwidth()
    title = textwrap.fill(layout.title, max(30, int(width * 9.5)))  # never wider than the figure
    note = cut_down_note(table)
    if note:
        title += "\n" + textwrap.fill(f"({note})", max(36, int(width * 11)))
    fig.suptitle(title, fontsize="medium" if note else "large")
    handles, labels = axes[0].get_legend_handles_labels()
    if len(labels) > 1:
        fig.legend(
            handles,
            labels,
            loc="outside lower center",
            ncols=min(len(labels), 4),
            fontsize="small",
            frameon=False,
        )
    return fig


def cut_down_note(table: ResultsTable) -> str:
    """What a figure of a cut-down study must say: that its points ran part of an iteration (a
    `scope`), and that it is the study's reduced version."""
    study = table.study
    scopes = {repr(p.spec_data.get("scope")) for p in study.points if p.spec_data.get("scope")}
    parts = []
    if scopes:
        scope = next(p.spec_data["scope"] for p in study.points if p.spec_data.get("scope"))
        kept = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in scope.items() if v is not None)
        others = ", and others" if len(scopes) > 1 else ""
        parts.append(f"A cut-down iteration ({kept}{others}): times are of that part")
    if study.reduced and study.file.reduced is not None:
        parts.append(f"reduced study: {study.file.reduced.description}")
    return "; ".join(parts)


def _with_sign(unit: str, columns: Sequence[Column]) -> str:
    """` (%)` -> ` (%; + = longer, − = shorter)` for differences of times: the sign read out."""
    signs = {c.sign for c in columns}
    if len(signs) != 1 or not next(iter(signs)):
        return unit
    sign = next(iter(signs))
    return f"{unit[:-1]}; {sign})" if unit.endswith(")") else f" ({sign})"


def _y_label(columns: Sequence[Column], unit: str) -> str:
    if len(columns) == 1:
        return columns[0].label + unit
    return ("time" if columns[0].unit == "us" else "value") + unit


def _present(table: ResultsTable, axis: str | None, rows: Sequence[Row]) -> list[str | None]:
    """The axis's values that occur in `rows`, in the study's order ([None] for no axis)."""
    if axis is None:
        return [None]
    seen = {r.levels[axis] for r in rows}
    return [label for label in table.study.axis(axis).labels if label in seen]


def _value(rows: Sequence[Row], levels: dict[str, str | None], column: str, scale: float) -> float:
    for row in rows:
        if all(label is None or row.levels[axis] == label for axis, label in levels.items()):
            value = row.values.get(column)
            return math.nan if value is None else value / scale
    return math.nan


def _bars(ax: Axes, panel: Panel) -> None:
    series = panel.series()
    width = 0.8 / len(series)
    annotate = len(series) * len(panel.x_levels) <= MAX_ANNOTATED_BARS
    for i, (label, heights) in enumerate(series):
        offsets = [j - 0.4 + width * (i + 0.5) for j in range(len(panel.x_levels))]
        bars = ax.bar(offsets, heights, width=width, color=COLORS[i % len(COLORS)], label=label)
        if annotate:
            ax.bar_label(
                bars,
                labels=["" if math.isnan(h) else format_number(h) for h in heights],
                fontsize="x-small",
                padding=1,
            )
    _categorical(ax, panel.x_levels)
    if any(h < 0 for _, heights in series for h in heights):
        ax.axhline(0, color="black", linewidth=0.6)
        low, high = ax.get_ylim()
        if high <= 0:  # room above the zero line for the labels of zero bars
            ax.set_ylim(low, high + 0.08 * (high - low))


def _stacked(ax: Axes, panel: Panel) -> None:
    bottom = [0.0] * len(panel.x_levels)
    for i, column in enumerate(panel.columns):
        heights = panel.values(column)
        ax.bar(
            range(len(heights)),
            heights,
            bottom=bottom,
            width=0.7,
            color=COLORS[i % len(COLORS)],
            label=column.label,
        )
        bottom = [b + (0.0 if math.isnan(h) else h) for b, h in zip(bottom, heights, strict=True)]
    _categorical(ax, panel.x_levels)


def _lines(ax: Axes, panel: Panel) -> None:
    axis = panel.table.study.axis(panel.layout.x)
    values = {level.label: level.value for level in axis.levels}
    xs = [values[x] if axis.numeric else i for i, x in enumerate(panel.x_levels)]
    for i, (label, ys) in enumerate(panel.series()):
        ax.plot(xs, ys, marker="o", color=COLORS[i % len(COLORS)], label=label)
    if not axis.numeric:
        _categorical(ax, panel.x_levels)


def _series_label(column: Column, series_axis: str | None, level: str | None, several_columns: bool) -> str:
    parts = [column.label] if several_columns or series_axis is None else []
    if series_axis is not None:
        parts.append(f"{series_axis} = {level}")
    return " · ".join(parts)


def _categorical(ax: Axes, levels: list[str | None]) -> None:
    ax.set_xticks(range(len(levels)), [str(level) for level in levels])
    if sum(len(str(level)) for level in levels) > 60:
        ax.tick_params(axis="x", labelrotation=30)
        for label in ax.get_xticklabels():
            label.set_horizontalalignment("right")


def _figure(width: float, height: float) -> Figure:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig
