"""The `jobs` of a run directory's manifest (several training jobs sharing the cluster), validated for
every backend.

Each job names its ranks as [first, end) ranges, when it starts (`start_ns`) and how many iterations
it runs. Jobs never share a rank; ranks in no job are idle GPUs. A manifest without `jobs` is one job.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from astra_hetero.errors import RunDirError

MAX_NS = 10**15  # as dynamics.json: the spec bounds times to 1e9 ms
MAX_ITERATIONS = 100_000


@dataclass(frozen=True)
class RunJob:
    name: str
    ranks: tuple[int, ...]  # ascending
    start_ns: int
    iterations: int


def read_jobs(manifest: dict[str, Any], num_ranks: int, path: Path) -> tuple[RunJob, ...]:
    entries = manifest.get("jobs")
    if entries is None:
        return ()
    if not isinstance(entries, list) or not entries:
        raise RunDirError(f"{path}: jobs must be a non-empty list of job objects")
    owner: dict[int, str] = {}
    jobs = []
    for i, entry in enumerate(entries):
        where = f"{path}: jobs[{i}]"
        if not isinstance(entry, dict):
            raise RunDirError(f"{where} must be an object")
        name = entry.get("name")
        if not isinstance(name, str) or not name or any(job.name == name for job in jobs):
            raise RunDirError(f"{where}.name must be a non-empty string no other job has, not {name!r}")
        ranks = _ranks(entry.get("ranks"), num_ranks, f"{where}.ranks")
        for rank in ranks:
            if rank in owner:
                raise RunDirError(f"{where}.ranks: rank {rank} is also job {owner[rank]!r}'s")
            owner[rank] = name
        start, count = entry.get("start_ns", 0), entry.get("iterations", 1)
        if not _is_int(start) or not 0 <= start <= MAX_NS:
            raise RunDirError(f"{where}.start_ns must be an integer in 0..{MAX_NS:.0e}, not {start!r}")
        if not _is_int(count) or not 1 <= count <= MAX_ITERATIONS:
            raise RunDirError(f"{where}.iterations must be an integer in 1..{MAX_ITERATIONS}, not {count!r}")
        jobs.append(RunJob(name, ranks, start, count))
    return tuple(jobs)


def _ranks(value: Any, num_ranks: int, where: str) -> tuple[int, ...]:
    """[[first, end), ...] ranges, each inside 0..num_ranks, as ascending ranks."""
    if not isinstance(value, list) or not value:
        raise RunDirError(f"{where} must be a non-empty list of [first, end) ranges")
    ranks: list[int] = []
    for k, pair in enumerate(value):
        ok = isinstance(pair, list) and len(pair) == 2 and all(_is_int(v) for v in pair)
        if not ok or not 0 <= pair[0] < pair[1] <= num_ranks:
            raise RunDirError(
                f"{where}[{k}] must be [first, end) with 0 <= first < end <= {num_ranks}, not {pair!r}"
            )
        ranks.extend(range(pair[0], pair[1]))
    if len(set(ranks)) != len(ranks):
        raise RunDirError(f"{where}: ranges overlap")
    return tuple(sorted(ranks))


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def job_of_ranks(jobs: tuple[RunJob, ...], num_ranks: int) -> list[int]:
    """Per rank, the index of its job, or -1 for a rank in none."""
    of = [-1] * num_ranks
    for j, job in enumerate(jobs):
        for rank in job.ranks:
            of[rank] = j
    return of


def rank_ranges(ranks: Sequence[int]) -> list[list[int]]:
    """Ascending ranks as [first, end) ranges: [0, 1, 2, 5] -> [[0, 3], [5, 6]]."""
    out: list[list[int]] = []
    for rank in sorted(ranks):
        if out and out[-1][1] == rank:
            out[-1][1] = rank + 1
        else:
            out.append([rank, rank + 1])
    return out
