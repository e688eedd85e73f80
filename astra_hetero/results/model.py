"""The result of simulating one run directory, whatever backend produced it.

Times are microseconds in the JSON (ASTRA-sim reports cycles; one cycle is one nanosecond).
Per rank: `compute_us` is time spent in compute nodes, `exposed_comm_us` is time the rank was
communicating with no compute running, and `idle_us = iteration_time_us - compute_us -
exposed_comm_us` is everything else (pipeline bubbles, waiting for peers, waiting for the slowest rank).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

RESULT_FORMAT = "astra-hetero/result@1"
# A warning starting with this says that the backend simulated the cluster only approximately (one line,
# shown by every summary and report; see topology/approximation.py).
APPROXIMATION = "approximation: "


def optional_int(value: Any) -> int | None:
    """A manifest's stage or replica: an integer, or None for an idle GPU."""
    return None if value is None else int(value)


@dataclass(frozen=True)
class RankResult:
    rank: int
    gpu: str
    stage: int | None  # None for a GPU the plan leaves idle
    replica: int | None
    finish_us: float
    compute_us: float
    exposed_comm_us: float
    idle_us: float
    node: int | None = None
    tp_index: int | None = None


@dataclass(frozen=True)
class CollectiveStat:
    """One collective (or point-to-point transfer) as it ran: which group, what, how big, when."""

    group: str
    type: str
    bytes: int
    start_us: float
    end_us: float
    name: str = ""
    num_ranks: int = 0

    @property
    def duration_us(self) -> float:
        return self.end_us - self.start_us


@dataclass(frozen=True)
class RunResult:
    backend: str
    iteration_time_us: float
    ranks: tuple[RankResult, ...]
    collectives: tuple[CollectiveStat, ...] = ()
    warnings: tuple[str, ...] = ()
    exit_status: int | None = None
    wall_time_s: float | None = None
    time_unit_note: str = "times in microseconds; ASTRA-sim cycles are nanoseconds"
    meta: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["format"] = RESULT_FORMAT
        data["ranks"] = [asdict(r) for r in self.ranks]
        data["collectives"] = [asdict(c) for c in self.collectives]
        data["warnings"] = list(self.warnings)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunResult:
        data = dict(data)
        data.pop("format", None)
        ranks = tuple(RankResult(**r) for r in data.pop("ranks"))
        collectives = tuple(CollectiveStat(**c) for c in data.pop("collectives", []))
        warnings = tuple(data.pop("warnings", []))
        return cls(ranks=ranks, collectives=collectives, warnings=warnings, **data)

    @property
    def num_ranks(self) -> int:
        return len(self.ranks)

    @property
    def approximations(self) -> tuple[str, ...]:
        return tuple(w for w in self.warnings if w.startswith(APPROXIMATION))


@dataclass(frozen=True)
class Span:
    """One interval on one rank's timeline (compute or communication), for trace.json."""

    rank: int
    kind: str  # "compute" | "comm" | "send" | "recv"
    name: str
    start_ns: int
    end_ns: int


@dataclass(frozen=True)
class RunOutput:
    """What a backend returns: the result, plus timeline spans when the backend can give them."""

    result: RunResult
    spans: tuple[Span, ...] = ()
