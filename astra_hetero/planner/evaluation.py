"""What the search keeps of one simulated plan: the iteration time and where it went, or the error."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from statistics import fmean
from typing import Any

from astra_hetero.results.model import RunResult


@dataclass(frozen=True)
class Evaluation:
    iteration_time_us: float | None  # None when the simulation failed
    error: str = ""
    compute_us: float = 0.0  # means over the GPUs that work (idle GPUs left out)
    exposed_comm_us: float = 0.0
    idle_us: float = 0.0
    stage_busy_us: tuple[float, ...] = ()  # per stage: mean compute + exposed communication
    replica_finish_us: tuple[float, ...] = ()  # per replica: its last GPU's finish
    wall_time_s: float = 0.0
    deterministic: bool = True  # False for failures of the machinery (a worker died): not cached
    cached: bool = False

    @property
    def ok(self) -> bool:
        return self.iteration_time_us is not None

    def as_cached(self) -> Evaluation:
        return dataclasses.replace(self, cached=True)

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data.pop("cached")
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Evaluation:
        data = dict(data)
        for key in ("stage_busy_us", "replica_finish_us"):
            data[key] = tuple(data.get(key, ()))
        return cls(**data)

    @classmethod
    def failed(cls, error: str, deterministic: bool = True) -> Evaluation:
        return cls(None, error=error.strip() or "failed", deterministic=deterministic)

    @classmethod
    def of(cls, result: RunResult, wall_time_s: float) -> Evaluation:
        working = [r for r in result.ranks if r.stage is not None]
        stages = sorted({r.stage for r in working if r.stage is not None})
        replicas = sorted({r.replica for r in working if r.replica is not None})
        return cls(
            iteration_time_us=result.iteration_time_us,
            compute_us=fmean(r.compute_us for r in working),
            exposed_comm_us=fmean(r.exposed_comm_us for r in working),
            idle_us=fmean(r.idle_us for r in working),
            stage_busy_us=tuple(
                fmean(r.compute_us + r.exposed_comm_us for r in working if r.stage == s) for s in stages
            ),
            replica_finish_us=tuple(max(r.finish_us for r in working if r.replica == d) for d in replicas),
            wall_time_s=round(wall_time_s, 3),
        )
