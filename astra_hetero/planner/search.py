"""The heterogeneity-aware planner: branch and bound with the simulator in the loop.

1. Walk the space into branches (pool.Walk): shape × options × cell composition, each with a lower
   bound valid for all its candidates and a quick estimate from its most regular grids.
2. Expand the most promising branches (estimate within `INITIAL_SPREAD` of the best) into candidates,
   each with its own estimate and lower bound.
3. Simulate candidates in order of estimate, a batch per round (one plan per worker). Before a
   candidate is sent it is dropped if its lower bound is no better than the best simulated time (it
   cannot win), or if its estimate, corrected by the most optimistic simulated/estimated ratio seen, is
   still `estimate_margin` behind the best.
4. When no candidate is left, the remaining branches are pruned the same way (bound, then
   estimate) or expanded, the most promising first, and step 3 continues.
5. Refine the best plans' splits: move one layer off the busiest stage, one micro-batch off the
   replica that finishes last, and keep climbing while the simulation says it helps.

With `estimate_margin: null` only bounds prune, and a search that ends within its budget has found
the best plan of the space.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Iterable

from astra_hetero.planner.base import Budget, Progress, Quiet, SearchOutcome, Trial
from astra_hetero.planner.candidate import Plan, plan_spec
from astra_hetero.planner.evaluate import Evaluator
from astra_hetero.planner.feasibility import Infeasible, Reason
from astra_hetero.planner.pool import Branch, Walk
from astra_hetero.planner.problem import Problem
from astra_hetero.planner.splits import canonical_batches

MIN_RATIO_SAMPLES = 4  # simulations before the estimate ratio is trusted to skip candidates
REFINE_SHARE = 0.25  # of the simulation budget kept for refinement
INITIAL_SPREAD = 0.1  # branches expanded before the first simulation: estimate within 10 % of the best


class BranchAndBound:
    name = "branch_and_bound"

    def search(
        self, problem: Problem, evaluator: Evaluator, budget: Budget, progress: Progress | None = None
    ) -> SearchOutcome:
        progress = progress or Quiet()
        started = time.monotonic()
        walk = Walk(problem)
        progress.phase("enumerating branches")
        branches = sorted(walk.branches(progress), key=lambda b: b.rank)
        refine = problem.settings.refine_top > 0 and budget.max_simulations > 1
        main = Budget(
            budget.max_simulations - (int(budget.max_simulations * REFINE_SHARE) if refine else 0),
            budget.deadline,
        )
        ranked = _Ranked(problem, walk, evaluator, main, progress, self.name)
        progress.phase("simulating", main.max_simulations)
        ranked.run(branches)
        budget.used += main.used
        outcome = ranked.outcome
        if refine:
            _refine(problem, walk, ranked.considered, evaluator, budget, outcome, progress)
        _count_walk(outcome, walk)
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
        walk = Walk(problem)
        progress.phase("enumerating")
        pool = sorted((t for b in walk.branches(progress) for t in walk.expand(b)), key=_rank_key)
        outcome = SearchOutcome(self.name, num_feasible=len(pool))
        progress.phase("simulating", len(pool))
        for start in range(0, len(pool), evaluator.parallelism):
            run_batch(
                problem, evaluator, pool[start : start + evaluator.parallelism], budget, outcome, progress
            )
        outcome.stopped = "every feasible candidate simulated"
        _count_walk(outcome, walk)
        outcome.wall_time_s = time.monotonic() - started
        return outcome


def _count_walk(outcome: SearchOutcome, walk: Walk) -> None:
    """Fold the walk's counts (rejections, candidates seen) into the outcome's."""
    for key, count in walk.tally.counts.items():
        outcome.tally.counts[key] += count
        outcome.tally.examples.setdefault(key, walk.tally.examples.get(key, ""))
    outcome.num_candidates += walk.num_candidates
    outcome.num_collapsed += walk.num_collapsed


def _rank_key(trial: Trial) -> tuple[float, float, str]:
    return (trial.assessment.estimate_ns, trial.assessment.bound_ns, trial.plan.label)


class _Ranked:
    """Candidates in order of estimate, branches expanded on demand, the best simulated time so far."""

    def __init__(
        self,
        problem: Problem,
        walk: Walk,
        evaluator: Evaluator,
        budget: Budget,
        progress: Progress,
        name: str,
    ) -> None:
        self.problem, self.walk, self.evaluator = problem, walk, evaluator
        self.budget, self.progress = budget, progress
        self.outcome = SearchOutcome(name)
        self.margin = problem.settings.estimate_margin
        self.heap: list[tuple[tuple[float, float, str], int, Trial]] = []
        self.considered: list[Trial] = []  # every expanded candidate
        self.best = float("inf")
        self.ratio = float("inf")  # least simulated / estimated time seen
        self.samples = 0

    def run(self, branches: list[Branch]) -> None:
        waiting = list(branches)
        while waiting:
            waiting = self._expand_most_promising(waiting)
            if not self._simulate():
                self._skip_branches(waiting, Reason.BUDGET)
                self.outcome.stopped = self.budget.why_stopped()
                return
            waiting = [b for b in waiting if not self._pruned(b)]
        if self.margin is None:
            self.outcome.stopped = (
                "space exhausted: every candidate simulated or bounded out (the best is optimal in the space)"
                if self.problem.bounds_hold
                else "space exhausted: every candidate simulated (the best is optimal in the space)"
            )
        else:
            self.outcome.stopped = (
                "space exhausted: every candidate simulated, bounded out or ranked out by its estimate"
            )

    def _expand_most_promising(self, waiting: list[Branch]) -> list[Branch]:
        """Expand the first branch and those whose estimate is within INITIAL_SPREAD of it; return
        the rest."""
        first = waiting[0]
        limit = first.estimate_ns * (1 + INITIAL_SPREAD)
        count = 1
        while (
            count < len(waiting)
            and waiting[count].estimated == first.estimated
            and (waiting[count].estimate_ns <= limit)
        ):
            count += 1
        self._expand(waiting[:count])
        return waiting[count:]

    def _expand(self, branches: Iterable[Branch]) -> None:
        # Candidates enter the heap with their bounds only, keyed by the bound (never above the
        # estimate); one whose bound surfaces is estimated and pushed back with its own key and
        # sequence number, so estimated candidates leave the heap in the order they would if all had
        # been estimated up front, and those bounded out before that are never estimated. A bound
        # left where it reached the best (`cutoff_us`) is still below the plan's full bound.
        for branch in branches:
            for trial in self.walk.expand(branch, estimate=False, cutoff_us=self.best):
                self.outcome.num_feasible += 1
                self.considered.append(trial)
                if self._skip(trial) is Reason.BOUND:  # the best only falls: bounded out for good
                    self.outcome.tally.add(Infeasible(Reason.BOUND))
                else:  # below its own key: the estimate is at least the bound, the label at least ""
                    key = (trial.assessment.bound_ns, trial.assessment.bound_ns, "")
                    heapq.heappush(self.heap, (key, len(self.considered), trial))

    def _skip(self, item: Trial | Branch) -> Reason | None:
        """Why a candidate (or a whole branch) need not be simulated, if it need not."""
        if self.problem.bounds_hold and item.bound_us >= self.best:
            return Reason.BOUND
        if self.margin is not None and self.samples >= MIN_RATIO_SAMPLES:
            if item.estimate_us * self.ratio * (1 - self.margin) >= self.best:
                return Reason.ESTIMATE
        return None

    def _pruned(self, branch: Branch) -> bool:
        reason = self._skip(branch)
        if reason is not None:
            self.walk.reject(Infeasible(reason, "branch"), branch.size)
        return reason is not None

    def _skip_branches(self, branches: list[Branch], reason: Reason) -> None:
        for branch in branches:
            self.walk.reject(Infeasible(reason, "branch"), branch.size)

    def _simulate(self) -> bool:
        """Simulate from the heap until it is empty (True) or the budget is spent (False)."""
        while self.heap:
            room = min(self.evaluator.parallelism, self.budget.left())
            if room == 0:
                self.outcome.tally.add(Infeasible(Reason.BUDGET), len(self.heap))
                self.heap.clear()
                return False
            batch: list[Trial] = []
            while self.heap and len(batch) < room:
                _, number, trial = heapq.heappop(self.heap)
                if not trial.assessment.estimated and self._skip(trial) is not Reason.BOUND:
                    trial = self.walk.estimated(trial)
                    heapq.heappush(self.heap, (_rank_key(trial), number, trial))
                    continue
                reason = self._skip(trial)
                if reason is None:
                    batch.append(trial)
                else:
                    self.outcome.tally.add(Infeasible(reason))
            run_batch(self.problem, self.evaluator, batch, self.budget, self.outcome, self.progress)
            for trial in batch:
                if trial.evaluation is not None and trial.evaluation.ok:
                    self.best = min(self.best, trial.time_us)
                    self.ratio = min(self.ratio, trial.time_us / max(trial.estimate_us, 1e-9))
                    self.samples += 1
        return True


def run_batch(
    problem: Problem,
    evaluator: Evaluator,
    batch: list[Trial],
    budget: Budget,
    outcome: SearchOutcome,
    progress: Progress,
) -> None:
    specs = [plan_spec(problem.base, t.plan) for t in batch]
    for trial, evaluation in zip(batch, evaluator.evaluate(specs, problem.neighbours), strict=True):
        trial.evaluation = evaluation
        outcome.trials.append(trial)
        if not evaluation.ok:
            outcome.tally.add(Infeasible(Reason.FAILED, "", evaluation.error.splitlines()[0]))
        if not evaluation.cached:
            budget.used += 1
        best = outcome.best
        progress.advance(1, best.time_us if best else None)


def _refine(
    problem: Problem,
    walk: Walk,
    considered: list[Trial],
    evaluator: Evaluator,
    budget: Budget,
    outcome: SearchOutcome,
    progress: Progress,
) -> None:
    """Hill-climb the splits of the best `refine_top` plans, one layer or micro-batch at a time.
    Candidates considered already (simulated or pruned) are not counted again."""
    settings = problem.settings
    seen = {t.plan for t in considered}
    ok = [t for t in outcome.ranked if t.evaluation is not None and t.evaluation.ok]
    parents = ok[: settings.refine_top]
    for _ in range(settings.refine_rounds):
        best = outcome.best.time_us if outcome.best else float("inf")
        children: list[tuple[Trial, Trial]] = []
        for parent in parents:
            for plan in neighbours(problem, walk, parent):
                if plan in seen:
                    continue
                seen.add(plan)
                walk.num_candidates += 1
                ctx = walk.contexts.get(plan.shape, plan.options)
                found = walk.trial(ctx, plan, walk.cells(plan.shape, plan.grid), "refine")
                if isinstance(found, Infeasible):
                    walk.tally.add(found)
                    continue
                outcome.num_feasible += 1
                if problem.bounds_hold and found.bound_us >= best:
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
    # interleaving: every chunk keeps a layer, and replicas take micro-batches in groups of pp
    v = dict(plan.options).get("virtual_stages", 1)
    floor, unit = v, (plan.pp if v > 1 else 1)
    if settings.layers == "search" and plan.pp > 1 and len(busy) == plan.pp:
        hot = max(range(plan.pp), key=lambda s: busy[s])
        cold = min(range(plan.pp), key=lambda s: busy[s])
        for target in sorted({hot - 1, hot + 1, cold} - {hot}):
            if 0 <= target < plan.pp and plan.layers[hot] > floor:
                layers = list(plan.layers)
                layers[hot] -= 1
                layers[target] += 1
                found.append(plan.with_splits(tuple(layers), plan.micro_batches))
    finish = evaluation.replica_finish_us
    if settings.micro_batches == "search" and plan.dp > 1 and len(finish) == plan.dp:
        late = max(range(plan.dp), key=lambda r: finish[r])
        early = min(range(plan.dp), key=lambda r: finish[r])
        if late != early and plan.micro_batches[late] > unit:
            batches = list(plan.micro_batches)
            batches[late] -= unit
            batches[early] += unit
            found.append(plan.with_splits(plan.layers, canonical_batches(tuple(batches), cells)))
    return found
