"""The planner under a spec's `dynamics:`: every plan is simulated with the events, ranked by its time
under them, and static lower bounds (which need not hold then) prune nothing."""

from __future__ import annotations

import pytest

from astra_hetero.errors import SpecError
from astra_hetero.planner.base import Budget
from astra_hetero.planner.cache import PlanCache
from astra_hetero.planner.candidate import plan_spec
from astra_hetero.planner.evaluate import Evaluator, simulate
from astra_hetero.planner.feasibility import Reason
from astra_hetero.planner.problem import problem_from_data
from astra_hetero.planner.search import BranchAndBound, Exhaustive
from tests.planner.specs import NARROW, plan_data

SPACE = {**NARROW, "tp": [4], "estimate_margin": None}
SLOW_H100 = {"event": "device_slowdown", "node_group": "h100", "factor": 0.2}


def test_plans_are_simulated_and_ranked_under_the_dynamics():
    dynamic = problem_from_data(plan_data(SPACE, dynamics=[SLOW_H100]))
    static = problem_from_data(plan_data(SPACE))
    assert static.bounds_hold and not dynamic.bounds_hold
    with Evaluator(PlanCache(None)) as evaluator:
        under = Exhaustive().search(dynamic, evaluator, Budget.of(1000, None))
        without = Exhaustive().search(static, evaluator, Budget.of(1000, None))
    assert under.best is not None and without.best is not None
    best = under.best
    spec = plan_spec(dynamic.base, best.plan)
    assert spec.dynamics == dynamic.base.dynamics  # the candidate carries the events
    assert best.time_us == simulate(spec.model_dump(mode="json")).iteration_time_us
    assert best.time_us > without.best.time_us  # an H100 at a fifth of its speed costs every plan
    ranked = [t.time_us for t in under.ranked if t.evaluation is not None and t.evaluation.ok]
    assert ranked == sorted(ranked) and ranked[0] == best.time_us


def test_branch_and_bound_prunes_by_no_static_bound_under_dynamics():
    problem = problem_from_data(plan_data(SPACE, dynamics=[SLOW_H100], iterations=2))
    with Evaluator(PlanCache(None)) as evaluator:
        planned = BranchAndBound().search(problem, evaluator, Budget.of(1000, None))
        exhaustive = Exhaustive().search(problem, evaluator, Budget.of(1000, None))
    assert planned.tally.total(Reason.BOUND) == 0
    assert planned.best is not None and exhaustive.best is not None
    assert planned.best.time_us == exhaustive.best.time_us


def test_a_bad_event_is_the_problems_error_before_any_plan():
    bad = {**SLOW_H100, "node_group": "v100"}
    with pytest.raises(SpecError) as info:
        problem_from_data(plan_data(SPACE, dynamics=[bad]))
    assert info.value.field == "dynamics[0].node_group"
