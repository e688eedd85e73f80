"""Pipeline schedules as specifications: order, completeness, Megatron-LM's interleaving rules and the
activation-memory bound."""

from __future__ import annotations

import pytest

from astra_hetero.workload.partition import even_split, greedy_min_max
from astra_hetero.workload.schedule import (
    BACKWARD,
    FORWARD,
    gpipe,
    interleaved_order,
    interleaved_warmup,
    one_f_one_b,
    schedule_for,
)

CASES = [(stage, stages, mbs) for stages in (1, 2, 4, 8) for stage in range(stages) for mbs in (1, 3, 8, 16)]
INTERLEAVED = [
    (stage, stages, mbs, chunks)
    for stages in (2, 3, 4)
    for stage in range(stages)
    for mbs in (stages, 2 * stages, 4 * stages)
    for chunks in (2, 3, 4)
]


def as_pairs(steps):
    return [(s.kind, s.micro_batch) for s in steps]


@pytest.mark.parametrize("schedule", [gpipe, one_f_one_b])
@pytest.mark.parametrize(("stage", "stages", "mbs"), CASES)
def test_every_micro_batch_runs_forward_once_then_backward_once(schedule, stage, stages, mbs):
    steps = as_pairs(schedule(stage, stages, mbs))
    assert sorted(steps) == sorted([("F", i) for i in range(mbs)] + [("B", i) for i in range(mbs)])
    for i in range(mbs):
        assert steps.index(("F", i)) < steps.index(("B", i))
    forwards = [i for kind, i in steps if kind == "F"]
    assert forwards == sorted(forwards)


@pytest.mark.parametrize(("stage", "stages", "mbs"), CASES)
def test_1f1b_keeps_at_most_stages_minus_stage_micro_batches_in_flight(stage, stages, mbs):
    in_flight, peak = 0, 0
    for step in one_f_one_b(stage, stages, mbs):
        in_flight += 1 if step.kind == FORWARD else -1
        peak = max(peak, in_flight)
    assert peak == min(stages - stage, mbs)


def test_gpipe_runs_all_forwards_first():
    steps = gpipe(0, 4, 5)
    assert [s.kind for s in steps] == ["F"] * 5 + ["B"] * 5


def test_unknown_schedule_lists_the_known_ones():
    with pytest.raises(ValueError, match="1f1b"):
        schedule_for("zero-bubble")


@pytest.mark.parametrize(("stage", "stages", "mbs", "chunks"), INTERLEAVED)
def test_interleaved_runs_every_chunk_of_every_micro_batch_forward_before_backward(
    stage, stages, mbs, chunks
):
    steps = one_f_one_b(stage, stages, mbs, chunks)
    expected = {(k, mb, c) for k in (FORWARD, BACKWARD) for mb in range(mbs) for c in range(chunks)}
    assert len(steps) == len(expected) and set(steps) == expected
    position = {step: i for i, step in enumerate(steps)}
    for mb in range(mbs):
        for c in range(chunks):
            assert position[(FORWARD, mb, c)] < position[(BACKWARD, mb, c)]
            if c > 0:  # the model runs through the chunks in order, and back in reverse
                assert position[(FORWARD, mb, c - 1)] < position[(FORWARD, mb, c)]
                assert position[(BACKWARD, mb, c)] < position[(BACKWARD, mb, c - 1)]
    for c in range(chunks):  # within a chunk, micro-batches keep their order both ways
        for kind in (FORWARD, BACKWARD):
            order = [s.micro_batch for s in steps if s.kind == kind and s.chunk == c]
            assert order == list(range(mbs))


@pytest.mark.parametrize(("stage", "stages", "mbs", "chunks"), INTERLEAVED)
def test_interleaved_warmup_steady_state_and_cooldown_follow_megatron(stage, stages, mbs, chunks):
    steps = one_f_one_b(stage, stages, mbs, chunks)
    total = mbs * chunks
    warmup = min(2 * (stages - stage - 1) + (chunks - 1) * stages, total)
    assert interleaved_warmup(stage, stages, mbs, chunks) == warmup
    kinds = "".join(s.kind for s in steps)
    steady = total - warmup
    assert kinds == "F" * warmup + "FB" * steady + "B" * warmup  # cool-down drains the warm-up


def test_interleaved_order_matches_megatrons_documented_table():
    # Megatron-LM's ModelParallelConfig docstring, PP=2 VP=2, 4 micro-batches, group size = PP:
    # rank 0 | 0 1 0 1 2 3 2 3 (chunks 0 0 1 1 0 0 1 1)
    assert interleaved_order(2, 4, 2) == [(0, 0), (1, 0), (0, 1), (1, 1), (2, 0), (3, 0), (2, 1), (3, 1)]


def test_interleaved_backward_passes_mirror_the_forward_table():
    steps = one_f_one_b(0, 2, 4, 2)
    backwards = [(s.micro_batch, s.chunk) for s in steps if s.kind == BACKWARD]
    assert backwards == [(0, 1), (1, 1), (0, 0), (1, 0), (2, 1), (3, 1), (2, 0), (3, 0)]


@pytest.mark.parametrize(("stages", "mbs"), [(4, 6), (4, 2), (3, 4)])
def test_interleaved_needs_a_multiple_of_stages_micro_batches(stages, mbs):
    with pytest.raises(ValueError, match="multiple"):
        one_f_one_b(0, stages, mbs, 2)


def test_interleaved_needs_two_stages_and_gpipe_has_no_interleaved_form():
    with pytest.raises(ValueError, match="2 pipeline stages"):
        one_f_one_b(0, 1, 4, 2)
    with pytest.raises(ValueError, match="no interleaved form"):
        gpipe(0, 2, 4, 2)


@pytest.mark.parametrize(("stages", "chunks"), [(2, 2), (4, 2), (4, 4), (8, 3)])
def test_interleaved_first_stage_holds_korthikantis_activation_bound(stages, chunks):
    """Peak chunk activations on stage 0: p·v + p − 1 chunks of L/(p·v) layers, i.e.
    L·(1 + (p − 1)/(p·v)) layer-micro-batches (Korthikanti et al. 2022, section 4.2.3)."""
    held = peak = 0
    for step in one_f_one_b(0, stages, 4 * stages, chunks):
        held += 1 if step.kind == FORWARD else -1
        peak = max(peak, held)
    assert peak == stages * chunks + stages - 1


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


def test_greedy_min_max_gives_every_member_its_floor():
    assert greedy_min_max(10, [1.0, 100.0], [0.0, 0.0], floor=3) == [7, 3]
    assert greedy_min_max(5, [1.0, 1.0], [0.0, 0.0], floor=3) is None
