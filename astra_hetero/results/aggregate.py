"""Per-group aggregates of a result: ranks grouped by pipeline stage, GPU type, or both.

A cluster of 1024 ranks is read through these groups rather than rank by rank. Each group keeps the
spread (min / mean / max) of every per-rank time and the group's total idle time, so that a summary can
say both "stage 1 is the slow one" and "the idle time sits on the H100s".
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from statistics import fmean
from typing import Any, Literal

from astra_hetero.results.model import RankResult, RunResult

Grouping = Literal["stage", "gpu", "stage_gpu", "rank"]


@dataclass(frozen=True)
class Spread:
    min: float
    mean: float
    max: float

    @classmethod
    def of(cls, values: Iterable[float]) -> Spread:
        items = list(values)
        if not items:
            raise ValueError("a spread needs at least one value")
        return cls(min=min(items), mean=fmean(items), max=max(items))


@dataclass(frozen=True)
class GroupStats:
    """The ranks sharing one key (a stage, a GPU type, a (stage, GPU type) pair or a single rank)."""

    label: str
    num_ranks: int
    gpus: tuple[str, ...]
    stages: tuple[int, ...]
    compute_us: Spread
    exposed_comm_us: Spread
    idle_us: Spread
    finish_us: Spread
    total_idle_us: float

    @property
    def busy_us(self) -> float:
        """Mean time a rank of the group was computing or communicating with nothing to hide it."""
        return self.compute_us.mean + self.exposed_comm_us.mean

    def to_json(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "num_ranks": self.num_ranks,
            "gpus": list(self.gpus),
            "stages": list(self.stages),
            **{
                name: vars(getattr(self, name))
                for name in ("compute_us", "exposed_comm_us", "idle_us", "finish_us")
            },
            "total_idle_us": self.total_idle_us,
        }


def _stage_key(rank: RankResult) -> tuple[int, int]:
    """Stages in order, then ranks whose stage the traces do not show (an imported study's; they
    work), then the GPUs a plan leaves idle (no stage, no work)."""
    if rank.stage is not None:
        return (0, rank.stage)
    return (1, 0) if rank.compute_us > 0 or rank.exposed_comm_us > 0 else (2, 0)


def _stage_label(key: tuple[Any, ...]) -> str:
    return ("stage {}", "stage unknown", "idle GPUs")[key[0]].format(key[1])


_KEYS: dict[Grouping, Callable[[RankResult], tuple[Any, ...]]] = {
    "stage": _stage_key,
    "gpu": lambda r: (r.gpu,),
    "stage_gpu": lambda r: (*_stage_key(r), r.gpu),
    "rank": lambda r: (r.rank,),
}

_LABELS: dict[Grouping, Callable[[tuple[Any, ...]], str]] = {
    "stage": _stage_label,
    "gpu": lambda k: str(k[0]),
    "stage_gpu": lambda k: f"{_stage_label(k)} · {k[2]}",
    "rank": lambda k: f"rank {k[0]}",
}


def group_ranks(result: RunResult, by: Grouping) -> list[GroupStats]:
    """Aggregates of `result` grouped `by` stage, GPU type, both, or rank; in key order."""
    groups: dict[tuple[Any, ...], list[RankResult]] = defaultdict(list)
    for rank in result.ranks:
        groups[_KEYS[by](rank)].append(rank)
    return [_stats(_LABELS[by](key), groups[key]) for key in sorted(groups)]


def total_idle_share(groups: Iterable[GroupStats]) -> dict[str, float]:
    """Fraction of all idle time that each group holds (0 everywhere when nobody idled)."""
    items = list(groups)
    total = sum(g.total_idle_us for g in items)
    return {g.label: (g.total_idle_us / total if total > 0 else 0.0) for g in items}


def _stats(label: str, ranks: list[RankResult]) -> GroupStats:
    return GroupStats(
        label=label,
        num_ranks=len(ranks),
        gpus=tuple(sorted({r.gpu for r in ranks})),
        stages=tuple(sorted({r.stage for r in ranks if r.stage is not None})),
        compute_us=Spread.of(r.compute_us for r in ranks),
        exposed_comm_us=Spread.of(r.exposed_comm_us for r in ranks),
        idle_us=Spread.of(r.idle_us for r in ranks),
        finish_us=Spread.of(r.finish_us for r in ranks),
        total_idle_us=sum(r.idle_us for r in ranks),
    )
