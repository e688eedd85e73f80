"""Summary and comparison numbers are derived from the per-rank results, and the tables show them."""

from __future__ import annotations

import dataclasses
import math

import pytest

from astra_hetero.results.aggregate import Spread, group_ranks, total_idle_share
from astra_hetero.results.compare import iteration_ratio, report_json, summarize
from astra_hetero.results.model import RunResult
from astra_hetero.results.report import (
    WIDTH,
    compare_runs,
    comparison_tables,
    format_number,
    render_summary,
    summary_tables,
    time_unit,
    to_markdown,
)
from tests.results.builders import homogeneous_result, mixed_result, pipeline_result, rank_result

RESULTS = [mixed_result(), homogeneous_result(), pipeline_result(["a", "b", "c"], [1e6, 2e6, 3e6], dp=3)]


def test_spread_is_min_mean_max() -> None:
    assert Spread.of([3.0, 1.0, 2.0, 6.0]) == Spread(min=1.0, mean=3.0, max=6.0)
    with pytest.raises(ValueError):
        Spread.of([])


def test_group_aggregates_match_the_ranks_they_cover() -> None:
    ranks = (
        rank_result(0, "h100", 0, 10.0, 2.0, 40.0),
        rank_result(1, "h100", 0, 20.0, 4.0, 40.0),
        rank_result(2, "a100", 1, 30.0, 6.0, 40.0),
    )
    result = RunResult(backend="test", iteration_time_us=40.0, ranks=ranks)
    stage0, stage1 = group_ranks(result, "stage")
    assert (stage0.label, stage0.num_ranks, stage0.gpus) == ("stage 0", 2, ("h100",))
    assert stage0.compute_us == Spread(10.0, 15.0, 20.0)
    assert stage0.idle_us == Spread(16.0, 22.0, 28.0)
    assert stage0.total_idle_us == 44.0
    assert stage0.busy_us == pytest.approx(18.0)
    assert stage1.idle_us == Spread(4.0, 4.0, 4.0)
    assert [g.label for g in group_ranks(result, "gpu")] == ["a100", "h100"]
    assert [g.num_ranks for g in group_ranks(result, "rank")] == [1, 1, 1]


@pytest.mark.parametrize("result", RESULTS)
def test_a_run_compared_with_itself_has_ratio_one(result: RunResult) -> None:
    assert [s.ratio_to_first for s in summarize([("a", result), ("b", result)])] == [1.0, 1.0]


def test_ratio_is_iteration_time_over_the_first_run() -> None:
    homogeneous, mixed = summarize([("homo", homogeneous_result()), ("mixed", mixed_result())])
    assert mixed.ratio_to_first == pytest.approx(95.0 / 65.0)
    assert math.isnan(iteration_ratio(1.0, 0.0))


def test_idle_is_attributed_to_the_gpu_type_that_had_it() -> None:
    # H100 stage computes 60 µs, A100 stage 90 µs, same exposed comm: only the H100s wait.
    summary = summarize([("mixed", mixed_result())])[0]
    assert summary.idle_share_by_gpu == {"a100-80": 0.0, "h100-sxm": 1.0}
    h100 = next(g for g in summary.gpus if g.label == "h100-sxm")
    assert h100.idle_us.mean == pytest.approx(30.0)


def test_idle_shares_sum_to_one_or_are_all_zero() -> None:
    for result in RESULTS:
        shares = total_idle_share(group_ranks(result, "gpu")).values()
        assert sum(shares) == pytest.approx(1.0) or set(shares) == {0.0}


def test_summary_table_shows_iteration_and_per_group_means_with_their_range() -> None:
    result = mixed_result()  # H100: 60 us compute, 30 us idle; A100: 90 us compute, 0 idle; 95 us
    ranks = list(result.ranks)
    ranks[1] = dataclasses.replace(ranks[1], compute_us=50.0, idle_us=40.0)  # one H100 rank less busy
    text = render_summary(dataclasses.replace(result, ranks=tuple(ranks)), label="mixed")
    assert text.startswith("mixed: embedded backend, 4 ranks, iteration 95.00 µs")
    lines = text.splitlines()
    h100 = next(i for i, line in enumerate(lines) if line.startswith(" h100-sxm"))
    assert lines[h100].split() == ["h100-sxm", "2", "0", "55.00", "5.000", "35.00", "37%"]
    assert lines[h100 + 1].split() == ["50.00–60.00", "30.00–40.00"]  # ranges below, where they differ
    a100 = next(line for line in lines if line.startswith(" a100-80"))
    assert a100.split() == ["a100-80", "2", "1", "90.00", "5.000", "0", "0%"]  # every rank alike
    assert "idle %: the mean idle time of the type's ranks as a share of the iteration" in text
    assert "cells" not in text  # a cell is a pipeline stage of one replica (spec.md), not a table entry


@pytest.mark.parametrize("width", [80, 100, 120])
def test_every_summary_table_fits_the_terminal_without_cutting_a_word(width: int) -> None:
    gpus = ["h100-sxm", "a100-80", "l40s", "mi300x", "h100-sxm", "a100-80", "l40s", "v100-32"]
    result = pipeline_result(gpus, [10.0 * (s + 1) for s in range(8)], dp=16)
    ranks = [dataclasses.replace(r, compute_us=r.compute_us * (1 + r.replica / 7)) for r in result.ranks]
    result = dataclasses.replace(
        result,
        ranks=tuple(ranks),
        iterations=tuple({"index": i, "time_us": 85.0 + i} for i in range(3)),
        events=(
            {
                "index": 0,
                "event": "background_traffic",
                "start_us": 1.5e5,
                "end_us": 1.2e6,
                "ranks": list(range(0, 128, 3)),
                "links": list(range(0, 400, 7)),
            },
        ),
    )
    text = render_summary(result, label="a-rather-long-run-directory-name", width=width)
    assert max(len(line) for line in text.splitlines()) <= width
    assert "…" not in text
    for header in ("compute", "exposed", "comm (µs)", "idle %", "stages", "topology.txt"):
        assert header in text


def test_summary_of_1024_ranks_stays_compact() -> None:
    gpus = ["h100-sxm"] * 4 + ["a100-80"] * 4
    text = render_summary(pipeline_result(gpus, [10.0 * (s + 1) for s in range(8)], dp=128))
    lines = text.splitlines()
    assert len(lines) < 40
    assert max(len(line) for line in lines) <= WIDTH == 80


def test_comparison_shows_ratio_stage_times_and_idle() -> None:
    text = compare_runs([("homo", homogeneous_result()), ("mixed", mixed_result())])
    assert "1.000x" in text and "1.462x" in text
    assert "95.00" in text  # A100 stage busy: 90 compute + 5 exposed comm
    assert "30.00 (100%)" in text  # H100 idle in the mixed run


def test_runs_with_different_stage_counts_compare_with_gaps() -> None:
    text = compare_runs([("pp2", mixed_result()), ("pp3", pipeline_result(["a", "b", "c"], [1.0, 2.0, 3.0]))])
    stage2_row = next(line for line in text.splitlines() if line.strip().startswith("stage 2"))
    assert stage2_row.split()[2] == "-"


@pytest.mark.parametrize(("largest_us", "unit"), [(0.0, "µs"), (999.0, "µs"), (1e3, "ms"), (2.5e7, "s")])
def test_time_unit_keeps_at_most_three_integer_digits(largest_us: float, unit: str) -> None:
    assert time_unit(largest_us)[1] == unit


def test_markdown_tables_carry_the_same_numbers() -> None:
    summaries = summarize([("homo", homogeneous_result()), ("mixed", mixed_result())])
    markdown = to_markdown(comparison_tables(summaries))
    assert "| mixed | embedded | 4 | 95.00 | 1.462x |" in markdown
    data = report_json(summaries)
    assert data["runs"][1]["ratio_to_first"] == pytest.approx(95.0 / 65.0)
    assert data["runs"][1]["idle_share_by_gpu"] == {"a100-80": 0.0, "h100-sxm": 1.0}


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.0, "0"),
        (612.34, "612.3"),
        (61.234, "61.23"),
        (6.1234, "6.123"),
        (0.61234, "0.6123"),
        (0.0061234, "0.0061"),
        (-2.5, "-2.500"),
        (float("inf"), "inf"),  # a sweep value written as .inf: shown, not an OverflowError
        (float("nan"), "nan"),
    ],
)
def test_numbers_show_four_significant_digits(value: float, text: str) -> None:
    assert format_number(value) == text


def test_an_approximation_is_one_line_in_the_summary_and_the_markdown() -> None:
    note = "approximation: ASTRA-sim simplified this cluster: " + "one figure for every NPU, " * 8 + "end."
    result = dataclasses.replace(mixed_result(), warnings=(note, "exit status 134 after every rank finished"))
    text = render_summary(result, label="mixed")
    assert text.splitlines().count(note) == 1  # whole, on a line of its own, however long
    assert "2 warning(s) in result.json" in text.splitlines()
    assert f"\n> {note}\n" in to_markdown(summary_tables(summarize([("mixed", result)])[0]))


def test_a_result_without_approximations_shows_none() -> None:
    assert "approximation" not in render_summary(mixed_result())


def astrasim_like(result: RunResult) -> RunResult:
    """`result` as an ASTRA-sim backend reports it: exposed comm = finish − compute (bubbles in it),
    idle = after the finish (none here: every rank finishes with the iteration)."""
    ranks = tuple(
        dataclasses.replace(r, exposed_comm_us=r.exposed_comm_us + r.idle_us, idle_us=0.0)
        for r in result.ranks
    )
    meta = {"exposed_comm_note": "exposed_comm_us is ASTRA-sim's exposed communication (finish − GPU time)"}
    return dataclasses.replace(result, backend="analytical", ranks=ranks, meta=meta)


def test_runs_of_backends_that_split_idle_differently_compare_compute_and_time_not_computing() -> None:
    embedded = mixed_result()  # H100: 60 compute, 5 exposed, 30 idle
    text = compare_runs([("embedded", embedded), ("astra", astrasim_like(embedded))])
    flat = " ".join(text.split())
    assert "ASTRA-sim's exposed communication is a rank's finish minus its compute" in flat
    assert "includes pipeline bubbles" in flat
    assert "where the idle time sits" not in text  # 30 us of idle against 0 would be misread
    waiting = next(line for line in text.splitlines() if line.startswith(" h100-sxm"))
    assert waiting.split() == ["h100-sxm", "35.00", "35.00"]  # the same time, not computing, on both
    assert "per-stage compute" in text


def test_runs_of_one_backend_keep_the_idle_comparison() -> None:
    text = compare_runs([("homo", homogeneous_result()), ("mixed", mixed_result())])
    assert "where the idle time sits" in text and "finish minus its compute" not in text


def test_an_astrasim_summary_says_what_its_exposed_comm_holds() -> None:
    flat = " ".join(render_summary(astrasim_like(mixed_result())).split())
    assert "exposed comm is the rank's finish minus its compute (pipeline bubbles" in flat
