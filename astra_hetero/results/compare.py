"""Several runs side by side: iteration time relative to the first run, stage times, idle by GPU type.

The first run is the reference (e.g. the homogeneous cluster); every other run is read against it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from astra_hetero.results.aggregate import GroupStats, group_ranks, total_idle_share
from astra_hetero.results.model import RunResult

REPORT_FORMAT = "astra-hetero/report@1"


@dataclass(frozen=True)
class RunSummary:
    """One labelled run, with the aggregates every table, plot and report.json is made from."""

    label: str
    result: RunResult
    ratio_to_first: float
    stages: tuple[GroupStats, ...]
    gpus: tuple[GroupStats, ...]

    @property
    def idle_share_by_gpu(self) -> dict[str, float]:
        return total_idle_share(self.gpus)

    def stage(self, stage: int) -> GroupStats | None:
        return next((g for g in self.stages if g.stages == (stage,)), None)

    def to_json(self) -> dict[str, Any]:
        result = self.result
        return {
            "label": self.label,
            "backend": result.backend,
            "num_ranks": result.num_ranks,
            "iteration_time_us": result.iteration_time_us,
            "ratio_to_first": None if math.isnan(self.ratio_to_first) else self.ratio_to_first,
            "by_stage": [g.to_json() for g in self.stages],
            "by_gpu": [g.to_json() for g in self.gpus],
            "idle_share_by_gpu": self.idle_share_by_gpu,
            "throughput": result.throughput,
            "warnings": list(result.warnings),
            **({"jobs": list(result.jobs), "shared_links": list(result.shared_links)} if result.jobs else {}),
        }


def summarize(results: Sequence[tuple[str, RunResult]]) -> list[RunSummary]:
    """Aggregates for each labelled run; ratios are iteration times over the first run's."""
    if not results:
        raise ValueError("nothing to summarize: no runs given")
    reference = results[0][1].iteration_time_us
    return [
        RunSummary(
            label=label,
            result=result,
            ratio_to_first=iteration_ratio(result.iteration_time_us, reference),
            stages=tuple(group_ranks(result, "stage")),
            gpus=tuple(group_ranks(result, "gpu")),
        )
        for label, result in results
    ]


# How a backend splits a rank's time that is not compute. The embedded engine: exposed communication
# is communicating with no compute running, idle is the rest (bubbles, waiting). ASTRA-sim's backends
# (their meta carries this note): exposed communication is finish − compute, so pipeline bubbles and
# waiting on peers are in it, and idle is only the time after the rank finished.
ASTRA_SPLIT_KEY = "exposed_comm_note"


def splits_differ(summaries: Sequence[RunSummary]) -> bool:
    """Whether the runs' exposed communication and idle mean different things (so only compute and
    their sum, the time not computing, compare)."""
    return len({ASTRA_SPLIT_KEY in s.result.meta for s in summaries}) > 1


def iteration_ratio(time_us: float, reference_us: float) -> float:
    """`time_us / reference_us`; NaN when the reference took no time (nothing to compare against)."""
    return time_us / reference_us if reference_us > 0 else math.nan


def all_stages(summaries: Sequence[RunSummary]) -> list[int]:
    """Every stage index that appears in any run (runs may use different pipeline depths)."""
    return sorted({s for summary in summaries for g in summary.stages for s in g.stages})


def all_gpus(summaries: Sequence[RunSummary]) -> list[str]:
    return sorted({g.label for summary in summaries for g in summary.gpus})


def report_json(summaries: Sequence[RunSummary], plots: Sequence[str] = ()) -> dict[str, Any]:
    return {
        "format": REPORT_FORMAT,
        "reference": summaries[0].label,
        "runs": [s.to_json() for s in summaries],
        "plots": list(plots),
    }
