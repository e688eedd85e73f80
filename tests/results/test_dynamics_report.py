"""Reports of runs with several iterations and dynamics events: tables, the per-iteration plot, JSON."""

from __future__ import annotations

import dataclasses

from astra_hetero.results.model import RunResult
from astra_hetero.results.plots import event_iterations, write_plots
from astra_hetero.results.report import render_summary
from astra_hetero.results.timeline import build_trace
from tests.results.builders import pipeline_result

ITERATIONS = ({"index": 0, "time_us": 150.0}, {"index": 1, "time_us": 100.0}, {"index": 2, "time_us": 50.0})
EVENT = {
    "index": 0,
    "event": "link_rate",
    "start_us": 120.0,
    "end_us": 160.0,
    "ranks": [0, 1, 2],
    "links": [4, 5],
}


def dynamic_result() -> RunResult:
    return dataclasses.replace(
        pipeline_result(["h100", "a100"], [60.0, 90.0]), iterations=ITERATIONS, events=(EVENT,)
    )


def test_an_event_shades_the_iterations_it_overlaps():
    ends = [150.0, 250.0, 300.0]  # iteration i spans [ends[i - 1], ends[i])
    assert event_iterations(ends, 120.0, 160.0) == (0, 1)
    assert event_iterations(ends, 150.0, 250.0) == (1, 1)
    assert event_iterations(ends, 10.0, None) == (0, 2)
    assert event_iterations(ends, 400.0, None) == (2, 2)


def test_iterations_and_events_round_trip_through_json():
    result = dynamic_result()
    assert RunResult.from_json(result.to_json()) == result


def test_the_summary_lists_each_iteration_and_what_each_event_touched():
    text = render_summary(dynamic_result(), "flap")
    assert "3 iterations" in text and "[0] link_rate" in text and "0-2" in text and "4-5" in text


def test_a_run_with_iterations_gets_an_iteration_plot(tmp_path):
    paths = write_plots([("flap", dynamic_result())], tmp_path)
    assert tmp_path / "iterations-flap.png" in paths
    assert (tmp_path / "iterations-flap.png").stat().st_size > 0


def test_events_are_marked_on_a_track_of_their_own_in_the_trace():
    trace = build_trace(dynamic_result(), ())
    marks = [e for e in trace["traceEvents"] if e.get("cat") == "dynamics"]
    span = next(e for e in marks if e["ph"] == "X")
    assert (span["ts"], span["dur"]) == (120.0, 40.0)
    assert span["pid"] == 4 and span["args"]["links"] == [4, 5]
    assert any(e["ph"] == "i" for e in marks)


def test_two_events_in_one_iteration_keep_their_own_colour_in_lanes_of_their_own():
    from matplotlib.colors import to_rgba

    from astra_hetero.results.plots import EVENT_COLORS, iteration_series_figure

    second = {**EVENT, "index": 1, "event": "device_slowdown", "start_us": 130.0, "end_us": 260.0}
    figure = iteration_series_figure(dataclasses.replace(dynamic_result(), events=(EVENT, second)), "flap")
    lanes = figure.axes[1]
    bars = lanes.patches
    assert [b.get_facecolor() for b in bars] == [to_rgba(c) for c in EVENT_COLORS[:2]]  # opaque
    first_lane, second_lane = ((b.get_y(), b.get_y() + b.get_height()) for b in bars)
    assert first_lane[1] <= second_lane[0]  # no two events share any point: nothing blends
    assert (bars[0].get_x(), bars[0].get_width()) == (-0.45, 1.9)  # iterations 0-1
    assert (bars[1].get_x(), bars[1].get_width()) == (-0.45, 2.9)  # iterations 0-2
    labels = [t.get_text() for t in lanes.get_yticklabels()]
    assert labels == ["dynamics[0] link_rate", "dynamics[1] device_slowdown"]
