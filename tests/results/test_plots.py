"""The plots are written as real, non-empty PNG files, and each says what it shows, with units."""

from __future__ import annotations

import re

import pytest

from astra_hetero.results.compare import summarize
from astra_hetero.results.plots import (
    MAX_RANK_BARS,
    iteration_times_figure,
    plot_rank_breakdown,
    rank_breakdown_figure,
    stage_times_figure,
    write_plots,
)
from tests.results.builders import homogeneous_result, mixed_result, pipeline_result

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def is_png(path) -> bool:
    data = path.read_bytes()
    return data.startswith(PNG_SIGNATURE) and len(data) > 1000


def test_two_runs_give_breakdowns_stage_times_and_iteration_times(tmp_path) -> None:
    paths = write_plots([("homo", homogeneous_result()), ("mixed/het", mixed_result())], tmp_path)
    assert sorted(p.name for p in paths) == [
        "iteration.png",
        "ranks-homo.png",
        "ranks-mixed_het.png",
        "stages.png",
    ]
    assert all(is_png(p) for p in paths)


def test_one_run_has_no_iteration_comparison(tmp_path) -> None:
    paths = write_plots([("mixed", mixed_result())], tmp_path)
    assert sorted(p.name for p in paths) == ["ranks-mixed.png", "stages.png"]


def test_many_ranks_are_plotted_as_stage_and_gpu_groups(tmp_path) -> None:
    result = pipeline_result(["h100-sxm", "h100-sxm", "a100-80", "a100-80"], [50.0, 50.0, 80.0, 80.0], dp=256)
    assert result.num_ranks > MAX_RANK_BARS
    assert is_png(plot_rank_breakdown(result, tmp_path / "ranks.png", "1024 ranks"))


def _says_what_it_shows(fig) -> list[str]:
    """Problems: a figure without a title, an axes of bars without a labelled time unit, no legend."""
    problems = []
    titles = [fig.get_suptitle()] + [ax.get_title() for ax in fig.axes]
    if not any(titles):
        problems.append("no title")
    for ax in fig.axes:
        # Panels that share a time axis carry its label once.
        labels = " ".join(
            [ax.get_xlabel()] + [a.get_ylabel() for a in ax.get_shared_y_axes().get_siblings(ax)]
        )
        if ax.patches and not re.search(r"\((s|ms|µs)\)", labels):
            problems.append(f"no time unit in {labels!r}")
    return problems


def test_every_figure_says_what_it_shows_with_units() -> None:
    summaries = summarize([("homo", homogeneous_result()), ("mixed", mixed_result())])
    many = pipeline_result(["h100-sxm", "a100-80"], [50.0, 80.0], dp=64)
    figures = [
        rank_breakdown_figure(mixed_result(), "mixed"),
        rank_breakdown_figure(many, "many"),
        stage_times_figure(summaries),
        iteration_times_figure(summaries),
    ]
    for fig in figures:
        assert _says_what_it_shows(fig) == []
    breakdown = figures[0]
    legend = [t.get_text() for t in breakdown.legends[0].get_texts()]
    assert sorted(legend) == ["compute", "exposed communication", "idle", "iteration time 95 µs"]


def overlapping_tick_labels(figure) -> list[tuple[str, str]]:
    """Pairs of x tick labels of one axes whose drawn boxes overlap."""
    renderer = figure.canvas.get_renderer()
    figure.draw_without_rendering()
    clashes = []
    for ax in figure.axes:
        boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in ax.get_xticklabels() if t.get_text()]
        clashes += [
            (a, b) for (a, box_a), (b, box_b) in zip(boxes, boxes[1:], strict=False) if box_a.x1 > box_b.x0
        ]
    return clashes


@pytest.mark.parametrize(("runs", "named"), [(1, "5\nrtx-6000-ada"), (3, "5 · rtx-6000-ada")])
def test_stage_labels_with_their_gpu_types_never_collide_at_eight_stages(runs, named) -> None:
    gpus = ["h100-sxm", "h100-sxm", "a100-80", "a100-80", "l40s", "rtx-6000-ada", "mi300x", "v100-32"]
    result = pipeline_result(gpus, [10.0 * (s + 1) for s in range(8)], dp=2)
    figure = stage_times_figure(summarize([(f"run-{i}", result) for i in range(runs)]))
    labels = [t.get_text() for t in figure.axes[0].get_xticklabels()]
    assert labels[5] == named  # every stage is named with its GPU type (upright when many runs)
    assert overlapping_tick_labels(figure) == []
