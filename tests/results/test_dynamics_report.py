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
