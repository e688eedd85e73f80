"""Reading and writing `result.json` (atomically), checked both ways.

A result is written only if every time in it is a finite, non-negative number, and read only if it
is one: a non-finite or negative time is a wrong number whichever side it comes from.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from astra_hetero.errors import BackendFailed, RunDirError
from astra_hetero.provenance import KEY as PROVENANCE
from astra_hetero.provenance import provenance_problem
from astra_hetero.results.model import RESULT_FORMAT, RunResult
from astra_hetero.results.throughput import figures_problem
from astra_hetero.rundir import MANIFEST, RESULT, write_text_atomic

RANK_TIMES = ("finish_us", "compute_us", "exposed_comm_us", "idle_us")


def write_result(run_dir: Path, result: RunResult) -> Path:
    check_result(result)
    path = Path(run_dir) / RESULT
    write_text_atomic(path, result_text(result))
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


# Past this many ranks result.json lists rank classes rather than ranks (`rank_classes`): ranks whose
# GPU, stage and times are equal (a folded class) as one record with their rank ranges; each rank's
# replica, node and TP index are the manifest's and are read back from it. 131,072 GPUs: 16 records.
RANK_RECORDS_MAX = 16_384
PLACEMENT = ("replica", "node", "tp_index")  # what a rank class record leaves to the manifest


def result_text(result: RunResult) -> str:
    """result.json's text: the header indented, each rank and collective on a line of its own (past
    RANK_RECORDS_MAX ranks, each rank class).

    Large runs carry a million collective records; indenting every field goes through json's pure
    Python encoder at a fraction of the speed of its C encoder, which one line per record keeps."""
    data = result.to_json()
    records = {key: data.pop(key) for key in ("ranks", "collectives")}
    if len(records["ranks"]) > RANK_RECORDS_MAX:
        records = {"rank_classes": rank_class_records(records.pop("ranks")), **records, "ranks": []}
    head = json.dumps(data, indent=2)  # an object: ends with "\n}"
    encode = json.JSONEncoder().encode
    lists = [
        f'  "{key}": [' + ",".join("\n    " + encode(item) for item in items) + ("\n  ]" if items else "]")
        for key, items in records.items()
    ]
    return head[:-2] + ",\n" + ",\n".join(lists) + "\n}\n"


def rank_class_records(ranks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rank records grouped by everything but the rank and its placement, with [first, last] ranges."""
    groups: dict[tuple, dict[str, Any]] = {}
    for record in ranks:
        rest = {k: v for k, v in record.items() if k != "rank" and k not in PLACEMENT}
        key = tuple(sorted(rest.items()))
        group = groups.get(key)
        if group is None:
            group = groups[key] = {"ranks": [], **rest}
        runs, rank = group["ranks"], record["rank"]
        if runs and runs[-1][1] == rank - 1:
            runs[-1][1] = rank
        else:
            runs.append([rank, rank])
    return list(groups.values())


def _expanded(raw: bytes, run_dir: Path, path: Path) -> bytes:
    """A result.json with `rank_classes` as the one with every rank listed, each rank's placement
    from the manifest beside it (None without one)."""
    try:
        data = json.loads(raw)
        if isinstance(data, dict) and "rank_classes" not in data:
            return raw  # the name appeared elsewhere (meta.folding counts rank classes too)
        classes = data.pop("rank_classes")
        labels = (
            json.loads((run_dir / MANIFEST).read_bytes()).get("ranks")
            if (run_dir / MANIFEST).is_file()
            else []
        )
    except (ValueError, KeyError, OSError, AttributeError):
        raise RunDirError(f"{path}: not a result file (rank_classes unreadable)") from None
    ranks: dict[int, dict[str, Any]] = {}
    for number, group in enumerate(classes if isinstance(classes, list) else [None]):
        runs = group.get("ranks") if isinstance(group, dict) else None
        if not isinstance(runs, list) or not all(
            isinstance(r, list) and len(r) == 2 and all(isinstance(x, int) for x in r) and r[0] <= r[1]
            for r in runs
        ):
            raise RunDirError(f"{path}: rank_classes[{number}].ranks must be [first, last] ranges")
        fields = {k: v for k, v in group.items() if k != "ranks"}
        for first, last in runs:
            for rank in range(first, last + 1):
                if rank in ranks:
                    raise RunDirError(f"{path}: rank_classes list rank {rank} twice")
                label = labels[rank] if isinstance(labels, list) and 0 <= rank < len(labels) else {}
                place = {k: label.get(k) if isinstance(label, dict) else None for k in PLACEMENT}
                ranks[rank] = {"rank": rank, **fields, **place}
    data["ranks"] = [ranks[r] for r in sorted(ranks)]
    return json.dumps(data).encode()


# `rank_classes` holding a list: records by class. meta.folding's count of rank classes (a number) does
# not match, so an ordinary result is parsed once, not twice.
_CLASS_LIST = re.compile(rb'"rank_classes"\s*:\s*\[')


def read_result(run_dir: Path) -> RunResult:
    path = Path(run_dir) / RESULT
    if path.is_symlink() or (path.exists() and not path.is_file()):
        raise RunDirError(f"{path}: not a regular file")
    if not path.is_file():
        raise RunDirError(f"{path}: missing (run `astra-hetero run` on this directory first)")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise RunDirError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if _CLASS_LIST.search(raw):
        raw = _expanded(raw, Path(run_dir), path)
    result = _from_json(raw, path)
    problem = time_problem(result)
    if problem:
        raise RunDirError(f"{path}: {problem} (times must be finite and non-negative)")
    problem = figures_problem(result.throughput) or provenance_problem(result.meta.get(PROVENANCE))
    if problem:
        raise RunDirError(f"{path}: {problem}")
    for i, rank in enumerate(result.ranks):
        placed = [v for v in (rank.stage, rank.replica) if v is not None]  # None: an idle GPU
        if rank.rank != i or any(v < 0 for v in placed):
            raise RunDirError(
                f"{path}: ranks[{i}] describes rank {rank.rank}, stage {rank.stage}, "
                f"replica {rank.replica}; ranks must be listed in order, from 0"
            )
    _check_against_manifest(result, Path(run_dir), path)
    return result


@cache
def _adapter() -> TypeAdapter[RunResult]:
    return TypeAdapter(RunResult)


def _from_json(raw: bytes, path: Path) -> RunResult:
    """The result in `raw`, every field of the right type (strictly: no "3" for 3, no true for 1)."""
    try:
        result = _adapter().validate_json(raw, strict=True)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.get("loc", ())).lstrip(".")
        reason = "not JSON" if error.get("type") == "json_invalid" else error.get("msg", "invalid")
        raise RunDirError(f"{path}: not a result file ({where or 'the file'}: {reason})") from None
    if not result.ranks:
        raise RunDirError(f"{path}: not a result file (no ranks)")
    if result.format != RESULT_FORMAT or b'"format"' not in raw:  # absent: the field's default
        found = f"format {result.format!r}" if b'"format"' in raw else "no format"
        raise RunDirError(
            f"{path}: {found} is not one this version reads ({RESULT_FORMAT}); rerun `astra-hetero run` "
            "on the directory, or read it with the version that wrote it"
        )
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
