"""The figure a sweep draws: per point, bars of its ranks' mean compute, exposed communication and
idle that add up to its iteration time, labelled by the swept values; a failed point is marked."""

from __future__ import annotations

import pytest
import yaml

from astra_hetero.cli.main import main
from astra_hetero.sweep.figure import point_label, sweep_figure
from astra_hetero.sweep.plan import plan_sweep
from astra_hetero.sweep.run import PointOutcome
from tests.conftest import make_spec_data

GRID = {"cluster.node_groups[1].nic.gbps": [100, 200, 400]}


def outcome(point, iteration, failed=False):
    metrics = {
        "iteration_time_us": iteration,
        "mean_compute_us": 0.5 * iteration,
        "mean_exposed_comm_us": 0.3 * iteration,
        "mean_idle_us": 0.2 * iteration,
    }
    return PointOutcome(point.index, point.name, point.overrides, "", "boom" if failed else "", metrics)


def test_bars_add_up_to_each_points_iteration_time_and_a_failed_point_is_marked(tmp_path):
    sweep = plan_sweep({"base": make_spec_data(), "grid": GRID}, tmp_path)
    outcomes = [
        outcome(p, t, failed=(i == 1))
        for i, (p, t) in enumerate(zip(sweep.points, [3000.0, 2e3, 1500.0], strict=True))
    ]
    figure = sweep_figure(sweep, outcomes)
    ax = figure.axes[0]
    tops = {}
    for bar in ax.patches:
        tops[round(bar.get_x() + bar.get_width() / 2)] = bar.get_y() + bar.get_height()
    assert tops == {0: pytest.approx(3.0), 1: 0.0, 2: pytest.approx(1.5)}  # ms, the failed point empty
    assert [t.get_text() for t in ax.texts] == ["3.000", "failed", "1.500"]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["100", "200", "400"]
    assert ax.get_xlabel() == "cluster.node_groups[1].nic.gbps"


def test_several_keys_and_variants_label_their_points(tmp_path):
    grid = plan_sweep({"base": make_spec_data(), "grid": {**GRID, "parallelism.tp": [2]}}, tmp_path)
    assert point_label(grid, grid.points[0]) == "nic.gbps=100, parallelism.tp=2"
    variants = plan_sweep(
        {
            "base": make_spec_data(),
            "variants": [
                {"name": "slow", "set": {"parallelism.tp": 2}},
                {"name": "fast", "set": {"iterations": 2}},
            ],
        },
        tmp_path,
    )
    assert [point_label(variants, p) for p in variants.points] == ["slow", "fast"]


def test_the_sweep_command_draws_its_result_in_the_format_asked(tmp_path, capsys):
    fmt, magic = "svg", b"<?xml"  # the other formats: tests/cli/test_figure_formats.py
    data = {
        "base": make_spec_data(scope={"layers_per_stage": 1, "micro_batches_per_replica": 1}),
        "grid": {"cluster.node_groups[1].nic.gbps": [100, 400]},
    }
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(data))
    argv = [
        "sweep",
        str(tmp_path / "sweep.yaml"),
        "-o",
        str(tmp_path / "out"),
        "--quiet",
        "--figure-format",
        fmt,
    ]
    assert main(argv) == 0
    drawn = tmp_path / "out" / f"sweep.{fmt}"
    assert drawn.read_bytes()[: len(magic)] == magic
    assert str(drawn) in capsys.readouterr().out.replace("\n", "")
