"""Pipeline schedules as specifications: order, completeness and the activation-memory bound."""

from __future__ import annotations

import pytest

from astra_hetero.workload.partition import even_split, greedy_min_max
from astra_hetero.workload.schedule import gpipe, one_f_one_b, schedule_for

CASES = [(stage, stages, mbs) for stages in (1, 2, 4, 8) for stage in range(stages) for mbs in (1, 3, 8, 16)]


@pytest.mark.parametrize("schedule", [gpipe, one_f_one_b])
@pytest.mark.parametrize(("stage", "stages", "mbs"), CASES)
def test_every_micro_batch_runs_forward_once_then_backward_once(schedule, stage, stages, mbs):
    steps = schedule(stage, stages, mbs)
    assert sorted(steps) == sorted([("F", i) for i in range(mbs)] + [("B", i) for i in range(mbs)])
    for i in range(mbs):
        assert steps.index(("F", i)) < steps.index(("B", i))
    forwards = [i for kind, i in steps if kind == "F"]
    assert forwards == sorted(forwards)


@pytest.mark.parametrize(("stage", "stages", "mbs"), CASES)
def test_1f1b_keeps_at_most_stages_minus_stage_micro_batches_in_flight(stage, stages, mbs):
    in_flight, peak = 0, 0
    for kind, _ in one_f_one_b(stage, stages, mbs):
        in_flight += 1 if kind == "F" else -1
        peak = max(peak, in_flight)
    assert peak == min(stages - stage, mbs)


def test_gpipe_runs_all_forwards_first():
    steps = gpipe(0, 4, 5)
    assert [k for k, _ in steps] == ["F"] * 5 + ["B"] * 5


def test_unknown_schedule_lists_the_known_ones():
    with pytest.raises(ValueError, match="1f1b"):
        schedule_for("zero-bubble")


@pytest.mark.parametrize(("total", "parts"), [(96, 16), (80, 6), (7, 3), (5, 5)])
def test_even_split_sums_and_differs_by_at_most_one(total, parts):
    counts = even_split(total, parts)
    assert sum(counts) == total and max(counts) - min(counts) <= 1


def test_greedy_min_max_is_optimal_against_brute_force():
    unit, fixed = [3.0, 1.0, 2.0], [1.0, 0.0, 4.0]
    best = min(
        max((n + 0) * u + f for n, u, f in zip(counts, unit, fixed, strict=True))
        for a in range(1, 10)
        for b in range(1, 10)
        if 10 - a - b >= 1
        for counts in [(a, b, 10 - a - b)]
    )
    counts = greedy_min_max(10, unit, fixed)
    assert sum(counts) == 10
    assert max(n * u + f for n, u, f in zip(counts, unit, fixed, strict=True)) == best


def test_greedy_min_max_respects_caps_or_reports_none():
    assert greedy_min_max(10, [1.0, 5.0], [0.0, 0.0], cap=[3, 10]) == [3, 7]
    assert greedy_min_max(10, [1.0, 1.0], [0.0, 0.0], cap=[3, 3]) is None
