"""The plan report's figures: the best plans' times, where their time goes, throughput by GPUs used.

matplotlib is imported here only, through the result plots' figure helpers (no pyplot state).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from astra_hetero.planner.dimensions import describe_options
from astra_hetero.planner.driver import PlanReport
from astra_hetero.planner.table import Row
from astra_hetero.results.plots import PARTS, legend_below, new_figure, save_figure
from astra_hetero.results.report import time_unit

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

TOP = 12  # plans shown in the bar charts
COLORS = {"search": "#4c72b0", "refine": "#55a868", "baseline": "#c44e52", "spec": "#8172b2"}
# What a bar's colour says: where the plan came from (every bar is a simulated time).
SOURCES = {
    "search": "found by the search",
    "refine": "refined split of a found plan",
    "baseline": "homogeneous-assumption baseline",
    "spec": "the spec's own plan",
}
MAPPING_LINE = 44  # characters of a mapping on one label line; longer ones break at a stage


def write_plots(report: PlanReport, rows: list[Row], out_dir: Path, fmt: str = "png") -> list[Path]:
    shown = _shown(rows)
    if not shown:
        return []
    return [
        plot_best_plans(shown, out_dir / f"best_plans.{fmt}"),
        plot_breakdown(shown, out_dir / f"time_breakdown.{fmt}"),
        plot_throughput(report, rows, out_dir / f"throughput_vs_gpus.{fmt}"),
    ]


def _shown(rows: list[Row]) -> list[Row]:
    """The fastest plans, plus the baseline and the spec's plan wherever they rank."""
    ok = [r for r in rows if r.values["status"] == "ok"]
    top = ok[:TOP]
    extra = [r for r in ok[TOP:] if r.trial.source in ("baseline", "spec")]
    return top + extra


def _labels(rows: list[Row]) -> list[str]:
    """Per plan: `#1 tp4·pp2·dp1 · layers 2 2 · micro-batches 4 4`; below it the options in which
    the plans shown differ (`gpipe`), then the whole mapping — never cut, since two plans may differ
    only in its last stage — each stage's run of one node group written once with its count."""
    names = [name for name, _ in rows[0].trial.plan.options] if rows else []
    varying = {n for n in names if len({repr(r.trial.plan.option(n)) for r in rows}) > 1}
    labels = []
    for row in rows:
        plan = row.trial.plan
        tag = {"baseline": " (baseline)", "spec": " (spec)"}.get(row.trial.source, "")
        lines = [
            f"#{row.values['rank']}{tag} {plan.shape.label} · layers {row.values['layers']}"
            f" · micro-batches {row.values['micro_batches']}"
        ]
        options = describe_options(tuple((n, v) for n, v in plan.options if n in varying))
        lines += [options] if options else []
        labels.append("\n".join([*lines, *_mapping_lines(plan.mapping_text)]))
    return labels


def compact_mapping(mapping: str) -> str:
    """`h100 h100 | a100 l40s l40s` -> `h100×2 | a100 l40s×2` (each stage's replicas in order)."""
    stages = []
    for stage in mapping.split(" | "):
        runs: list[list[str]] = []
        for name in stage.split():
            if runs and runs[-1][0] == name:
                runs[-1].append(name)
            else:
                runs.append([name])
        stages.append(" ".join(r[0] if len(r) == 1 else f"{r[0]}×{len(r)}" for r in runs))
    return " | ".join(stages)


def _mapping_lines(mapping: str) -> list[str]:
    lines: list[str] = []
    for stage in compact_mapping(mapping).split(" | "):
        if lines and len(lines[-1]) + 3 + len(stage) <= MAPPING_LINE:
            lines[-1] += " | " + stage
        else:
            lines.append(stage)
    return lines


def _source_legend(ax: Axes, rows: list[Row]) -> None:
    """One legend entry per plan source shown (the bars' colours), and the estimate marker."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    present = [s for s in SOURCES if any(r.trial.source == s for r in rows)]
    handles = [Patch(color=COLORS[s], label=f"simulated, {SOURCES[s]}") for s in present]
    handles.append(
        Line2D(
            [],
            [],
            marker="|",
            linestyle="none",
            markersize=11,
            color="black",
            label="estimate that ranked it",
        )
    )
    ax.figure.legend(handles=handles, loc="outside lower center", ncols=2, fontsize="small", frameon=False)


def plot_best_plans(rows: list[Row], path: Path) -> Path:
    return save_figure(best_plans_figure(rows), path)


def best_plans_figure(rows: list[Row]) -> Figure:
    """Simulated time per plan (bars, coloured by where the plan came from) with the estimate that
    ranked it (markers)."""
    scale, unit = time_unit(max(r.trial.time_us for r in rows))
    fig = new_figure(width=9.0, height=_height(rows))
    ax = fig.subplots()
    labels = _labels(rows)
    ax.barh(
        labels,
        [r.trial.time_us / scale for r in rows],
        color=[COLORS.get(r.trial.source, "#4c72b0") for r in rows],
    )
    ax.scatter(
        [r.trial.estimate_us / scale for r in rows], labels, marker="|", s=120, color="black", zorder=3
    )
    _source_legend(ax, rows)
    _style_plan_bars(ax, f"iteration time ({unit})", "simulated iteration time of the best plans")
    return fig


def plot_breakdown(rows: list[Row], path: Path) -> Path:
    """Mean compute / exposed communication / idle per working GPU, per plan."""
    scale, unit = time_unit(max(r.trial.time_us for r in rows))
    fig = new_figure(width=9.0, height=_height(rows))
    ax = fig.subplots()
    labels = _labels(rows)
    left = [0.0] * len(rows)
    for (part, color), key in zip(
        PARTS, ("mean_compute_us", "mean_exposed_comm_us", "mean_idle_us"), strict=True
    ):
        values = [float(r.values[key]) / scale for r in rows]
        ax.barh(labels, values, left=left, color=color, label=part)
        left = [a + b for a, b in zip(left, values, strict=True)]
    return _finish_plan_bars(
        fig, ax, f"mean time per working GPU ({unit})", "where each plan's iteration goes", path
    )


def plot_throughput(report: PlanReport, rows: list[Row], path: Path) -> Path:
    """Tokens per second against the GPUs a plan uses, every simulated plan."""
    fig = new_figure(width=7.0, height=4.5)
    ax = fig.subplots()
    for source, color in COLORS.items():
        chosen = [r for r in rows if r.trial.source == source and r.values["status"] == "ok"]
        if chosen:
            ax.scatter(
                [r.values["gpus_used"] for r in chosen],
                [r.values["tokens_per_s"] for r in chosen],
                color=color,
                label=source,
                alpha=0.75,
                edgecolors="none",
            )
    best = next((r for r in rows if r.trial is report.best), None)
    if best is not None:
        ax.scatter(
            [best.values["gpus_used"]],
            [best.values["tokens_per_s"]],
            marker="*",
            s=220,
            color="gold",
            edgecolors="black",
            label="best",
            zorder=3,
        )
    ax.set_xlabel(f"GPUs used (of {report.problem.num_gpus})")
    ax.set_ylabel("tokens per second")
    ax.set_title("throughput against GPUs used")
    legend_below(fig, ax)
    return save_figure(fig, path)


def _height(rows: list[Row]) -> float:
    """Room for every label's lines (a plan, then its mapping)."""
    lines = sum(label.count("\n") + 1 for label in _labels(rows))
    return 1.9 + 0.17 * lines + 0.08 * len(rows)


def _finish_plan_bars(fig: Figure, ax: Axes, xlabel: str, title: str, path: Path) -> Path:
    _style_plan_bars(ax, xlabel, title)
    legend_below(fig, ax)
    return save_figure(fig, path)


def _style_plan_bars(ax: Axes, xlabel: str, title: str) -> None:
    """One bar per plan, the first plan on top, labels small."""
    ax.invert_yaxis()
    ax.set_xlabel(xlabel)
    ax.set_title(title)
    ax.tick_params(axis="y", labelsize="small")
