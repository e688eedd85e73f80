"""Why a candidate is not simulated: typed reasons, counted.

The checks are the pipeline's own. A candidate's spec must pass the loader's cross-section checks
(`check_consistency`: divisibility, TP inside a node and a GPU type, batch sizes, mapping, partition),
and every cell must pass the generator's memory estimate (`workload.memory.estimate`, the function
`check_memory` applies) on its GPU. The search adds its own reasons for the candidates it skips.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from enum import Enum

from astra_hetero.errors import SpecError
from astra_hetero.planner.candidate import Plan, plan_spec
from astra_hetero.planner.context import OptionContext
from astra_hetero.planner.estimate import Cell
from astra_hetero.spec.load import check_consistency
from astra_hetero.spec.schema import PartitionSpec, Spec


class Reason(str, Enum):
    SPEC = "spec"  # a cross-section check of the spec rejects it (the field is named)
    MEMORY = "memory"  # some cell's memory estimate exceeds its GPU's memory
    DOMINATED = "dominated"  # the same plan with less recomputation fits: it can only be faster
    BOUND = "bound"  # its lower bound is no better than the best simulated plan
    ESTIMATE = "estimate"  # its estimate is too far behind the best simulated plan
    BUDGET = "budget"  # not reached before the simulation or time budget ran out
    FAILED = "failed"  # the simulation failed (the error is recorded)


DESCRIPTIONS = {
    Reason.SPEC: "rejected by the spec checks",
    Reason.MEMORY: "does not fit in device memory",
    Reason.DOMINATED: "the same plan with less recomputation fits (and does less work)",
    Reason.BOUND: "lower bound no better than the best simulated",
    Reason.ESTIMATE: "estimate too far behind the best simulated",
    Reason.BUDGET: "not simulated: budget spent",
    Reason.FAILED: "simulation failed",
}


@dataclass(frozen=True)
class Infeasible:
    reason: Reason
    field: str = ""
    detail: str = ""

    @property
    def key(self) -> str:
        return f"{self.reason.value}: {self.field}" if self.field else self.reason.value


@dataclass
class Tally:
    """Candidates counted by reason, with the first detail seen for each."""

    counts: Counter[str] = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)

    def add(self, why: Infeasible, count: int = 1) -> None:
        self.counts[why.key] += count
        self.examples.setdefault(why.key, why.detail)

    def by_reason(self) -> dict[str, int]:
        """Totals per reason (fields of spec rejections summed)."""
        totals: Counter[str] = Counter()
        for key, count in self.counts.items():
            totals[key.split(":")[0]] += count
        return dict(totals)

    def total(self, reason: Reason | None = None) -> int:
        if reason is None:
            return sum(self.counts.values())
        return sum(c for k, c in self.counts.items() if k.split(":")[0] == reason.value)


def spec_check(ctx: OptionContext, plan: Plan, partition: PartitionSpec | None = None) -> Spec:
    """The plan's complete spec after the loader's checks; SpecError names the failing field.
    `partition` stands in for the plan's splits when they are not chosen yet."""
    spec = plan_spec(ctx.problem.base, plan, ctx.parallelism, partition)
    check_consistency(spec)
    return spec


def spec_infeasible(error: SpecError) -> Infeasible:
    return Infeasible(Reason.SPEC, error.field, error.reason)


def memory_headroom_gib(
    ctx: OptionContext,
    cells: list[list[Cell]],
    layers: tuple[int, ...],
    micro_batches: tuple[int, ...],
    capacity_gib: dict[int, float],
) -> tuple[float, str]:
    """Least free memory over the cells (negative: does not fit), and which cell that is when it
    does not fit."""
    worst, at = float("inf"), (0, 0, 0.0, 0.0)
    for s, row in enumerate(cells):
        seen: set[tuple[int, int]] = set()
        chunks = ctx.chunk_layers(s, layers[s], frozenset(c.device_class for c in row))
        for r, cell in enumerate(row):
            if (cell.device_class, micro_batches[r]) in seen:
                continue  # the same need on the same GPU as a replica before
            seen.add((cell.device_class, micro_batches[r]))
            need = ctx.memory_need_gib(s, layers[s], micro_batches[r], chunks)
            capacity = capacity_gib[cell.device_class]
            if capacity - need < worst:
                worst, at = capacity - need, (s, r, need, capacity)
    if worst >= 0:
        return worst, ""
    s, r, need, capacity = at
    return worst, f"stage {s} of replica {r} needs {need:.1f} of {capacity:g} GiB"
