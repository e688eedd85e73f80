"""The plan report's figures: the legend says what each bar colour means (where the plan came from)
and every label names its plan whole, so two plans never share a label."""

from __future__ import annotations

import pytest

from astra_hetero.planner.base import Trial
from astra_hetero.planner.candidate import Plan
from astra_hetero.planner.estimate import Assessment
from astra_hetero.planner.evaluation import Evaluation
from astra_hetero.planner.plots import COLORS, SOURCES, _labels, best_plans_figure, compact_mapping
from astra_hetero.planner.shape import Shape
from astra_hetero.planner.table import Row

LONG = (("h100",) * 4, ("h100",) * 3 + ("a100",), ("a100",) * 4, ("l40s",) * 3 + ("a100",))


def row(rank, source, grid, schedule="1f1b", time_us=5000.0):
    plan = Plan(
        Shape(2, len(grid), len(grid[0])), (("schedule", schedule),), grid, (1,) * len(grid), (4,) * 4
    )
    trial = Trial(plan, Assessment(time_us * 900, time_us * 500), 10.0, source, Evaluation(time_us))
    values = {"rank": rank, "layers": " ".join(map(str, plan.layers)), "micro_batches": "4 4 4 4"}
    return Row(trial, values)


def test_plans_that_differ_only_in_the_last_stage_or_an_option_get_different_labels():
    last_stage = LONG[:3] + (("l40s",) * 4,)
    rows = [row(1, "search", LONG), row(2, "refine", last_stage), row(3, "baseline", LONG, "gpipe")]
    labels = _labels(rows)
    assert len(set(labels)) == 3
    assert "l40s×3 a100" in labels[0] and "l40s×4" in labels[1]  # the whole mapping, compacted
    assert labels[0].splitlines()[1] == "1f1b" and labels[2].splitlines()[1] == "gpipe"  # what varies


@pytest.mark.parametrize(
    ("mapping", "compact"),
    [
        ("h100 h100 | a100 l40s l40s", "h100×2 | a100 l40s×2"),
        ("a b a", "a b a"),
        ("cluster order", "cluster order"),
    ],
)
def test_a_mapping_is_compacted_without_losing_its_order(mapping, compact):
    assert compact_mapping(mapping) == compact


def test_the_legend_names_each_colour_by_the_plans_source():
    rows = [row(1, "search", LONG), row(2, "baseline", LONG, "gpipe", 7000.0), row(3, "spec", LONG[::-1])]
    figure = best_plans_figure(rows)
    legend = [t.get_text() for lg in figure.legends for t in lg.get_texts()]
    assert legend == [
        "simulated, found by the search",
        "simulated, homogeneous-assumption baseline",
        "simulated, the spec's own plan",
        "estimate that ranked it",
    ]
    from matplotlib.colors import to_rgba

    bars = figure.axes[0].patches
    assert [b.get_facecolor() for b in bars] == [to_rgba(COLORS[r.trial.source]) for r in rows]
    assert set(SOURCES) == set(COLORS)
