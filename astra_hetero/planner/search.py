"""The heterogeneity-aware planner: branch and bound over the candidate pool, simulation in the loop.

1. Walk the space (pool.Walk): every feasible candidate with its estimate and lower bound.
2. Simulate in order of estimate, a batch per round (one plan per worker). Before each candidate is
   sent, drop it if its lower bound is no better than the best simulated time (it cannot win), or if
   its estimate, corrected by the most optimistic estimate-to-simulation ratio seen so far, is still
   `estimate_margin` behind the best. With `estimate_margin: null` only bounds prune, and a search that
   ends before its budget has provably found the best plan of the space.
3. Refine the best plans' splits: move one layer off the busiest stage, one micro-batch off the
   replica that finishes last, and keep climbing while the simulation says it helps.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from astra_hetero.planner.base import Budget, Progress, Quiet, SearchOutcome, Trial
from astra_hetero.planner.candidate import Plan, plan_spec
from astra_hetero.planner.evaluate import Evaluator
from astra_hetero.planner.feasibility import Infeasible, Reason
from astra_hetero.planner.pool import Walk
from astra_hetero.planner.problem import Problem
from astra_hetero.planner.splits import canonical_batches

MIN_RATIO_SAMPLES = 4  # simulations before the estimate ratio is trusted to skip candidates
REFINE_SHARE = 0.25  # of the simulation budget kept for refinement


class BranchAndBound:
    name = "branch_and_bound"

    def search(
        self, problem: Problem, evaluator: Evaluator, budget: Budget, progress: Progress | None = None
    ) -> SearchOutcome:
        progress = progress or Quiet()
        started = time.monotonic()
        walk, pool, outcome = _enumerate(self.name, problem, progress)
        refine = problem.settings.refine_top > 0 and budget.max_simulations > 1
        main = Budget(
            budget.max_simulations - (int(budget.max_simulations * REFINE_SHARE) if refine else 0),
            budget.deadline,
        )
        progress.phase("simulating", min(len(pool), budget.max_simulations))
        outcome.stopped = _simulate_ranked(problem, pool, evaluator, main, outcome, progress)
        budget.used += main.used
        if refine:
            _refine(problem, walk, pool, evaluator, budget, outcome, progress)
        outcome.wall_time_s = time.monotonic() - started
        return outcome


class Exhaustive:
    """Every feasible candidate simulated: the reference the other planners are measured against."""

    name = "exhaustive"

    def search(
        self, problem: Problem, evaluator: Evaluator, budget: Budget, progress: Progress | None = None
    ) -> SearchOutcome:
        progress = progress or Quiet()
        started = time.monotonic()
        walk, pool, outcome = _enumerate(self.name, problem, progress)
        progress.phase("simulating", len(pool))
        for batch in _batches(pool, evaluator.parallelism):
            run_batch(problem, evaluator, batch, budget, outcome, progress)
        outcome.stopped = "every feasible candidate simulated"
        outcome.wall_time_s = time.monotonic() - started
        return outcome


def _enumerate(name: str, problem: Problem, progress: Progress) -> tuple[Walk, list[Trial], SearchOutcome]:
    """The feasible candidates in order of estimate, and an outcome that counts the walk."""
    walk = Walk(problem)
    progress.phase("enumerating candidates")
    pool = sorted(walk.candidates(progress), key=_rank_key)
    outcome = SearchOutcome(
        name,
        tally=walk.tally,
        num_candidates=walk.num_candidates,
        num_feasible=len(pool),
        num_collapsed=walk.num_collapsed,
    )
    return walk, pool, outcome


def _rank_key(trial: Trial) -> tuple[float, float, str]:
    return (trial.assessment.estimate_ns, trial.assessment.bound_ns, trial.plan.label)


def _batches(items: list[Trial], size: int) -> Iterator[list[Trial]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def run_batch(
    problem: Problem,
    evaluator: Evaluator,
    batch: list[Trial],
    budget: Budget,
    outcome: SearchOutcome,
    progress: Progress,
) -> None:
    specs = [plan_spec(problem.base, t.plan) for t in batch]
    for trial, evaluation in zip(batch, evaluator.evaluate(specs), strict=True):
        trial.evaluation = evaluation
        outcome.trials.append(trial)
        if not evaluation.ok:
            outcome.tally.add(Infeasible(Reason.FAILED, "", evaluation.error.splitlines()[0]))
        if not evaluation.cached:
            budget.used += 1
        best = outcome.best
        progress.advance(1, best.time_us if best else None)


def _simulate_ranked(
    problem: Problem,
    pool: list[Trial],
    evaluator: Evaluator,
    budget: Budget,
    outcome: SearchOutcome,
    progress: Progress,
) -> str:
    margin = problem.settings.estimate_margin
    best = float("inf")
    ratio = float("inf")  # least simulated / estimated time seen
    samples = 0
    index = 0
    while index < len(pool):
        room = min(evaluator.parallelism, budget.left())
        if room == 0:
            outcome.tally.add(Infeasible(Reason.BUDGET), len(pool) - index)
            return budget.why_stopped()
        batch: list[Trial] = []
        while index < len(pool) and len(batch) < room:
            trial = pool[index]
            index += 1
            if trial.bound_us >= best:
                outcome.tally.add(Infeasible(Reason.BOUND))
            elif (
                margin is not None
                and samples >= MIN_RATIO_SAMPLES
                and (trial.estimate_us * ratio * (1 - margin) >= best)
            ):
                outcome.tally.add(Infeasible(Reason.ESTIMATE))
            else:
                batch.append(trial)
        run_batch(problem, evaluator, batch, budget, outcome, progress)
        for trial in batch:
            if trial.evaluation is not None and trial.evaluation.ok:
                best = min(best, trial.time_us)
                ratio = min(ratio, trial.time_us / max(trial.estimate_us, 1e-9))
                samples += 1
    if margin is None:
        return "space exhausted: every candidate simulated or bounded out (the best is optimal in the space)"
    return "space exhausted: every candidate simulated, bounded out or ranked out by its estimate"


def _refine(
    problem: Problem,
    walk: Walk,
    pool: list[Trial],
    evaluator: Evaluator,
    budget: Budget,
    outcome: SearchOutcome,
    progress: Progress,
) -> None:
    """Hill-climb the splits of the best `refine_top` plans, one layer or micro-batch at a time.
    Plans of the pool were considered already (simulated or pruned) and are not counted again."""
    settings = problem.settings
    seen = {t.plan for t in pool}
    parents = [t for t in outcome.ranked if t.evaluation is not None and t.evaluation.ok][
        : settings.refine_top
    ]
    for _ in range(settings.refine_rounds):
        best = outcome.best.time_us if outcome.best else float("inf")
        children: list[tuple[Trial, Trial]] = []
        for parent in parents:
            for plan in neighbours(problem, walk, parent):
                if plan in seen:
                    continue
                seen.add(plan)
                outcome.num_candidates += 1
                ctx = walk.contexts.get(plan.shape, plan.options)
                found = walk.trial(ctx, plan, walk.cells(plan.shape, plan.grid), "refine")
                if isinstance(found, Infeasible):
                    outcome.tally.add(found)
                    continue
                outcome.num_feasible += 1
                if found.bound_us >= best:
                    outcome.tally.add(Infeasible(Reason.BOUND))
                else:
                    children.append((parent, found))
        room = budget.left()
        if room < len(children):
            outcome.tally.add(Infeasible(Reason.BUDGET), len(children) - room)
            children = children[:room]
        if not children:
            return
        run_batch(problem, evaluator, [child for _, child in children], budget, outcome, progress)
        improved: dict[int, Trial] = {}
        for parent, child in children:
            if child.time_us < parent.time_us and child.time_us < improved.get(id(parent), parent).time_us:
                improved[id(parent)] = child
        parents = list(improved.values())


def neighbours(problem: Problem, walk: Walk, trial: Trial) -> list[Plan]:
    """Plans one move away, in the direction the simulation points: a layer off the busiest stage (to
    each neighbour and to the least busy stage), a micro-batch off the replica that finishes last."""
    plan, evaluation, settings = trial.plan, trial.evaluation, problem.settings
    if evaluation is None or not evaluation.ok:
        return []
    cells = walk.cells(plan.shape, plan.grid)
    found = []
    busy = evaluation.stage_busy_us
    if settings.layers == "search" and plan.pp > 1 and len(busy) == plan.pp:
        hot = max(range(plan.pp), key=lambda s: busy[s])
        cold = min(range(plan.pp), key=lambda s: busy[s])
        for target in sorted({hot - 1, hot + 1, cold} - {hot}):
            if 0 <= target < plan.pp and plan.layers[hot] > 1:
                layers = list(plan.layers)
                layers[hot] -= 1
                layers[target] += 1
                found.append(plan.with_splits(tuple(layers), plan.micro_batches))
    finish = evaluation.replica_finish_us
    if settings.micro_batches == "search" and plan.dp > 1 and len(finish) == plan.dp:
        late = max(range(plan.dp), key=lambda r: finish[r])
        early = min(range(plan.dp), key=lambda r: finish[r])
        if late != early and plan.micro_batches[late] > 1:
            batches = list(plan.micro_batches)
            batches[late] -= 1
            batches[early] += 1
            found.append(plan.with_splits(plan.layers, canonical_batches(tuple(batches), cells)))
    return found
