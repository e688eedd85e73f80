"""Declared figures come out as real PNGs of the declared size, with something drawn on them; a
figure that no successful point matches is skipped, not drawn empty."""

from __future__ import annotations

import pytest

from astra_hetero.studies.checks import columns_of
from astra_hetero.studies.figures import DPI, render_figure
from astra_hetero.studies.plan import plan_study
from astra_hetero.studies.schema import FigureLayout
from astra_hetero.studies.table import ResultsTable, Row, add_derived
from tests.conftest import make_spec_data


def synthetic_table(tmp_path, failed=(), **extra) -> ResultsTable:
    study = plan_study(
        {
            "name": "synthetic",
            "title": "synthetic",
            "base": make_spec_data(),
            "axes": {
                "nic_gbps": {"path": "cluster.node_groups[1].nic.gbps", "values": [100, 200, 400]},
                "model": [{"name": "small"}, {"name": "large"}],
            },
            "derived": [{"name": "vs_100", "of": "iteration_time_us", "relative_to": {"nic_gbps": 100}}],
            **extra.pop("study", {}),
        },
        tmp_path,
        **extra,
    )
    rows = []
    for point in study.points:
        nic, size = float(point.levels["nic_gbps"]), 1.0 if point.levels["model"] == "small" else 3.0
        values = {
            "iteration_time_us": size * (1000 + 4e5 / nic),
            "mean_compute_us": size * 1000,
            "mean_exposed_comm_us": size * 4e5 / nic,
            "mean_idle_us": 50.0,
        }
        status = "failed" if point.name in failed else "ok"
        error = "" if status == "ok" else "ns3 binary not found [hint: --bin-dir]"
        rows.append(
            Row(point.name, point.levels, "embedded", status, "", values if status == "ok" else {}, error)
        )
    for derived in study.file.derived:
        rows = add_derived(rows, derived, [a.name for a in study.axes])
    return ResultsTable(study, columns_of(study.file), tuple(rows))


def read_png(path):
    from matplotlib.image import imread

    return imread(path)


@pytest.mark.parametrize(
    "layout",
    [
        {"kind": "bar", "x": "nic_gbps", "y": ["iteration_time_us"], "series": "model"},
        {"kind": "bar", "x": "nic_gbps", "y": ["vs_100"], "panels": "model", "reference_lines": [-5, 5]},
        {
            "kind": "stacked_bar",
            "x": "nic_gbps",
            "y": ["mean_compute_us", "mean_exposed_comm_us", "mean_idle_us"],
            "panels": "model",
        },
        {
            "kind": "line",
            "x": "nic_gbps",
            "y": ["iteration_time_us", "mean_compute_us"],
            "where": {"model": "large"},
        },
    ],
)
def test_each_kind_draws_a_png_of_the_declared_size_with_content(tmp_path, layout):
    figure = FigureLayout(name="f", title="what it shows", **layout)
    path = render_figure(figure, synthetic_table(tmp_path), tmp_path / "f.png")
    image = read_png(path)
    height, width = image.shape[:2]
    assert height == round(4.6 * DPI)
    assert 2.5 * DPI <= width <= 16 * DPI
    non_white = (image[..., :3].min(axis=2) < 0.9).mean()
    assert 0.02 < non_white < 0.9  # bars/lines and text, on a mostly white canvas


def test_failed_points_leave_gaps_and_no_matching_point_skips_the_figure(tmp_path):
    table = synthetic_table(tmp_path, failed={"nic_gbps=200_small"})
    figure = FigureLayout(
        name="f", title="t", kind="bar", x="nic_gbps", y=["iteration_time_us"], series="model"
    )
    assert render_figure(figure, table, tmp_path / "f.png") is not None
    nothing = FigureLayout(
        name="g",
        title="t",
        kind="bar",
        x="nic_gbps",
        y=["iteration_time_us"],
        where={"model": "small", "nic_gbps": 200},
    )
    assert render_figure(nothing, table, tmp_path / "g.png") is None
    assert not (tmp_path / "g.png").exists()


def test_derived_columns_compare_against_the_point_differing_only_on_the_reference_axes(tmp_path):
    table = synthetic_table(tmp_path)
    by_name = {r.point: r.values for r in table.rows}
    small_400 = by_name["nic_gbps=400_small"]
    small_100 = by_name["nic_gbps=100_small"]
    expected = (
        100
        * (small_400["iteration_time_us"] - small_100["iteration_time_us"])
        / small_100["iteration_time_us"]
    )
    assert small_400["vs_100"] == pytest.approx(expected)
    assert small_100["vs_100"] == 0.0
    assert by_name["nic_gbps=400_large"]["vs_100"] == pytest.approx(expected)  # 3x both: same ratio
    failed = synthetic_table(tmp_path, failed={"nic_gbps=100_large"})
    assert "vs_100" not in {r.point: r.values for r in failed.rows}["nic_gbps=400_large"]


def texts(figure) -> list[str]:
    title = [figure._suptitle.get_text()] if figure._suptitle is not None else []
    return (
        title + [t.get_text() for t in figure.texts] + [t.get_text() for ax in figure.axes for t in ax.texts]
    )


def test_a_figure_whose_reference_points_all_failed_is_not_drawn_and_says_why(tmp_path):
    from astra_hetero.studies.figures import figure_gap

    failed = {"nic_gbps=100_small", "nic_gbps=100_large"}  # the reference of vs_100 (e.g. ns-3 missing)
    table = synthetic_table(tmp_path, failed=failed)
    figure = FigureLayout(name="f", title="t", kind="bar", x="nic_gbps", y=["vs_100"], series="model")
    why = figure_gap(figure, table)
    assert why.startswith("every value it would show is missing (vs_100 needs the points with nic_gbps = 100")
    assert "ns3 binary not found" in why
    assert render_figure(figure, table, tmp_path / "f.png") is None and not (tmp_path / "f.png").exists()


def test_a_long_title_wraps_inside_the_figure(tmp_path):
    from astra_hetero.studies.figures import study_figure

    title = "Embedded flow model against the packet-level run, per cluster and simulator (target ±5 %)"
    layout = FigureLayout(
        name="f", title=title, kind="bar", x="nic_gbps", y=["iteration_time_us"], where={"model": "small"}
    )
    figure = study_figure(layout, synthetic_table(tmp_path))
    figure.draw_without_rendering()
    box = figure._suptitle.get_window_extent(figure.canvas.get_renderer())
    assert box.x0 >= 0 and box.x1 <= figure.bbox.x1  # not clipped at either edge
    assert "\n" in figure._suptitle.get_text()


def test_figures_of_a_cut_down_iteration_and_of_a_reduced_study_say_so(tmp_path):
    from astra_hetero.studies.figures import study_figure

    reduced = {
        "reduced": {
            "description": "one layer per stage",
            "set": {"scope": {"layers_per_stage": 1, "micro_batches_per_replica": 2}},
        }
    }
    table = synthetic_table(tmp_path, study=reduced, reduced=True)
    layout = FigureLayout(
        name="f", title="t", kind="bar", x="nic_gbps", y=["iteration_time_us"], series="model"
    )
    said = " ".join(" ".join(texts(study_figure(layout, table))).split())
    assert "A cut-down iteration (layers per stage 1, micro batches per replica 2" in said
    assert "reduced study: one layer per stage" in said
    whole = study_figure(layout, synthetic_table(tmp_path))
    assert not any("cut-down" in t for t in texts(whole))


def test_a_difference_of_times_says_what_its_sign_means(tmp_path):
    from astra_hetero.studies.figures import study_figure

    layout = FigureLayout(name="f", title="t", kind="bar", x="nic_gbps", y=["vs_100"], series="model")
    label = study_figure(layout, synthetic_table(tmp_path)).axes[0].get_ylabel()
    assert label.endswith("(%; + = longer, − = shorter)")


def test_a_study_report_writes_its_figures_in_the_format_asked(tmp_path):
    from astra_hetero.studies.report import write_report

    table = synthetic_table(tmp_path)
    figure = {
        "name": "speed",
        "title": "t",
        "kind": "bar",
        "x": "nic_gbps",
        "y": ["vs_100"],
        "series": "model",
    }
    study = table.study
    table = type(table)(
        type(study)(
            study.file.model_copy(update={"figures": [FigureLayout(**figure)]}), study.axes, study.points
        ),
        table.columns,
        table.rows,
    )
    files = write_report(table, tmp_path / "out", fmt="svg")
    assert files.figures == (tmp_path / "out/speed.svg",)
    assert files.figures[0].read_bytes()[:5] == b"<?xml"
    assert "![t](speed.svg)" in (tmp_path / "out/report.md").read_text()
