"""Cost per iteration from a price per GPU-hour per GPU type, and the cheapest plan within a slowdown.

A plan pays for the GPUs it uses; GPUs it leaves idle are taken as released (that is the point of
leaving them idle), so dropping expensive GPUs can make a slower plan the cheaper one.
"""

from __future__ import annotations

from collections.abc import Sequence

from astra_hetero.planner.base import Trial
from astra_hetero.planner.problem import Problem
from astra_hetero.workload.layout import place_cells

SECONDS_PER_HOUR = 3600.0


def gpus_used_by_type(problem: Problem, trial: Trial) -> dict[str, int]:
    plan = trial.plan
    groups = plan.grid if plan.grid is not None else [[None] * plan.dp for _ in range(plan.pp)]
    layout = place_cells(
        problem.devices,
        groups,
        plan.tp,
        allow_across_nodes=problem.base.parallelism.allow_tp_across_nodes,
        allow_idle=plan.allow_idle,
        cp=plan.cp,
    )
    counts: dict[str, int] = {}
    for rank in layout.active_ranks:
        key = layout.devices[rank].gpu_type
        counts[key] = counts.get(key, 0) + 1
    return counts


def cost_per_iteration(problem: Problem, trial: Trial) -> float | None:
    """Price units per iteration; None without prices or without a simulated time."""
    prices = problem.settings.prices_per_gpu_hour
    if not prices or trial.evaluation is None or not trial.evaluation.ok:
        return None
    per_hour = sum(prices[gpu] * count for gpu, count in gpus_used_by_type(problem, trial).items())
    return per_hour * trial.time_us / 1e6 / SECONDS_PER_HOUR


def cheapest_within(problem: Problem, trials: Sequence[Trial]) -> Trial | None:
    """The cheapest plan no more than `max_slowdown` slower than the fastest (None without prices)."""
    ok = [t for t in trials if cost_per_iteration(problem, t) is not None]
    if not ok:
        return None
    fastest = min(t.time_us for t in ok)
    allowed = [t for t in ok if t.time_us <= fastest * (1 + problem.settings.max_slowdown)]
    return min(allowed, key=lambda t: (cost_per_iteration(problem, t), t.time_us))
