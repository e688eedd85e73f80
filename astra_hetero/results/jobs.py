"""Per-job records of a result from its ranks alone: what a backend that runs each trace once (the
ASTRA-sim backends) reports for a run directory of several jobs. Each job ran one iteration from 0;
it ended when its last rank finished."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from astra_hetero.manifest_jobs import RunJob, rank_ranges
from astra_hetero.results.model import RunResult
from astra_hetero.results.throughput import throughput_figures


def finish_us(result: RunResult, job: RunJob) -> float:
    """When the job's last rank finished."""
    return max(result.ranks[rank].finish_us for rank in job.ranks)


def with_job_records(
    result: RunResult, jobs: Sequence[RunJob], solo_us: Sequence[float] | None = None
) -> RunResult:
    """`result` with its `jobs` from its ranks' finish times (`solo_us`: each job's time alone, when a
    solo run was made)."""
    records = []
    for j, job in enumerate(jobs):
        together = finish_us(result, job)
        record: dict[str, Any] = {
            "name": job.name,
            "ranks": rank_ranges(job.ranks),
            "num_ranks": len(job.ranks),
            "start_us": job.start_ns / 1000,
            "iterations": [{"index": 0, "time_us": together}],
            "iteration_time_us": together,
        }
        if solo_us is not None:
            alone = solo_us[j]
            record["solo_iterations"] = [{"index": 0, "time_us": alone}]
            record["solo_iteration_time_us"] = alone
            record["slowdown"] = together / alone if alone else None
        records.append(record)
    return dataclasses.replace(result, jobs=tuple(records))


def job_ranks(result: RunResult, name: str) -> list[int]:
    job = next(j for j in result.jobs if j["name"] == name)
    return [rank for first, end in job["ranks"] for rank in range(first, end)]


def job_result(result: RunResult, name: str) -> RunResult:
    """One job's part of a run: its ranks, its iteration time and iterations."""
    job = next(j for j in result.jobs if j["name"] == name)
    ranks = set(job_ranks(result, name))
    return dataclasses.replace(
        result,
        iteration_time_us=job["iteration_time_us"],
        ranks=tuple(r for r in result.ranks if r.rank in ranks),
        iterations=tuple(job["iterations"]) if len(job["iterations"]) > 1 else (),
        events=(),
        jobs=(),
        shared_links=(),
    )


def with_job_throughput(result: RunResult, manifest: dict[str, Any]) -> RunResult:
    """Each job's record with its own throughput figures (tokens/s, model TFLOP/s per GPU, MFU on its
    own GPUs, at its own iteration time), from the manifest's `jobs[].throughput`; unchanged where a
    job's manifest entry has none (a cut-down iteration) or the run had one job."""
    if not result.jobs:
        return result
    entries = {e.get("name"): e for e in manifest.get("jobs", []) if isinstance(e, dict)}
    records = []
    for job in result.jobs:
        record = entries.get(job["name"], {}).get("throughput")
        figures = None
        if isinstance(record, dict) and "unavailable" not in record:
            figures = throughput_figures(record, job["iteration_time_us"])
        records.append({**job, "throughput": figures} if figures is not None else dict(job))
    return dataclasses.replace(result, jobs=tuple(records))
