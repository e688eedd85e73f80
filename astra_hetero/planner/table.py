"""The rows every output is made of: one per plan simulated on the real cluster, best first."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from astra_hetero.planner.base import Trial
from astra_hetero.planner.dimensions import option_names
from astra_hetero.planner.driver import PlanReport
from astra_hetero.planner.pricing import cost_per_iteration, gpus_used_by_type

BASE_COLUMNS = (
    "rank",
    "source",
    "status",
    "iteration_time_us",
    "tokens_per_s",
    "speedup_vs_baseline",
    "tp",
    "pp",
    "dp",
    "cp",
)
TAIL_COLUMNS = (
    "mapping",
    "layers",
    "micro_batches",
    "gpus_used",
    "idle_gpus",
    "memory_headroom_gib",
    "estimate_us",
    "lower_bound_us",
    "mean_compute_us",
    "mean_exposed_comm_us",
    "mean_idle_us",
    "cost_per_iteration",
    "cached",
    "error",
)


def columns() -> tuple[str, ...]:
    return (*BASE_COLUMNS, *option_names(), *TAIL_COLUMNS)


@dataclass(frozen=True)
class Row:
    trial: Trial
    values: dict[str, Any]


def plan_rows(report: PlanReport) -> list[Row]:
    """Search, baseline and spec plans on the real cluster, each plan once, fastest first."""
    trials: dict[Any, Trial] = {}
    labelled = [*report.search.trials]
    if report.baseline is not None:
        labelled += report.baseline.trials
    if report.spec_plan is not None:
        labelled.append(report.spec_plan)
    for trial in labelled:
        known = trials.get(trial.plan)
        if known is None or (known.source in ("search", "refine") and trial.source in ("baseline", "spec")):
            trials[trial.plan] = trial  # a plan both found and chosen by a baseline is labelled by it
    ordered = sorted(trials.values(), key=lambda t: (t.time_us, t.estimate_us, t.plan.label))
    baseline = report.baseline_best
    return [Row(t, _values(report, t, i + 1, baseline)) for i, t in enumerate(ordered)]


def _values(report: PlanReport, trial: Trial, rank: int, baseline: Trial | None) -> dict[str, Any]:
    problem, plan, evaluation = report.problem, trial.plan, trial.evaluation
    ok = evaluation is not None and evaluation.ok
    used = sum(gpus_used_by_type(problem, trial).values())
    values: dict[str, Any] = {
        "rank": rank,
        "source": trial.source,
        "status": "ok" if ok else "failed",
        "iteration_time_us": round(trial.time_us, 3) if ok else "",
        "tokens_per_s": round(problem.tokens_per_iteration / (trial.time_us / 1e6), 1) if ok else "",
        "speedup_vs_baseline": round(baseline.time_us / trial.time_us, 4) if ok and baseline else "",
        "tp": plan.tp,
        "pp": plan.pp,
        "dp": plan.dp,
        "cp": plan.cp,
        **{name: plan.option(name, "") for name in option_names()},
        "mapping": plan.mapping_text,
        "layers": " ".join(map(str, plan.layers)),
        "micro_batches": " ".join(map(str, plan.micro_batches)),
        "gpus_used": used,
        "idle_gpus": problem.num_gpus - used,
        "memory_headroom_gib": round(trial.headroom_gib, 2),
        "estimate_us": round(trial.estimate_us, 1),
        "lower_bound_us": round(trial.bound_us, 1),
        "mean_compute_us": round(evaluation.compute_us, 3) if ok and evaluation else "",
        "mean_exposed_comm_us": round(evaluation.exposed_comm_us, 3) if ok and evaluation else "",
        "mean_idle_us": round(evaluation.idle_us, 3) if ok and evaluation else "",
        "cost_per_iteration": _cost(cost_per_iteration(problem, trial)),
        "cached": bool(evaluation and evaluation.cached),
        "error": "" if ok or evaluation is None else evaluation.error.splitlines()[0],
    }
    return values


def _cost(value: float | None) -> Any:
    return "" if value is None else float(f"{value:.6g}")
