"""Estimates and lower bounds against the simulator, for every schedule, overlap setting, optimizer and
communication model: each bound is at most the simulated time, each estimate within a tenth of it.

(tests/planner/test_search.py checks the same over whole spaces, within a fifth; these cases sample a
few candidates of each setting the exhaustive spaces leave out.)"""

from __future__ import annotations

import pytest

from astra_hetero.planner.candidate import plan_spec
from astra_hetero.planner.evaluate import simulate
from astra_hetero.planner.pool import Walk
from astra_hetero.planner.problem import problem_from_data
from tests.planner.specs import MOE_MODEL, NARROW, plan_data

SETTINGS = {
    "ideal collectives": ({}, {"collectives": {"model": "ideal"}}),
    "gpipe": ({"schedule": "gpipe"}, {}),
    "no overlap, distributed optimizer": (
        {"overlap_grad_reduce": False, "distributed_optimizer": True, "virtual_stages": [1, 2]},
        {},
    ),
    "parameter gathers overlapped": (
        {"distributed_optimizer": True, "overlap_param_gather": True, "virtual_stages": [1, 2]},
        {},
    ),
    "full recompute, sequence parallel": ({"recompute": "full", "sequence_parallel": True}, {}),
    "interleaved, micro-batch size 2": ({"virtual_stages": 2, "micro_batch_size": 2}, {}),
    "context parallel ring": ({"cp": [2], "sequence_parallel": True}, {}),
    "context parallel all-gather": ({"cp": [2], "cp_comm": "all_gather", "virtual_stages": [1]}, {}),
    "experts over EP": ({"ep": [2, 4], "sequence_parallel": True}, {"model": MOE_MODEL}),
    "TP overlap": ({"sequence_parallel": True, "tp_comm_overlap": True}, {}),
    "ZeRO-2 and ZeRO-3": ({"zero_stage": [2, 3], "distributed_optimizer": True, "virtual_stages": [1]}, {}),
}


@pytest.mark.parametrize("setting", sorted(SETTINGS))
def test_bounds_hold_and_estimates_are_close(setting):
    search, sections = SETTINGS[setting]
    problem = problem_from_data(plan_data({**NARROW, "tp": [2, 4], **search}, **sections))
    walk = Walk(problem)
    trials = sorted((t for b in walk.branches() for t in walk.expand(b)), key=lambda t: t.estimate_us)
    assert trials
    for trial in trials[:: max(1, len(trials) // 5)]:  # about five, best to worst
        evaluation = simulate(plan_spec(problem.base, trial.plan).model_dump(mode="json"))
        assert evaluation.iteration_time_us is not None, evaluation.error
        assert trial.bound_us <= evaluation.iteration_time_us, trial.plan.label
        assert trial.estimate_us == pytest.approx(evaluation.iteration_time_us, rel=0.1), trial.plan.label
