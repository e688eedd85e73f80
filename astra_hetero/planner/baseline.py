"""The homogeneous-assumption baseline: the plan a planner picks when it takes every GPU for the
cluster's most common GPU, splitting layers and micro-batches uniformly over the cluster in order —
searched with the same machinery, then run on the real cluster.

If the plan it prefers does not fit the real cluster (a GPU with less memory), the next one it
simulated that does is taken, as a user who tried it would have to.
"""

from __future__ import annotations

import time
from collections import Counter

from astra_hetero.errors import SpecError
from astra_hetero.planner.base import Budget, Progress, Quiet, SearchOutcome, Trial
from astra_hetero.planner.evaluate import Evaluator
from astra_hetero.planner.feasibility import Infeasible, spec_check, spec_infeasible
from astra_hetero.planner.pool import Walk
from astra_hetero.planner.problem import Problem, device_classes
from astra_hetero.planner.search import BranchAndBound, run_batch
from astra_hetero.spec.devices import enumerate_devices
from astra_hetero.spec.schema import GpuSpec, Spec


def most_common_gpu(spec: Spec) -> GpuSpec:
    """The GPU with the most devices in the cluster (the first such node group's, on a tie)."""
    counts: Counter[str] = Counter()
    first: dict[str, GpuSpec] = {}
    for group in spec.cluster.node_groups:
        counts[group.gpu.type_key] += group.num_gpus
        first.setdefault(group.gpu.type_key, group.gpu)
    return first[max(counts, key=lambda key: (counts[key], -list(first).index(key)))]


def homogeneous_problem(problem: Problem) -> Problem:
    """The same problem on a cluster of the most common GPU, with a homogeneous planner's space."""
    gpu = most_common_gpu(problem.base)
    groups = [g.model_copy(update={"gpu": gpu}) for g in problem.base.cluster.node_groups]
    base = problem.base.model_copy(
        update={"cluster": problem.base.cluster.model_copy(update={"node_groups": groups})}
    )
    settings = problem.settings.model_copy(
        update={
            "mapping": "default",
            "layers": "uniform",
            "micro_batches": "uniform",
            "use_all_gpus": True,
            "refine_top": 0,
            "max_simulations": problem.settings.baseline_simulations,
        }
    )
    return Problem(
        base, settings, device_classes(base), tuple(enumerate_devices(base.cluster)), problem.source
    )


class HomogeneousBaseline:
    name = "homogeneous"

    def search(
        self, problem: Problem, evaluator: Evaluator, budget: Budget, progress: Progress | None = None
    ) -> SearchOutcome:
        """The baseline's plans as run on the real cluster; `best` is the baseline."""
        progress = progress or Quiet()
        started = time.monotonic()
        assumed = homogeneous_problem(problem)
        inner = Budget(min(budget.left(), assumed.settings.max_simulations), budget.deadline)
        chosen = BranchAndBound().search(assumed, evaluator, inner, progress)
        budget.used += inner.used
        outcome = SearchOutcome(
            self.name,
            tally=chosen.tally,
            num_candidates=chosen.num_candidates,
            num_feasible=chosen.num_feasible,
            notes=[f"every GPU taken for a {most_common_gpu(problem.base).name}"],
        )
        walk = Walk(problem)
        for preferred in chosen.ranked:
            if preferred.evaluation is None or not preferred.evaluation.ok:
                continue
            real = _on_real_cluster(walk, preferred)
            if isinstance(real, Infeasible):
                outcome.notes.append(
                    f"its pick {preferred.plan.label} does not run on the real cluster: "
                    f"{real.key} ({real.detail})"
                )
                continue
            run_batch(problem, evaluator, [real], budget, outcome, progress)
            if real.evaluation is not None and real.evaluation.ok:
                outcome.stopped = f"picked from {len(chosen.trials)} simulations on the assumed cluster"
                break
        else:
            outcome.stopped = "no plan of the homogeneous planner runs on the real cluster"
        outcome.wall_time_s = time.monotonic() - started
        return outcome


def _on_real_cluster(walk: Walk, preferred: Trial) -> Trial | Infeasible:
    plan = preferred.plan
    try:
        ctx = walk.contexts.get(plan.shape, plan.options)
        spec_check(ctx, plan)
        cells = walk.cells(plan.shape, plan.grid)
    except SpecError as error:
        return spec_infeasible(error)
    found = walk.trial(ctx, plan, cells, "baseline")
    return found
