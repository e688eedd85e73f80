"""The result of simulating one run directory, whatever backend produced it.

Times are microseconds in the JSON (ASTRA-sim reports cycles; one cycle is one nanosecond).
Per rank: `compute_us` is time spent in compute nodes, `exposed_comm_us` is time the rank was
communicating with no compute running, and `idle_us = iteration_time_us - compute_us -
exposed_comm_us` is everything else (pipeline bubbles, waiting for peers, waiting for the slowest rank).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
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
    instances: int = 1  # identical collectives (or transfers) of other groups (ranks) this record stands for

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
    format: str = RESULT_FORMAT  # what result.json says it is; read_result refuses any other
    meta: dict[str, Any] = field(default_factory=dict)
    # per iteration {index, time_us} (iteration_time_us is their mean); empty where a backend ran one
    iterations: tuple[dict[str, Any], ...] = ()
    # per dynamics event {index, event, start_us, end_us, ranks, links}: what each one touched
    events: tuple[dict[str, Any], ...] = ()
    # tokens_per_s, model_tflops_per_gpu, mfu, ... (results/throughput.py); None where not stated
    throughput: dict[str, Any] | None = None
    # several jobs sharing the cluster: per job {name, ranks ([first, end) ranges), start_us,
    # iterations, iteration_time_us, solo_iteration_time_us, slowdown}; `iteration_time_us` above is
    # then the whole run's span
    jobs: tuple[dict[str, Any], ...] = ()
    # links two or more jobs loaded, busiest first: {kind, gbps, lines, num_lines, busy,
    # bytes (per job)}
    shared_links: tuple[dict[str, Any], ...] = ()

    def to_json(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("ranks", "collectives")}
        data["meta"] = copy.deepcopy(self.meta)
        data["format"] = RESULT_FORMAT
        # records are flat: copying their fields beats `asdict`'s recursion for a million of them
        data["ranks"] = [dict(r.__dict__) for r in self.ranks]
        data["collectives"] = [dict(c.__dict__) for c in self.collectives]
        data["warnings"] = list(self.warnings)
        data["iterations"] = [dict(i) for i in self.iterations]
        data["events"] = [dict(e) for e in self.events]
        data["jobs"] = copy.deepcopy([dict(j) for j in self.jobs])
        data["shared_links"] = copy.deepcopy([dict(link) for link in self.shared_links])
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunResult:
        data = dict(data)
        ranks = tuple(RankResult(**r) for r in data.pop("ranks"))
        collectives = tuple(CollectiveStat(**c) for c in data.pop("collectives", []))
        warnings = tuple(data.pop("warnings", []))
        iterations = tuple(data.pop("iterations", []))
        events = tuple(data.pop("events", []))
        jobs = tuple(data.pop("jobs", []))
        shared_links = tuple(data.pop("shared_links", []))
        return cls(
            ranks=ranks,
            collectives=collectives,
            warnings=warnings,
            iterations=iterations,
            events=events,
            jobs=jobs,
            shared_links=shared_links,
            **data,
        )

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
    # shown with the span in a trace viewer: a collective's bytes, algorithm, protocol, ... (or None);
    # a description, not a time: left out of equality (a folded timeline equals the plain one)
    args: Mapping[str, Any] | None = field(default=None, compare=False)


class SharedSpans(Sequence[Span]):
    """Spans of ranks that share their timelines (a folded simulation): rank r's spans are those of
    `rows[row_of[r]]`, each `(kind, name, start_ns, end_ns[, args])`. Behaves as the full tuple of every
    rank's spans in rank order, built on demand; `for_ranks` picks ranks without building the rest."""

    def __init__(self, rows: list[list[tuple[Any, ...]]], row_of: list[int]) -> None:
        self._rows = rows
        self._row_of = row_of
        self._len = sum(len(rows[row]) for row in row_of)

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, index):  # type: ignore[no-untyped-def]
        if isinstance(index, slice):
            return tuple(self)[index]
        if index < 0:
            index += self._len
        for rank, row in enumerate(self._row_of):
            if index < len(self._rows[row]):
                return Span(rank, *self._rows[row][index])
            index -= len(self._rows[row])
        raise IndexError("span index out of range")

    def __iter__(self) -> Iterator[Span]:
        return iter(self.for_ranks(range(len(self._row_of))))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and tuple(self) == tuple(other)

    __hash__ = None  # type: ignore[assignment]

    def for_ranks(self, ranks: Iterable[int]) -> tuple[Span, ...]:
        return tuple(Span(rank, *cells) for rank in sorted(ranks) for cells in self._rows[self._row_of[rank]])


@dataclass(frozen=True)
class RunOutput:
    """What a backend returns: the result, plus timeline spans when the backend can give them."""

    result: RunResult
    spans: Sequence[Span] = ()
