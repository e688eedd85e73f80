"""The planner's pipeline runs each schedule as the engine runs its traces: on identical stages without
transfers it takes the textbook times of GPipe, 1F1B and interleaved 1F1B; transfers and pass tails
add exactly where they sit on the critical path."""

from __future__ import annotations

import pytest

from astra_hetero.planner.pipeline import Passes, Replica, run


def uniform(
    schedule: str, pp: int, m: int, v: int = 1, f: float = 3.0, b: float = 5.0, send: float = 0.0, tail=0.0
) -> Replica:
    """pp identical stages; one micro-batch takes f forward and b backward per stage (f/v, b/v a chunk)."""
    passes = Passes((f / v,) * v, (tail,) * v, (b / v,) * v, (0.0,) * v)
    boundaries = pp if v > 1 else pp - 1
    return Replica(schedule, m, (passes,) * pp, (send,) * boundaries, (send,) * boundaries)


def iteration(replica: Replica) -> float:
    return max(stage.end for stage in run(replica))


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize(("pp", "m"), [(1, 4), (2, 4), (4, 8), (4, 3), (3, 12)])
def test_one_chunk_schedules_take_m_plus_pp_minus_one_passes(schedule, pp, m):
    assert iteration(uniform(schedule, pp, m)) == pytest.approx((m + pp - 1) * (3.0 + 5.0))


@pytest.mark.parametrize(("pp", "v", "m"), [(2, 2, 4), (4, 2, 8), (4, 4, 8), (3, 2, 9)])
def test_interleaving_divides_the_bubble_by_the_virtual_stages(pp, v, m):
    """Megatron-LM's interleaved 1F1B: bubble (pp − 1)/v passes instead of pp − 1."""
    assert iteration(uniform("1f1b", pp, m, v)) == pytest.approx((m + (pp - 1) / v) * (3.0 + 5.0))


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_one_micro_batch_crosses_every_link_twice(schedule):
    pp, send = 4, 0.7
    assert iteration(uniform(schedule, pp, 1, send=send)) == pytest.approx(pp * 8.0 + 2 * (pp - 1) * send)


def test_a_forward_tail_delays_the_send_but_not_the_ranks_next_pass():
    """With one stage nothing is sent: the tails only end the iteration later than the compute."""
    alone = run(uniform("1f1b", 1, 4, tail=0.5))[0]
    assert alone.backward_ends[-1] == pytest.approx(4 * 8.0 - 4 * 0.5)
    assert alone.end == pytest.approx(4 * 8.0 - 4 * 0.5)  # a backward pass closes the stage
    two = iteration(uniform("1f1b", 2, 1, tail=0.5))
    assert two == pytest.approx(2 * 8.0 - 0.5)  # stage 0's send waits for its tail, stage 1's not


def test_slower_transfers_never_shorten_the_iteration():
    times = [iteration(uniform("1f1b", 4, 8, 2, send=s)) for s in (0.0, 0.1, 0.5, 2.0)]
    assert times == sorted(times)


def test_every_backward_pass_is_reported_in_program_order():
    stages = run(uniform("1f1b", 2, 4, 2))
    for stage in stages:
        assert len(stage.backward_ends) == 4 * 2
        assert list(stage.backward_ends) == sorted(stage.backward_ends)
        assert stage.backward_chunks[-1] == 0  # the backward passes end with the first chunk
