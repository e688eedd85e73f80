"""Reading and writing `result.json` (atomically), checked both ways.

A result is written only if every time in it is a finite, non-negative number, and read only if it
is one: a non-finite or negative time is a wrong number whichever side it comes from.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

from astra_hetero.errors import BackendFailed, RunDirError
from astra_hetero.results.model import RunResult
from astra_hetero.rundir import MANIFEST, RESULT, write_json_atomic

RANK_TIMES = ("finish_us", "compute_us", "exposed_comm_us", "idle_us")


def write_result(run_dir: Path, result: RunResult) -> Path:
    check_result(result)
    path = Path(run_dir) / RESULT
    write_json_atomic(path, result.to_json())
    return path


def check_result(result: RunResult) -> None:
    """BackendFailed if a time is not finite or is negative (the backend went wrong; write nothing)."""
    problem = time_problem(result)
    if problem:
        raise BackendFailed(f"the {result.backend} backend returned {problem}; no result written")


def time_problem(result: RunResult) -> str:
    """A description of the first non-finite or negative time in `result`, or ''."""
    checks: list[tuple[str, Any]] = [("iteration_time_us", result.iteration_time_us)]
    for i, rank in enumerate(result.ranks):
        checks += [(f"ranks[{i}].{name}", getattr(rank, name)) for name in RANK_TIMES]
    for i, stat in enumerate(result.collectives):
        checks += [(f"collectives[{i}].start_us", stat.start_us), (f"collectives[{i}].end_us", stat.end_us)]
    for where, value in checks:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"{where} = {type(value).__name__}, not a number"
        if not math.isfinite(value) or value < 0:
            return f"{where} = {value}"
    return ""


def read_result(run_dir: Path) -> RunResult:
    path = Path(run_dir) / RESULT
    if path.is_symlink() or (path.exists() and not path.is_file()):
        raise RunDirError(f"{path}: not a regular file")
    if not path.is_file():
        raise RunDirError(f"{path}: missing (run `astra-hetero run` on this directory first)")
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise RunDirError(f"{path}: not a result file ({type(exc).__name__})") from None
    result = _from_json(data, path)
    problem = time_problem(result)
    if problem:
        raise RunDirError(f"{path}: {problem} (times must be finite and non-negative)")
    _check_against_manifest(result, Path(run_dir), path)
    return result


def _from_json(data: Any, path: Path) -> RunResult:
    if not isinstance(data, dict) or not isinstance(data.get("ranks"), list) or not data["ranks"]:
        raise RunDirError(f"{path}: not a result file (expected an object with a non-empty `ranks` list)")
    try:
        result = RunResult.from_json(data)
    except (TypeError, KeyError, ValueError, AttributeError):
        fields = ", ".join(f.name for f in dataclasses.fields(RunResult))
        raise RunDirError(f"{path}: not a result file (fields: {fields}; per rank: rank, gpu, …)") from None
    for i, rank in enumerate(result.ranks):
        for name in ("rank", "stage", "replica"):
            value = getattr(rank, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise RunDirError(f"{path}: ranks[{i}].{name} must be a non-negative integer")
        if rank.rank != i:
            raise RunDirError(f"{path}: ranks[{i}] describes rank {rank.rank}; ranks must be listed in order")
    return result


def _check_against_manifest(result: RunResult, run_dir: Path, path: Path) -> None:
    """A result beside a manifest must describe that manifest's ranks (never another run's)."""
    manifest = run_dir / MANIFEST
    if not manifest.is_file():
        return
    try:
        num_ranks = json.loads(manifest.read_bytes()).get("num_ranks")
    except (OSError, ValueError, AttributeError):
        return  # a broken manifest is the reader's to report; the result stands on its own
    if isinstance(num_ranks, int) and num_ranks != result.num_ranks:
        raise RunDirError(
            f"{path}: {result.num_ranks} ranks but {manifest.name} has {num_ranks}; this result is not "
            "of these inputs (run `astra-hetero run` on the directory again)"
        )


def relocate(result: RunResult, staging: Path, root: Path) -> RunResult:
    """The result with paths in its metadata naming where the run directory is published."""
    old, new = str(staging), str(root)

    def fix(value: Any) -> Any:
        if isinstance(value, str):
            return value.replace(old, new)
        if isinstance(value, list | tuple):
            return type(value)(fix(v) for v in value)
        if isinstance(value, dict):
            return {k: fix(v) for k, v in value.items()}
        return value

    return dataclasses.replace(result, meta=fix(result.meta))
