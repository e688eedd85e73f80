"""The planner interface: every planner takes a problem and an evaluator and returns the plans it
simulated, best first, with the counts of what it skipped and why."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from astra_hetero.planner.candidate import Plan
from astra_hetero.planner.estimate import Assessment
from astra_hetero.planner.evaluation import Evaluation
from astra_hetero.planner.feasibility import Tally

if TYPE_CHECKING:
    from astra_hetero.planner.evaluate import Evaluator
    from astra_hetero.planner.problem import Problem


@dataclass
class Trial:
    """A feasible candidate: its plan, estimate and bound, memory headroom, and (once simulated) result."""

    plan: Plan
    assessment: Assessment
    headroom_gib: float
    source: str = "search"  # search | refine | baseline | spec
    evaluation: Evaluation | None = None

    @property
    def time_us(self) -> float:
        """Simulated iteration time; infinite until simulated, or when the simulation failed."""
        if self.evaluation is None or self.evaluation.iteration_time_us is None:
            return float("inf")
        return self.evaluation.iteration_time_us

    @property
    def estimate_us(self) -> float:
        return self.assessment.estimate_ns / 1000

    @property
    def bound_us(self) -> float:
        return self.assessment.bound_ns / 1000


@dataclass
class SearchOutcome:
    planner: str
    trials: list[Trial] = field(default_factory=list)  # every simulated plan, in simulation order
    tally: Tally = field(default_factory=Tally)
    num_candidates: int = 0  # the space: every candidate considered
    num_feasible: int = 0  # passed the spec and memory checks
    num_collapsed: int = 0  # left out as reorderings of identical replicas (same plan)
    stopped: str = ""  # why the search ended
    wall_time_s: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def ranked(self) -> list[Trial]:
        """Simulated plans, fastest first; failed ones last."""
        return sorted(self.trials, key=lambda t: (t.time_us, t.estimate_us))

    @property
    def best(self) -> Trial | None:
        ranked = self.ranked
        return ranked[0] if ranked and ranked[0].evaluation and ranked[0].evaluation.ok else None


class Planner(Protocol):
    """Every planner: the branch-and-bound search, exhaustive simulation, the homogeneous baseline."""

    name: str

    def search(
        self, problem: Problem, evaluator: Evaluator, budget: Budget, progress: Progress | None = None
    ) -> SearchOutcome: ...


class Progress(Protocol):
    def phase(self, name: str, total: int | None = None) -> None: ...

    def advance(self, count: int = 1, best_us: float | None = None) -> None: ...


class Quiet:
    def phase(self, name: str, total: int | None = None) -> None:
        pass

    def advance(self, count: int = 1, best_us: float | None = None) -> None:
        pass


@dataclass
class Budget:
    """Simulations and wall time the search may still spend."""

    max_simulations: int
    deadline: float | None = None  # time.monotonic() value
    used: int = 0

    @classmethod
    def of(cls, max_simulations: int, seconds: float | None) -> Budget:
        return cls(max_simulations, time.monotonic() + seconds if seconds else None)

    def left(self) -> int:
        if self.deadline is not None and time.monotonic() >= self.deadline:
            return 0
        return max(0, self.max_simulations - self.used)

    def why_stopped(self) -> str:
        if self.deadline is not None and time.monotonic() >= self.deadline:
            return "time budget spent"
        return f"simulation budget spent ({self.max_simulations} simulations)"
