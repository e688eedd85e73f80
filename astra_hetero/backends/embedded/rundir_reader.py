"""Read everything the engine needs from a run directory, validated, into plain data.

Works on directories written by `astra-hetero` (manifest.json present) and on plain ASTRA-sim input
sets: without a manifest the rank count comes from ns3/logical_topology.json or from the trace files,
the trace prefix is discovered (`<prefix>.<rank>.et` under workload/ or the directory itself), and the
collective algorithm defaults to hierarchical.
"""

from __future__ import annotations

import json
import math
import os
import re
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from astra_hetero import rundir
from astra_hetero.backends.embedded import collectives
from astra_hetero.backends.embedded.packets import apply_link_model
from astra_hetero.backends.embedded.topology import Topology, host_groups, read_topology
from astra_hetero.backends.embedded.tracefile import RankTrace, read_rank_trace
from astra_hetero.errors import RunDirError

DEFAULT_ALGORITHM = "hierarchical"
_PARALLEL_MIN_RANKS = 64  # below this, starting worker processes costs more than it saves


@dataclass(frozen=True)
class SimInput:
    root: Path
    traces: list[RankTrace]
    groups: dict[str, tuple[int, ...]]  # pg_name -> members; "" is every rank
    topology: Topology
    machines: list[int]  # rank -> machine index (for hierarchical collectives)
    algorithm: str
    labels: list[dict[str, Any]] = field(default_factory=list)  # manifest's per-rank entries
    max_comm_in_flight: int = 0  # collectives/sends a rank may have in flight; 0 = unlimited
    link_model: str = "ideal"  # how the links' rates and delays were derived (already applied)

    @property
    def num_ranks(self) -> int:
        return len(self.traces)

    @property
    def memory_bytes_per_ns(self) -> list[float] | None:
        """Each rank's device-memory bandwidth (manifest `hbm_gbytes_per_s`), or None if not given."""
        if len(self.labels) != self.num_ranks or any("hbm_gbytes_per_s" not in r for r in self.labels):
            return None
        return [float(r["hbm_gbytes_per_s"]) for r in self.labels]  # GB/s is bytes per ns


def read_run_dir(root: Path, workers: int | None = None) -> SimInput:
    root = Path(root)
    if not root.is_dir():
        raise RunDirError(f"{root}: not a directory")
    manifest = rundir.RunDir(root).read_manifest() if (root / rundir.MANIFEST).is_file() else {}
    prefix = _trace_prefix(root, manifest)
    num_ranks = _num_ranks(root, manifest, prefix)
    topology, link_model = apply_link_model(read_topology(root / rundir.NS3_TOPOLOGY), root, manifest)
    if len(topology.npus) < num_ranks:
        raise RunDirError(
            f"{root / rundir.NS3_TOPOLOGY}: {len(topology.npus)} non-switch nodes for {num_ranks} ranks"
        )
    groups = _comm_groups(prefix.parent / Path(rundir.COMM_GROUPS).name, num_ranks)
    traces = _read_traces([Path(f"{prefix}.{rank}.et") for rank in range(num_ranks)], num_ranks, workers)
    labels = list(manifest.get("ranks", []))
    algorithm = str(manifest.get("collective_algorithm", DEFAULT_ALGORITHM))
    if algorithm not in collectives.ALGORITHMS or algorithm == "direct":
        raise RunDirError(
            f"{root / rundir.MANIFEST}: collective_algorithm {algorithm!r} is not one of ring, hierarchical"
        )
    limit = manifest.get("max_comm_in_flight_per_rank") or 0
    if not isinstance(limit, int) or limit < 0:
        raise RunDirError(
            f"{root / rundir.MANIFEST}: max_comm_in_flight_per_rank must be a positive integer "
            f"or null, not {limit!r}"
        )
    return SimInput(
        root, traces, groups, topology, _machines(labels, topology, num_ranks), algorithm, labels, limit,
        link_model,
    )


def _trace_prefix(root: Path, manifest: dict[str, Any]) -> Path:
    if "workload_prefix" in manifest:
        return root / str(manifest["workload_prefix"])
    for folder in (root / rundir.WORKLOAD_DIR, root):
        names = {m.group(1) for p in folder.glob("*.0.et") if (m := re.fullmatch(r"(.+)\.0\.et", p.name))}
        if len(names) > 1:
            raise RunDirError(f"{folder}: several trace sets ({', '.join(sorted(names))}); keep one")
        if names:
            return folder / names.pop()
    raise RunDirError(f"{root}: no Chakra traces (expected workload/<prefix>.<rank>.et)")


def _num_ranks(root: Path, manifest: dict[str, Any], prefix: Path) -> int:
    if "num_ranks" in manifest:
        return int(manifest["num_ranks"])
    logical = root / rundir.NS3_LOGICAL_TOPOLOGY
    if logical.is_file():
        try:
            return math.prod(int(d) for d in json.loads(logical.read_text())["logical-dims"])
        except (ValueError, KeyError, TypeError) as exc:
            raise RunDirError(f'{logical}: expected {{"logical-dims": ["N", ...]}} ({exc})') from None
    count = 0
    while Path(f"{prefix}.{count}.et").is_file():
        count += 1
    return count


def _comm_groups(path: Path, num_ranks: int) -> dict[str, tuple[int, ...]]:
    groups: dict[str, tuple[int, ...]] = {"": tuple(range(num_ranks))}
    if not path.is_file():
        return groups
    data = rundir.read_json_object(path, "")
    for name, members in data.items():
        valid = isinstance(members, list) and all(isinstance(r, int) and 0 <= r < num_ranks for r in members)
        if not valid:
            raise RunDirError(f"{path}: group {name!r} must list ranks in 0..{num_ranks - 1}")
        if len(set(members)) != len(members) or not members:
            raise RunDirError(f"{path}: group {name!r} is empty or lists a rank twice")
        groups[str(name)] = tuple(sorted(members))
    return groups


def _read_traces(paths: list[Path], num_ranks: int, workers: int | None) -> list[RankTrace]:
    missing = [p for p in paths if not p.is_file()]
    if missing:
        raise RunDirError(
            f"{missing[0]}: trace file missing ({len(missing)} of {len(paths)} rank files absent)"
        )
    workers = workers if workers is not None else min(2, os.cpu_count() or 1)
    if workers <= 1 or len(paths) < _PARALLEL_MIN_RANKS:
        return [read_rank_trace(p, num_ranks) for p in paths]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        chunk = max(1, len(paths) // (workers * 8))
        return list(pool.map(read_rank_trace, paths, [num_ranks] * len(paths), chunksize=chunk))


def _machines(labels: list[dict[str, Any]], topology: Topology, num_ranks: int) -> list[int]:
    if len(labels) == num_ranks and all("node" in entry for entry in labels):
        by_rank = {int(entry.get("rank", i)): int(entry["node"]) for i, entry in enumerate(labels)}
        return [by_rank[r] for r in range(num_ranks)]
    return host_groups(topology, num_ranks)
