"""PNG plots of one or several runs: per-rank time breakdown, per-stage time, iteration time.

matplotlib is imported inside the functions only (the rest of the package never needs it) and drives
an Agg canvas attached to each figure, so no global pyplot state or GUI backend is involved.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from astra_hetero.results.aggregate import GroupStats, group_ranks
from astra_hetero.results.compare import RunSummary, summarize
from astra_hetero.results.model import RunResult
from astra_hetero.results.report import time_unit

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

# Above this many ranks, bars show (stage, GPU type) groups instead of single ranks.
MAX_RANK_BARS = 64
PARTS = (("compute", "#4c72b0"), ("exposed comm", "#dd8452"), ("idle", "#c7c7c7"))
DPI = 110


def write_plots(results: Sequence[tuple[str, RunResult]], out_dir: Path) -> list[Path]:
    """All plots for `results` as PNGs in `out_dir`: a breakdown per run, stage times, and (for two
    runs or more) iteration times side by side. Returns the paths written."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    summaries = summarize(results)
    names = _file_stems([s.label for s in summaries])
    paths = [
        plot_rank_breakdown(s.result, out_dir / f"ranks-{name}.png", s.label)
        for s, name in zip(summaries, names, strict=True)
    ]
    paths.append(plot_stage_times(summaries, out_dir / "stages.png"))
    if len(summaries) >= 2:
        paths.append(plot_iteration_times(summaries, out_dir / "iteration.png"))
    return paths


def plot_rank_breakdown(result: RunResult, path: Path, label: str = "") -> Path:
    """Horizontal stacked bars (compute / exposed comm / idle) per rank, or per (stage, GPU type)
    group with the group's mean when there are more than MAX_RANK_BARS ranks."""
    per_rank = result.num_ranks <= MAX_RANK_BARS
    groups = group_ranks(result, "rank" if per_rank else "stage_gpu")
    gpu_of = {f"rank {r.rank}": r for r in result.ranks}
    labels = [
        f"{g.label} · {gpu_of[g.label].gpu} · s{gpu_of[g.label].stage}"
        if per_rank
        else f"{g.label} (×{g.num_ranks})"
        for g in groups
    ]
    scale, unit = time_unit(result.iteration_time_us)
    fig = _figure(width=9.0, height=1.5 + 0.22 * len(groups))
    ax = fig.subplots()
    _stacked_barh(ax, labels, groups, scale)
    ax.axvline(result.iteration_time_us / scale, color="black", linewidth=0.8, linestyle="--")
    ax.set_xlabel(f"time per iteration ({unit})" + ("" if per_rank else ", mean over the group's ranks"))
    ax.set_title(f"{label or result.backend}: where each rank's iteration goes")
    _legend(fig, ax)
    return _save(fig, path)


def plot_stage_times(summaries: Sequence[RunSummary], path: Path) -> Path:
    """Per stage, mean compute / exposed comm / idle of its ranks; one panel per run, shared time axis."""
    from matplotlib.ticker import MaxNLocator

    scale, unit = time_unit(max(s.result.iteration_time_us for s in summaries))
    widths = [max(len(s.stages), 2) for s in summaries]
    fig = _figure(width=min(2.5 + 0.35 * sum(widths) + 1.0 * len(summaries), 18.0), height=4.2)
    axes = fig.subplots(1, len(summaries), sharey=True, squeeze=False, width_ratios=widths)[0]
    for ax, summary in zip(axes, summaries, strict=True):
        stages = [g.stages[0] for g in summary.stages]
        bottom = [0.0] * len(stages)
        for (part, color), attr in zip(PARTS, ("compute_us", "exposed_comm_us", "idle_us"), strict=True):
            values = [getattr(g, attr).mean / scale for g in summary.stages]
            ax.bar(stages, values, bottom=bottom, color=color, label=part)
            bottom = [a + b for a, b in zip(bottom, values, strict=True)]
        ax.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=16))
        ax.set_title(summary.label, fontsize="medium")
        ax.set_xlabel("pipeline stage")
    axes[0].set_ylabel(f"mean time per rank ({unit})")
    _legend(fig, axes[0])
    fig.suptitle("time per pipeline stage")
    return _save(fig, path)


def plot_iteration_times(summaries: Sequence[RunSummary], path: Path) -> Path:
    """One bar per run, annotated with the time and its ratio to the first run."""
    scale, unit = time_unit(max(s.result.iteration_time_us for s in summaries))
    fig = _figure(width=min(3.0 + 1.4 * len(summaries), 14.0), height=4.0)
    ax = fig.subplots()
    values = [s.result.iteration_time_us / scale for s in summaries]
    bars = ax.bar([s.label for s in summaries], values, color=PARTS[0][1])
    notes = [
        f"{v:,.2f} {unit}\n" + ("n/a" if math.isnan(s.ratio_to_first) else f"{s.ratio_to_first:.2f}x")
        for v, s in zip(values, summaries, strict=True)
    ]
    ax.bar_label(bars, labels=notes, fontsize="small", padding=2)
    ax.set_ylim(0, max(values + [0.0]) * 1.2 or 1.0)
    ax.set_ylabel(f"iteration time ({unit})")
    ax.set_title(f"iteration time (ratio to {summaries[0].label})")
    ax.tick_params(axis="x", labelrotation=15 if len(summaries) > 3 else 0)
    return _save(fig, path)


def _stacked_barh(ax: Axes, labels: list[str], groups: list[GroupStats], scale: float) -> None:
    left = [0.0] * len(groups)
    for (part, color), attr in zip(PARTS, ("compute_us", "exposed_comm_us", "idle_us"), strict=True):
        values = [getattr(g, attr).mean / scale for g in groups]
        ax.barh(labels, values, left=left, color=color, label=part, height=0.8)
        left = [a + b for a, b in zip(left, values, strict=True)]
    ax.invert_yaxis()  # rank 0 / stage 0 at the top
    ax.tick_params(axis="y", labelsize="small")


def _legend(fig: Figure, ax: Axes) -> None:
    # Below the axes, so that it never hides a bar.
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(
        handles, labels, loc="outside lower center", ncols=len(labels), fontsize="small", frameon=False
    )


def _figure(width: float, height: float) -> Figure:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _save(fig: Figure, path: Path) -> Path:
    path = Path(path)
    fig.savefig(path, dpi=DPI, format="png")
    return path


def _file_stems(labels: Sequence[str]) -> list[str]:
    """File-name-safe, distinct stems for run labels."""
    stems: list[str] = []
    for label in labels:
        stem = re.sub(r"[^A-Za-z0-9._-]+", "_", label).strip("_") or "run"
        candidate, n = stem, 2
        while candidate in stems:
            candidate, n = f"{stem}-{n}", n + 1
        stems.append(candidate)
    return stems
