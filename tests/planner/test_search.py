"""The planner against exhaustive simulation on small mixed clusters: same best plan, every bound
below its simulation, every candidate accounted for."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from astra_hetero.planner.base import Budget, Quiet, SearchOutcome
from astra_hetero.planner.cache import PlanCache
from astra_hetero.planner.evaluate import Evaluator, simulate
from astra_hetero.planner.feasibility import Reason
from astra_hetero.planner.pool import Walk
from astra_hetero.planner.problem import problem_from_data
from astra_hetero.planner.search import BranchAndBound, Exhaustive, run_batch
from tests.conftest import node_group
from tests.planner.specs import NARROW, plan_data


def h100_l40s(search: dict) -> dict:
    """16 GPUs: one 8-GPU H100 server and two 4-GPU PCIe L40S servers sharing two NICs each."""
    data = plan_data(search)
    data["cluster"]["node_groups"] = [
        node_group("h100", "h100-sxm", count=1, gpus_per_node=8),
        node_group("l40s", "l40s", count=2, gpus_per_node=4, fabric="pcie4", nic={"gbps": 200, "count": 2}),
    ]
    return data


CASES = {
    "8 GPUs, H100 + A100, any stage order": plan_data({**NARROW, "stage_order": "any", "max_splits": 64}),
    # the default estimate margin: the two best shapes (pp 4 and pp 2 x dp 2) are within 1 %, so the
    # branch estimate must see pp 4's best stage order (L40S first, H100 holding the LM head)
    "16 GPUs, H100 + L40S, two micro-batch sizes": h100_l40s(
        {**NARROW, "tp": [4], "micro_batch_size": [1, 2]}
    ),
}


@pytest.fixture(scope="module", params=sorted(CASES))
def searched(request):
    """(problem, exhaustive outcome, branch-and-bound outcome) for one case."""
    problem = problem_from_data(CASES[request.param])
    with Evaluator(PlanCache(None)) as evaluator:
        exhaustive = Exhaustive().search(problem, evaluator, Budget.of(10_000, None))
        planned = BranchAndBound().search(problem, evaluator, Budget.of(120, None))
    return problem, exhaustive, planned


def test_planner_finds_the_exhaustive_optimum(searched):
    _, exhaustive, planned = searched
    assert exhaustive.best is not None and planned.best is not None
    assert planned.best.plan == exhaustive.best.plan
    assert planned.best.time_us == exhaustive.best.time_us
    assert len(planned.trials) < len(exhaustive.trials) / 3  # and it simulated far fewer plans


def test_every_lower_bound_is_below_its_simulation(searched):
    _, exhaustive, _ = searched
    assert len(exhaustive.trials) == exhaustive.num_feasible > 20
    for trial in exhaustive.trials:
        assert trial.bound_us <= trial.time_us, trial.plan.label


def test_estimates_rank_plans_within_a_fifth_of_their_simulation(searched):
    _, exhaustive, _ = searched
    for trial in exhaustive.trials:
        assert trial.estimate_us == pytest.approx(trial.time_us, rel=0.2), trial.plan.label


def test_every_candidate_is_simulated_or_counted_with_its_reason(searched):
    _, exhaustive, planned = searched
    # a branch pruned whole counts each of its grids once, not each of their splits
    assert planned.num_candidates <= exhaustive.num_candidates
    counts = planned.tally.counts
    skipped = sum(counts[r.value] for r in (Reason.BOUND, Reason.ESTIMATE, Reason.BUDGET))
    assert planned.num_feasible == len(planned.trials) + skipped
    branches = sum(counts[f"{r.value}: branch"] for r in (Reason.BOUND, Reason.ESTIMATE, Reason.BUDGET))
    rejected = sum(planned.tally.total(r) for r in (Reason.SPEC, Reason.MEMORY, Reason.DOMINATED))
    assert planned.num_candidates == planned.num_feasible + rejected + branches


def test_without_the_estimate_margin_only_bounds_prune_and_the_result_is_optimal():
    problem = problem_from_data(plan_data({**NARROW, "estimate_margin": None}))
    with Evaluator(PlanCache(None)) as evaluator:
        planned = BranchAndBound().search(problem, evaluator, Budget.of(120, None))
        exhaustive = Exhaustive().search(problem, evaluator, Budget.of(10_000, None))
    assert "optimal" in planned.stopped and planned.tally.total(Reason.ESTIMATE) == 0
    assert planned.best is not None and exhaustive.best is not None
    assert planned.best.time_us == exhaustive.best.time_us


def test_the_simulation_budget_stops_the_search_and_counts_the_rest():
    problem = problem_from_data(plan_data({**NARROW, "estimate_margin": None}))
    with Evaluator(PlanCache(None)) as evaluator:
        planned = BranchAndBound().search(problem, evaluator, Budget.of(1, None))
    assert len(planned.trials) == 1
    assert "budget" in planned.stopped and planned.tally.total(Reason.BUDGET) > 0


def test_a_plan_that_fails_to_simulate_is_recorded_and_the_others_go_on(tmp_path: Path):
    problem = problem_from_data(plan_data({**NARROW, "tp": 4}))
    walk = Walk(problem)
    trials = sorted((t for b in walk.branches() for t in walk.expand(b)), key=lambda t: t.estimate_us)[:2]
    missing = str(tmp_path / "gone.csv")  # its calibration table is not there when it runs
    broken = replace(problem, base=problem.base.model_copy(update={"calibration": missing}))
    outcome = SearchOutcome("test")
    with Evaluator(PlanCache(None)) as evaluator:
        run_batch(broken, evaluator, trials[:1], Budget(5), outcome, Quiet())
        run_batch(problem, evaluator, trials[1:], Budget(5), outcome, Quiet())
    failed, ran = outcome.trials
    assert failed.evaluation is not None and "calibration" in failed.evaluation.error
    assert outcome.tally.total(Reason.FAILED) == 1 and outcome.best is ran


def test_a_bad_spec_gives_a_failed_evaluation_not_an_exception():
    evaluation = simulate({"model": "no-such-model"})
    assert not evaluation.ok and "model" in evaluation.error


def test_the_time_budget_stops_the_search():
    problem = problem_from_data(plan_data(NARROW))
    with Evaluator(PlanCache(None)) as evaluator:
        planned = BranchAndBound().search(problem, evaluator, Budget.of(100, 1e-6))
    assert planned.stopped == "time budget spent" and not planned.trials
    assert planned.tally.total(Reason.BUDGET) > 0
