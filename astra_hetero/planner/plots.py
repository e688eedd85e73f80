"""The plan report's figures: the best plans' times, where their time goes, throughput by GPUs used.

matplotlib is imported here only, through the result plots' figure helpers (no pyplot state).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from astra_hetero.planner.driver import PlanReport
from astra_hetero.planner.table import Row
from astra_hetero.results.plots import PARTS, legend_below, new_figure, save_figure
from astra_hetero.results.report import time_unit

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

TOP = 12  # plans shown in the bar charts
COLORS = {"search": "#4c72b0", "refine": "#55a868", "baseline": "#c44e52", "spec": "#8172b2"}


def write_plots(report: PlanReport, rows: list[Row], out_dir: Path) -> list[Path]:
    shown = _shown(rows)
    if not shown:
        return []
    return [
        plot_best_plans(shown, out_dir / "best_plans.png"),
        plot_breakdown(shown, out_dir / "time_breakdown.png"),
        plot_throughput(report, rows, out_dir / "throughput_vs_gpus.png"),
    ]


def _shown(rows: list[Row]) -> list[Row]:
    """The fastest plans, plus the baseline and the spec's plan wherever they rank."""
    ok = [r for r in rows if r.values["status"] == "ok"]
    top = ok[:TOP]
    extra = [r for r in ok[TOP:] if r.trial.source in ("baseline", "spec")]
    return top + extra


def _label(row: Row) -> str:
    tag = {"baseline": " (baseline)", "spec": " (spec)"}.get(row.trial.source, "")
    plan = row.trial.plan
    mapping = plan.mapping_text if len(plan.mapping_text) <= 28 else plan.mapping_text[:26] + "…"
    return f"#{row.values['rank']}{tag} {plan.shape.label} [{mapping}] L {row.values['layers']}"


def plot_best_plans(rows: list[Row], path: Path) -> Path:
    """Simulated time per plan (bars) with the estimate that ranked it (markers)."""
    scale, unit = time_unit(max(r.trial.time_us for r in rows))
    fig = new_figure(width=9.0, height=1.6 + 0.32 * len(rows))
    ax = fig.subplots()
    labels = [_label(r) for r in rows]
    ax.barh(
        labels,
        [r.trial.time_us / scale for r in rows],
        color=[COLORS.get(r.trial.source, "#4c72b0") for r in rows],
        label="simulated",
    )
    ax.scatter(
        [r.trial.estimate_us / scale for r in rows],
        labels,
        marker="|",
        s=120,
        color="black",
        label="estimate",
        zorder=3,
    )
    return _finish_plan_bars(
        fig, ax, f"iteration time ({unit})", "predicted iteration time of the best plans", path
    )


def plot_breakdown(rows: list[Row], path: Path) -> Path:
    """Mean compute / exposed communication / idle per working GPU, per plan."""
    scale, unit = time_unit(max(r.trial.time_us for r in rows))
    fig = new_figure(width=9.0, height=1.6 + 0.32 * len(rows))
    ax = fig.subplots()
    labels = [_label(r) for r in rows]
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


def _finish_plan_bars(fig: Figure, ax: Axes, xlabel: str, title: str, path: Path) -> Path:
    """One bar per plan, the first plan on top, labels small, legend below."""
    ax.invert_yaxis()
    ax.set_xlabel(xlabel)
    ax.set_title(title)
    ax.tick_params(axis="y", labelsize="small")
    legend_below(fig, ax)
    return save_figure(fig, path)
