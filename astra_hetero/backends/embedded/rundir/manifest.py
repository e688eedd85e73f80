"""The fields of `manifest.json` the embedded engine reads, validated like a spec.

A run directory is an input like a spec: a field of the wrong type, a value out of range or a rank
list that does not cover every rank is a RunDirError naming the file and the field, never a
traceback or a silently different simulation (a truncated rank list used to drop the reduction
cost through device memory without a word).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from astra_hetero.errors import RunDirError

# More ranks than this is a corrupt header, not a job: no cluster of 2^20 GPUs is simulated here.
MAX_RANKS = 1 << 20
# Device-memory bandwidth in GB/s: an HBM3e stack delivers ~1.2 TB/s and a GPU holds up to eight;
# 10^6 GB/s leaves room for any device while catching unit slips and corruption.
MAX_HBM_GBYTES_PER_S = 1e6


@dataclass(frozen=True)
class ManifestFields:
    num_ranks: int | None = None  # None: no manifest, count from the other files
    max_comm_in_flight: int = 0  # 0 = unlimited
    workload_prefix: str | None = None
    labels: list[dict[str, Any]] = field(default_factory=list)  # per rank, in rank order
    hbm_gbytes_per_s: list[float] | None = None  # per rank, or None when the manifest gives none
    comm_overlap_slowdown: float = 0.0  # compute's extra time beside communication (spec compute.*)


def manifest_fields(data: dict[str, Any], path: Path) -> ManifestFields:
    """Validate the parts of a manifest the engine uses (`data` is the parsed JSON object); the
    communication model's keys (collective_model, collective_algorithm, ...) are comm_inputs.py's."""
    num_ranks = _rank_count(data, path)
    limit = data.get("max_comm_in_flight_per_rank")
    if limit is not None and (not _is_int(limit) or limit < 0):
        raise RunDirError(
            f"{path}: max_comm_in_flight_per_rank must be an integer >= 0 or null, not {limit!r}"
        )
    prefix = data.get("workload_prefix")
    if prefix is not None:
        prefix = _relative_path(prefix, path)
    labels = _labels(data.get("ranks", []), num_ranks, path)
    slowdown = data.get("comm_overlap_slowdown", 0.0)
    if isinstance(slowdown, bool) or not isinstance(slowdown, int | float) or not 0 <= slowdown <= 1:
        raise RunDirError(f"{path}: comm_overlap_slowdown must be a number in 0..1, not {slowdown!r}")
    return ManifestFields(num_ranks, limit or 0, prefix, labels, _hbm(labels, path), float(slowdown))


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _rank_count(data: dict[str, Any], path: Path) -> int:
    if "num_ranks" not in data:
        raise RunDirError(f"{path}: num_ranks is missing")
    count = data["num_ranks"]
    if not _is_int(count) or not 1 <= count <= MAX_RANKS:
        raise RunDirError(f"{path}: num_ranks must be an integer in 1..{MAX_RANKS}, not {count!r}")
    return count


def _relative_path(value: Any, path: Path) -> str:
    """A path inside the run directory: relative, no `..`, so reads never leave the directory."""
    parts = PurePosixPath(value).parts if isinstance(value, str) else ()
    if not parts or "\\" in value:
        raise RunDirError(
            f"{path}: workload_prefix must be a relative path inside the run directory, not {value!r}"
        )
    if PurePosixPath(value).is_absolute() or ".." in parts:
        raise RunDirError(
            f"{path}: workload_prefix leads outside the run directory ({value!r}); it must be a "
            "relative path without '..'"
        )
    return value


def _labels(entries: Any, num_ranks: int, path: Path) -> list[dict[str, Any]]:
    if not isinstance(entries, list):
        raise RunDirError(f"{path}: ranks must be a list of per-rank objects")
    if entries and len(entries) != num_ranks:
        raise RunDirError(f"{path}: ranks lists {len(entries)} entries for num_ranks {num_ranks}")
    for index, entry in enumerate(entries):
        where = f"{path}: ranks[{index}]"
        if not isinstance(entry, dict):
            raise RunDirError(f"{where} must be an object")
        if entry.get("rank", index) != index or isinstance(entry.get("rank"), bool):
            raise RunDirError(
                f"{where}.rank must be {index} (entries in rank order), not {entry.get('rank')!r}"
            )
        idle = entry.get("idle", False)
        if not isinstance(idle, bool):
            raise RunDirError(f"{where}.idle must be true or false, not {idle!r}")
        for key in ("node", "stage", "replica"):
            if key not in entry or (idle and key != "node" and entry[key] is None):
                continue  # an idle GPU serves no stage or replica
            if not _is_int(entry[key]) or entry[key] < 0:
                raise RunDirError(f"{where}.{key} must be an integer >= 0, not {entry[key]!r}")
        if entry.get("tp_index") is not None and (not _is_int(entry["tp_index"]) or entry["tp_index"] < 0):
            raise RunDirError(f"{where}.tp_index must be an integer >= 0 or null, not {entry['tp_index']!r}")
        if "gpu" in entry and not isinstance(entry["gpu"], str):
            raise RunDirError(f"{where}.gpu must be a string, not {entry['gpu']!r}")
    return entries


def _hbm(labels: list[dict[str, Any]], path: Path) -> list[float] | None:
    """Each rank's device-memory bandwidth in GB/s (= bytes per ns): all ranks or none."""
    given = [i for i, entry in enumerate(labels) if "hbm_gbytes_per_s" in entry]
    if not given:
        return None
    if len(given) != len(labels):
        missing = next(i for i, entry in enumerate(labels) if "hbm_gbytes_per_s" not in entry)
        raise RunDirError(f"{path}: ranks[{missing}].hbm_gbytes_per_s is missing (other ranks give it)")
    values = []
    for index, entry in enumerate(labels):
        value = entry["hbm_gbytes_per_s"]
        number = float(value) if _is_int(value) or isinstance(value, float) else math.nan
        if not 0 < number <= MAX_HBM_GBYTES_PER_S:
            raise RunDirError(
                f"{path}: ranks[{index}].hbm_gbytes_per_s must be a number in (0, {MAX_HBM_GBYTES_PER_S:g}], "
                f"not {value!r}"
            )
        values.append(number)
    return values
