"""The figure a sweep draws of its result: each point's iteration time, split into what its ranks spend
it on (compute, exposed communication, idle: the means per rank add up to the iteration time), against
the swept values. A failed point leaves a gap, marked "failed".

matplotlib is imported through the result plots' figure helpers only (no pyplot state).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from astra_hetero.results.plots import PARTS, legend_below, new_figure, save_figure
from astra_hetero.results.report import format_number, time_unit
from astra_hetero.sweep.plan import Sweep
from astra_hetero.sweep.run import PointOutcome

if TYPE_CHECKING:
    from matplotlib.figure import Figure

FIGURE_STEM = "sweep"  # OUT_DIR/sweep.png (or .svg, .pdf)
PART_METRICS = ("mean_compute_us", "mean_exposed_comm_us", "mean_idle_us")


def write_sweep_figure(
    sweep: Sweep, outcomes: Sequence[PointOutcome], out_dir: Path, fmt: str = "png"
) -> Path:
    return save_figure(sweep_figure(sweep, outcomes), Path(out_dir) / f"{FIGURE_STEM}.{fmt}")


def sweep_figure(sweep: Sweep, outcomes: Sequence[PointOutcome]) -> Figure:
    done = [o for o in outcomes if o.ok]
    scale, unit = time_unit(max((o.metrics["iteration_time_us"] for o in done), default=1.0))
    fig = new_figure(width=min(max(6.5, 3.0 + 0.75 * len(outcomes)), 16.0), height=4.6)
    ax = fig.subplots()
    xs = range(len(outcomes))
    bottom = [0.0] * len(outcomes)
    for (part, colour), metric in zip(PARTS, PART_METRICS, strict=True):
        heights = [o.metrics[metric] / scale if o.ok else 0.0 for o in outcomes]
        ax.bar(xs, heights, bottom=bottom, width=0.7, color=colour, label=part)
        bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    for x, outcome in zip(xs, outcomes, strict=True):
        text = format_number(outcome.metrics["iteration_time_us"] / scale) if outcome.ok else "failed"
        ax.annotate(
            text, (x, bottom[x]), xytext=(0, 2), textcoords="offset points", ha="center", fontsize="small"
        )
    ax.set_xticks(list(xs), labels=[point_label(sweep, o) for o in outcomes], fontsize="small")
    if sum(len(point_label(sweep, o)) for o in outcomes) > 8 * len(outcomes) + 20:
        ax.tick_params(axis="x", labelrotation=30)
        for label in ax.get_xticklabels():
            label.set_horizontalalignment("right")
    ax.set_ylim(0, max(bottom + [0.0]) * 1.15 or 1.0)
    ax.set_ylabel(f"iteration time ({unit}),\nsplit as a mean rank spends it")
    ax.set_xlabel(_x_label(sweep))
    ax.set_title(f"{sweep.name}: iteration time of each point, and where it goes", fontsize="medium")
    legend_below(fig, ax)
    return fig


def point_label(sweep: Sweep, outcome: PointOutcome) -> str:
    """The point's swept values (`100` for one key, `gbps=100, layers=auto` for several), or the
    variant's name."""
    if not sweep.override_keys or not outcome.overrides:
        return outcome.name
    if len(sweep.override_keys) == 1:
        return _value(outcome.overrides.get(sweep.override_keys[0], ""))
    if _is_variants(sweep):
        return re.sub(r"^\d+-", "", outcome.name)
    return ", ".join(f"{_short(k)}={_value(outcome.overrides.get(k, ''))}" for k in sweep.override_keys)


def _x_label(sweep: Sweep) -> str:
    if _is_variants(sweep) or not sweep.override_keys:
        return "variant"
    return ", ".join(sweep.override_keys)


def _is_variants(sweep: Sweep) -> bool:
    """Variants are named; grid points are named by their values (`000-nic.gbps=100`)."""
    return any("=" not in p.name for p in sweep.points)


def _short(key: str) -> str:
    return ".".join(re.sub(r"\[\d+\]", "", key).split(".")[-2:])


def _value(value: Any) -> str:
    return format_number(value) if isinstance(value, float) else str(value)
