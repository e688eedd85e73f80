"""One planning session: the chosen planner, the homogeneous-assumption baseline, and the spec's own
plan when it gives a complete one — sharing one evaluator (workers, cache) and one time budget."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from astra_hetero.errors import AstraHeteroError, BackendUnavailable, InfeasiblePlan
from astra_hetero.planner.base import Budget, Progress, Quiet, SearchOutcome, Trial
from astra_hetero.planner.baseline import HomogeneousBaseline
from astra_hetero.planner.cache import PlanCache
from astra_hetero.planner.candidate import Plan
from astra_hetero.planner.dimensions import active_dimensions
from astra_hetero.planner.evaluate import Evaluator
from astra_hetero.planner.feasibility import Infeasible
from astra_hetero.planner.pool import Walk
from astra_hetero.planner.problem import Problem
from astra_hetero.planner.search import BranchAndBound, Exhaustive, run_batch
from astra_hetero.planner.shape import Shape
from astra_hetero.planner.space import spec_grid
from astra_hetero.spec.load import check_consistency
from astra_hetero.workload.generate import plan_workload

logger = logging.getLogger(__name__)

PLANNERS = {p.name: p for p in (BranchAndBound, Exhaustive, HomogeneousBaseline)}
BASELINE_TIME_SHARE = 0.2  # of --time-budget kept for the baseline


def create_planner(name: str):
    try:
        return PLANNERS[name]()
    except KeyError:
        raise BackendUnavailable(f"unknown planner {name!r}; valid: {', '.join(PLANNERS)}") from None


@dataclass
class PlanReport:
    problem: Problem
    search: SearchOutcome
    baseline: SearchOutcome | None
    spec_plan: Trial | None  # the input spec's own plan, when it is complete and runs
    wall_time_s: float
    jobs: int
    num_simulated: int  # simulations run (cache hits excluded)
    cache_hits: int

    @property
    def best(self) -> Trial | None:
        """The fastest plan simulated on the real cluster: the search's, or the baseline's or the
        spec's own plan should the search have found nothing faster."""
        found = [t for t in (self.search.best, self.baseline_best, self.spec_plan) if t is not None]
        return min(found, key=lambda t: t.time_us) if found else None

    @property
    def baseline_best(self) -> Trial | None:
        return self.baseline.best if self.baseline is not None else None

    @property
    def speedup(self) -> float | None:
        """Baseline time over best time (1.25 = the best plan is 25 % faster)."""
        best, baseline = self.best, self.baseline_best
        if best is None or baseline is None:
            return None
        return baseline.time_us / best.time_us


def find_plans(
    problem: Problem,
    *,
    jobs: int = 1,
    ray_address: str | None = None,
    time_budget_s: float | None = None,
    cache: PlanCache | None = None,
    progress: Progress | None = None,
) -> PlanReport:
    progress = progress or Quiet()
    settings = problem.settings
    seconds = time_budget_s if time_budget_s is not None else settings.time_budget_s
    started = time.monotonic()
    cache = cache or PlanCache(None)
    with_baseline = settings.baseline and settings.planner != "homogeneous"
    main_seconds = seconds * (1 - BASELINE_TIME_SHARE) if seconds and with_baseline else seconds
    logger.info(
        "planning %r with %s (at most %d simulations, %d job(s))",
        problem.base.name,
        settings.planner,
        settings.max_simulations,
        jobs,
    )
    with Evaluator(cache, jobs, ray_address) as evaluator:
        search = create_planner(settings.planner).search(
            problem, evaluator, Budget.of(settings.max_simulations, main_seconds), progress
        )
        logger.info(
            "search: %d candidates, %d feasible, %d simulated (%s)",
            search.num_candidates,
            search.num_feasible,
            len(search.trials),
            search.stopped,
        )
        if search.num_feasible == 0:
            # the spec's own plan or the baseline's lie outside the space asked for: no answer to it
            raise InfeasiblePlan("search", no_feasible_message(search))
        baseline = None
        if with_baseline:
            left = None if seconds is None else max(1.0, seconds - (time.monotonic() - started))
            budget = Budget.of(settings.baseline_simulations + 1, left)
            baseline = HomogeneousBaseline().search(problem, evaluator, budget, progress)
        spec_plan = _spec_plan(problem, evaluator, progress)
        simulated = evaluator.num_simulated
        logger.info("%d simulation(s) run, %d taken from the cache", simulated, cache.hits)
    return PlanReport(
        problem, search, baseline, spec_plan, time.monotonic() - started, jobs, simulated, cache.hits
    )


def no_feasible_message(search: SearchOutcome) -> str:
    widen = "widen the search section (tp/pp/dp, micro_batch_size, recompute, distributed_optimizer)"
    if not search.num_candidates:
        return (
            "the search space is empty: no tp·pp·dp of the values allowed fits the cluster's GPUs and "
            f"the model; {widen}"
        )
    counts = ", ".join(f"{key} {n}" for key, n in search.tally.counts.most_common(6))
    return (
        f"none of the {search.num_candidates} candidates of the search space is feasible "
        f"({counts or search.stopped}); {widen} or the cluster"
    )


def written_plan(problem: Problem) -> Plan | None:
    """The plan the spec spells out, if it spells out a complete and consistent one."""
    spec = problem.base
    try:
        check_consistency(spec)
        workload = plan_workload(spec)  # resolves uniform / auto splits as `run` would
    except AstraHeteroError:
        return None
    par = spec.parallelism
    shape = Shape(par.tp, par.pp, par.dp, par.cp)
    options = tuple((d.field, d.written(spec)) for d in active_dimensions())
    written = spec.mapping.grid or spec.mapping.stages or spec.mapping.replicas
    grid = spec_grid(problem) if written else None
    return Plan(
        shape,
        options,
        grid,
        workload.partition.layers_per_stage,
        workload.partition.micro_batches_per_replica,
        spec.mapping.allow_idle_gpus,
    )


def _spec_plan(problem: Problem, evaluator: Evaluator, progress: Progress) -> Trial | None:
    plan = written_plan(problem)
    if plan is None:
        return None
    walk = Walk(problem)
    found = walk.trial(
        walk.contexts.get(plan.shape, plan.options), plan, walk.cells(plan.shape, plan.grid), "spec"
    )
    if isinstance(found, Infeasible):
        return None
    outcome = SearchOutcome("spec")
    run_batch(problem, evaluator, [found], Budget(1), outcome, progress)
    return found if found.evaluation is not None and found.evaluation.ok else None
