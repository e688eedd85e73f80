"""Plots of one or several runs (PNG, SVG or PDF): per-rank time breakdown, per-stage time, iteration time.

matplotlib is imported inside the functions only (the rest of the package never needs it) and drives
an Agg canvas attached to each figure, so no global pyplot state or GUI backend is involved.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from astra_hetero.results.aggregate import GroupStats, group_ranks
from astra_hetero.results.compare import ASTRA_SPLIT_KEY, RunSummary, summarize
from astra_hetero.results.figure_files import FIGURE_FORMATS
from astra_hetero.results.model import RunResult
from astra_hetero.results.report import time_unit

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

# Above this many ranks, bars show (stage, GPU type) groups instead of single ranks.
MAX_RANK_BARS = 64
PARTS = (("compute", "#4c72b0"), ("exposed communication", "#dd8452"), ("idle", "#c7c7c7"))
DPI = 110


def write_plots(results: Sequence[tuple[str, RunResult]], out_dir: Path, fmt: str = "png") -> list[Path]:
    """All plots for `results` in `out_dir` (as `fmt`: png, svg or pdf): a breakdown per run, stage
    times, and (for two runs or more) iteration times side by side. Returns the paths written."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    summaries = summarize(results)
    names = _file_stems([s.label for s in summaries])
    paths = [
        plot_rank_breakdown(s.result, out_dir / f"ranks-{name}.{fmt}", s.label)
        for s, name in zip(summaries, names, strict=True)
    ]
    paths += [
        save_figure(iteration_series_figure(s.result, s.label), out_dir / f"iterations-{name}.{fmt}")
        for s, name in zip(summaries, names, strict=True)
        if len(s.result.iterations) > 1 or s.result.events
    ]
    paths.append(plot_stage_times(summaries, out_dir / f"stages.{fmt}"))
    if len(summaries) >= 2:
        paths.append(plot_iteration_times(summaries, out_dir / f"iteration.{fmt}"))
    return paths


def _stage_tag(stage: int | None) -> str:
    return "idle" if stage is None else f"s{stage}"


def plot_rank_breakdown(result: RunResult, path: Path, label: str = "") -> Path:
    return save_figure(rank_breakdown_figure(result, label), path)


def rank_breakdown_figure(result: RunResult, label: str = "") -> Figure:
    """Horizontal stacked bars (compute / exposed comm / idle) per rank, or per (stage, GPU type)
    group with the group's mean when there are more than MAX_RANK_BARS ranks."""
    per_rank = result.num_ranks <= MAX_RANK_BARS
    groups = group_ranks(result, "rank" if per_rank else "stage_gpu")
    gpu_of = {f"rank {r.rank}": r for r in result.ranks}
    labels = [
        f"{g.label} · {gpu_of[g.label].gpu} · {_stage_tag(gpu_of[g.label].stage)}"
        if per_rank
        else f"{g.label} (×{g.num_ranks})"
        for g in groups
    ]
    scale, unit = time_unit(result.iteration_time_us)
    fig = new_figure(width=9.0, height=1.5 + 0.22 * len(groups))
    ax = fig.subplots()
    _stacked_barh(ax, labels, groups, scale)
    iteration = result.iteration_time_us / scale
    ax.axvline(
        iteration,
        color="black",
        linewidth=0.8,
        linestyle="--",
        label=f"iteration time {iteration:,.4g} {unit}",
    )
    ax.set_xlabel(
        f"time in one training iteration ({unit})" + ("" if per_rank else ", mean over the group's ranks")
    )
    ax.set_ylabel("rank · GPU type · pipeline stage" if per_rank else "pipeline stage · GPU type (ranks)")
    ax.set_title(
        f"{label or result.backend} ({result.backend}): each rank's iteration split into compute, "
        "exposed communication and idle time",
        fontsize="medium",
        wrap=True,
    )
    legend_below(fig, ax)
    return fig


def plot_stage_times(summaries: Sequence[RunSummary], path: Path) -> Path:
    return save_figure(stage_times_figure(summaries), path)


def stage_times_figure(summaries: Sequence[RunSummary]) -> Figure:
    """Per stage, mean compute / exposed comm / idle of its ranks; one panel per run, shared time axis."""
    from matplotlib.ticker import MaxNLocator

    scale, unit = time_unit(max(s.result.iteration_time_us for s in summaries))
    widths = [max(len(s.stages), 2) for s in summaries]
    # Up to 8 stages, each stage's GPU types go under it: across, one per line, where the figure can
    # give every stage the width of its longest name (small font: ~0.075 in a character), else
    # turned upright; past 8 stages, stage numbers only.
    longest = max((len(gpu) for s in summaries for g in s.stages for gpu in g.gpus), default=4)
    named = max(len(s.stages) for s in summaries) <= 8
    per_stage = max(0.35, 0.075 * longest + 0.1) if named else 0.35
    upright = named and 2.5 + per_stage * sum(widths) + 1.0 * len(summaries) > 18.0
    per_stage = 0.45 if upright else per_stage
    fig = new_figure(width=min(2.5 + per_stage * sum(widths) + 1.0 * len(summaries), 18.0), height=4.4)
    axes = fig.subplots(1, len(summaries), sharey=True, squeeze=False, width_ratios=widths)[0]
    for ax, summary in zip(axes, summaries, strict=True):
        stages = [g.stages[0] for g in summary.stages]
        bottom = [0.0] * len(stages)
        for (part, color), attr in zip(PARTS, ("compute_us", "exposed_comm_us", "idle_us"), strict=True):
            values = [getattr(g, attr).mean / scale for g in summary.stages]
            ax.bar(stages, values, bottom=bottom, color=color, label=part)
            bottom = [a + b for a, b in zip(bottom, values, strict=True)]
        if upright:
            ax.set_xticks(
                stages,
                labels=[f"{s} · {', '.join(g.gpus)}" for s, g in zip(stages, summary.stages, strict=True)],
                fontsize="small",
                rotation=90,
            )
        elif named:
            ax.set_xticks(
                stages,
                labels=[f"{s}\n" + "\n".join(g.gpus) for s, g in zip(stages, summary.stages, strict=True)],
                fontsize="small",
            )
        else:
            ax.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=16))
        split = " — exposed comm includes bubbles" if ASTRA_SPLIT_KEY in summary.result.meta else ""
        ax.set_title(f"{summary.label} ({summary.result.backend}{split})", fontsize="medium")
        ax.set_xlabel("pipeline stage" + (" and its GPU types" if named else ""))
    axes[0].set_ylabel(f"mean time per rank in one iteration ({unit})")
    legend_below(fig, axes[0])
    fig.suptitle("time per pipeline stage\n(mean over its ranks)", fontsize="medium")
    return fig


def plot_iteration_times(summaries: Sequence[RunSummary], path: Path) -> Path:
    return save_figure(iteration_times_figure(summaries), path)


def iteration_times_figure(summaries: Sequence[RunSummary]) -> Figure:
    """One bar per run, annotated with the time and its ratio to the first run."""
    scale, unit = time_unit(max(s.result.iteration_time_us for s in summaries))
    fig = new_figure(width=min(3.0 + 1.4 * len(summaries), 14.0), height=4.0)
    ax = fig.subplots()
    values = [s.result.iteration_time_us / scale for s in summaries]
    bars = ax.bar([s.label for s in summaries], values, color=PARTS[0][1])
    notes = [
        f"{v:,.2f} {unit}\n" + ("n/a" if math.isnan(s.ratio_to_first) else f"{s.ratio_to_first:.2f}x")
        for v, s in zip(values, summaries, strict=True)
    ]
    ax.bar_label(bars, labels=notes, fontsize="small", padding=2)
    ax.set_ylim(0, max(values + [0.0]) * 1.2 or 1.0)
    ax.set_xticks(range(len(summaries)), labels=[f"{s.label}\n({s.result.backend})" for s in summaries])
    ax.set_ylabel(f"time of one training iteration ({unit})")
    ax.set_title(f"iteration time per run, and its ratio to {summaries[0].label}", fontsize="medium")
    ax.tick_params(axis="x", labelrotation=15 if len(summaries) > 3 else 0)
    return fig


def iteration_series_figure(result: RunResult, label: str = "") -> Figure:
    """Time of each iteration of one run; below it, one lane per dynamics event spanning the
    iterations it overlaps (lanes, not shading: two events in one iteration never blend into a colour
    of neither)."""
    times = [it["time_us"] for it in result.iterations] or [result.iteration_time_us]
    scale, unit = time_unit(max(times))
    events = list(result.events)
    lanes = 0.3 * len(events) + 0.5 if events else 0.0
    fig = new_figure(width=min(4.5 + 0.25 * len(times), 14.0), height=3.6 + lanes)
    if events:
        ax, lane_ax = fig.subplots(2, 1, sharex=True, height_ratios=[3.1, lanes])
    else:
        ax, lane_ax = fig.subplots(), None
    ax.plot(range(len(times)), [t / scale for t in times], marker="o", color=PARTS[0][1])
    ax.set_ylim(0, max(times) / scale * 1.15)
    ax.set_ylabel(f"iteration time ({unit})")
    ax.set_title(f"{label or result.backend}: time of each iteration", fontsize="medium")
    bottom = lane_ax if lane_ax is not None else ax
    if lane_ax is not None:
        _event_lanes(lane_ax, events, times)
    bottom.set_xlabel("iteration")
    if len(times) <= 30:
        bottom.set_xticks(range(len(times)))
    return fig


EVENT_COLORS = ("#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860")


def _event_lanes(ax: Axes, events: list[dict], times: list[float]) -> None:
    """One lane per event, first on top, an opaque bar over the iterations it overlaps."""
    ends, total = [], 0.0
    for t in times:
        total += t
        ends.append(total)
    for k, event in enumerate(events):
        first, last = event_iterations(ends, event["start_us"], event["end_us"])
        ax.barh(
            k, last - first + 0.9, left=first - 0.45, height=0.6, color=EVENT_COLORS[k % len(EVENT_COLORS)]
        )
    ax.set_yticks(range(len(events)), labels=[f"dynamics[{e['index']}] {e['event']}" for e in events])
    ax.tick_params(axis="y", labelsize="small")
    ax.set_ylim(len(events) - 0.5, -0.5)
    ax.set_title("iterations each dynamics event overlaps", fontsize="small", loc="left")


def event_iterations(ends_us: Sequence[float], start_us: float, end_us: float | None) -> tuple[int, int]:
    """The first and last iteration (by index) that overlap [start, end) of an event; iteration i spans
    [ends[i - 1], ends[i])."""
    last_index = len(ends_us) - 1
    first = next((i for i, end in enumerate(ends_us) if start_us < end), last_index)
    if end_us is None:
        return first, last_index
    last = next((i for i, end in enumerate(ends_us) if end_us <= end), last_index)
    return first, max(first, last)


def _stacked_barh(ax: Axes, labels: list[str], groups: list[GroupStats], scale: float) -> None:
    left = [0.0] * len(groups)
    for (part, color), attr in zip(PARTS, ("compute_us", "exposed_comm_us", "idle_us"), strict=True):
        values = [getattr(g, attr).mean / scale for g in groups]
        ax.barh(labels, values, left=left, color=color, label=part, height=0.8)
        left = [a + b for a, b in zip(left, values, strict=True)]
    ax.invert_yaxis()  # rank 0 / stage 0 at the top
    ax.tick_params(axis="y", labelsize="small")


def legend_below(fig: Figure, ax: Axes, max_columns: int | None = None) -> None:
    # Below the axes, so that it never hides a bar.
    handles, labels = ax.get_legend_handles_labels()
    columns = len(labels) if max_columns is None else min(len(labels), max_columns)
    fig.legend(handles, labels, loc="outside lower center", ncols=columns, fontsize="small", frameon=False)


def new_figure(width: float, height: float) -> Figure:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def save_figure(fig: Figure, path: Path, dpi: int = DPI) -> Path:
    """Write `fig` in the format its file name ends in (png, svg, pdf), whole: to a temporary file
    beside `path`, then renamed over it."""
    path = Path(path)
    fmt = path.suffix.lstrip(".").lower()
    if fmt not in FIGURE_FORMATS:
        raise ValueError(f"{path}: figures are written as {', '.join(FIGURE_FORMATS)}, not {fmt!r}")
    partial = path.with_name(f".{path.name}.partial")
    try:
        fig.savefig(partial, dpi=dpi, format=fmt)
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
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
