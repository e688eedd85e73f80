"""Read everything the engine needs from a run directory, validated, into plain data.

Works on directories written by `astra-hetero` (manifest.json present) and on plain ASTRA-sim input
sets: without a manifest the rank count comes from ns3/logical_topology.json or from the trace files,
the trace prefix is discovered (`<prefix>.<rank>.et` under workload/ or the directory itself), and the
collectives run the ideal model's hierarchical algorithm (see comm_inputs.py).
"""

from __future__ import annotations

import math
import os
import re
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from astra_hetero import rundir
from astra_hetero.backends.embedded.rundir.comm_inputs import CommInputs, read_comm_inputs
from astra_hetero.backends.embedded.rundir.link_model import apply_link_model
from astra_hetero.backends.embedded.rundir.manifest import MAX_RANKS, ManifestFields, manifest_fields
from astra_hetero.backends.embedded.rundir.topology import Topology, host_groups, read_topology
from astra_hetero.backends.embedded.trace.decode import read_rank_trace
from astra_hetero.backends.embedded.trace.records import RankTrace
from astra_hetero.errors import RunDirError

_PARALLEL_MIN_RANKS = 64  # below this, starting worker processes costs more than it saves


@dataclass(frozen=True)
class SimInput:
    """A validated run directory. Traces are decoded on demand (`read_traces`): a folded simulation
    decodes only the ranks it simulates."""

    root: Path
    trace_paths: list[Path]  # rank -> Chakra file
    groups: dict[str, tuple[int, ...]]  # pg_name -> members; "" is every rank
    topology: Topology
    machines: list[int]  # rank -> machine index (for hierarchical collectives)
    algorithm: str  # ideal model: ring | hierarchical; NCCL model: auto or a forced algorithm
    labels: list[dict[str, Any]] = field(default_factory=list)  # manifest's per-rank entries
    max_comm_in_flight: int = 0  # collectives/sends a rank may have in flight; 0 = unlimited
    memory_bytes_per_ns: list[float] | None = None  # per rank (manifest hbm_gbytes_per_s), or None
    comm: CommInputs = CommInputs()  # communication model, link kinds, architectures, nccl-tests tables
    link_model: str = "ideal"  # how the links' rates and delays were derived (already applied)
    comm_overlap_slowdown: float = 0.0  # compute's extra time while its GPU communicates

    @property
    def num_ranks(self) -> int:
        return len(self.trace_paths)


def read_run_dir(root: Path) -> SimInput:
    root = Path(root)
    if not root.is_dir():
        raise RunDirError(f"{root}: not a directory")
    rundir.check_inputs_inside(root)
    manifest_path = root / rundir.MANIFEST
    manifest: dict[str, Any] = {}
    fields = ManifestFields()
    if manifest_path.is_file():
        manifest = rundir.RunDir(root).read_manifest()
        fields = manifest_fields(manifest, manifest_path)
    prefix = _trace_prefix(root, fields.workload_prefix)
    num_ranks = fields.num_ranks if fields.num_ranks is not None else _count_ranks(root, prefix)
    paths = _trace_paths(prefix, num_ranks)
    topology, link_model = apply_link_model(
        read_topology(root / rundir.NS3_TOPOLOGY, num_ranks), root, manifest
    )
    if len(topology.npus) < num_ranks:
        raise RunDirError(
            f"{root / rundir.NS3_TOPOLOGY}: {len(topology.npus)} non-switch nodes for {num_ranks} ranks"
        )
    groups = _comm_groups(prefix.parent / Path(rundir.COMM_GROUPS).name, num_ranks)
    comm = read_comm_inputs(root, manifest, fields.labels, topology, num_ranks)
    return SimInput(
        root,
        paths,
        groups,
        topology,
        _machines(fields.labels, topology, num_ranks),
        comm.algorithm,
        fields.labels,
        fields.max_comm_in_flight,
        fields.hbm_gbytes_per_s,  # GB/s is bytes per ns
        comm,
        link_model,
        fields.comm_overlap_slowdown,
    )


def read_traces(sim: SimInput, ranks: list[int], workers: int | None = None) -> list[RankTrace]:
    """Decode the traces of `ranks` (in that order), in worker processes when there are many."""
    paths = [sim.trace_paths[r] for r in ranks]
    workers = workers if workers is not None else min(2, os.cpu_count() or 1)
    if workers <= 1 or len(paths) < _PARALLEL_MIN_RANKS:
        return [read_rank_trace(p, sim.num_ranks) for p in paths]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        chunk = max(1, len(paths) // (workers * 8))
        return list(pool.map(read_rank_trace, paths, [sim.num_ranks] * len(paths), chunksize=chunk))


def _trace_prefix(root: Path, workload_prefix: str | None) -> Path:
    if workload_prefix is not None:  # relative without `..` (manifest.py); no symlink out either
        return rundir.inside(root, workload_prefix, "manifest.json workload_prefix")
    for folder in (root / rundir.WORKLOAD_DIR, root):
        names = {m.group(1) for p in folder.glob("*.0.et") if (m := re.fullmatch(r"(.+)\.0\.et", p.name))}
        if len(names) > 1:
            raise RunDirError(f"{folder}: several trace sets ({', '.join(sorted(names))}); keep one")
        if names:
            return folder / names.pop()
    raise RunDirError(f"{root}: no Chakra traces (expected workload/<prefix>.<rank>.et)")


def _count_ranks(root: Path, prefix: Path) -> int:
    logical = root / rundir.NS3_LOGICAL_TOPOLOGY
    if logical.is_file():
        data = rundir.read_json_object(logical, "")
        try:
            dims = [int(d) for d in data["logical-dims"]]
        except (ValueError, KeyError, TypeError, OverflowError) as exc:
            raise RunDirError(f'{logical}: expected {{"logical-dims": ["N", ...]}} ({exc})') from None
        if not dims or min(dims) < 1 or math.prod(dims) > MAX_RANKS:
            raise RunDirError(
                f"{logical}: logical-dims {dims} must be positive with a product <= {MAX_RANKS}"
            )
        return math.prod(dims)
    count = 0
    while count <= MAX_RANKS and Path(f"{prefix}.{count}.et").is_file():
        count += 1
    return count


def _trace_paths(prefix: Path, num_ranks: int) -> list[Path]:
    paths = []
    for rank in range(num_ranks):  # stop at the first gap: a corrupt rank count may be huge
        path = Path(f"{prefix}.{rank}.et")
        if path.is_symlink() and not path.resolve().is_relative_to(prefix.parent.resolve()):
            raise RunDirError(
                f"{path}: a symbolic link out of the run directory (traces are read from inside it)"
            )
        if not path.is_file():
            missing = sum(1 for r in range(rank, num_ranks) if not Path(f"{prefix}.{r}.et").is_file())
            raise RunDirError(f"{path}: trace file missing ({missing} of {num_ranks} rank files absent)")
        paths.append(path)
    return paths


def _comm_groups(path: Path, num_ranks: int) -> dict[str, tuple[int, ...]]:
    groups: dict[str, tuple[int, ...]] = {"": tuple(range(num_ranks))}
    if not path.is_file():
        return groups
    data = rundir.read_json_object(path, "")
    for name, members in data.items():
        valid = isinstance(members, list) and all(
            isinstance(r, int) and not isinstance(r, bool) and 0 <= r < num_ranks for r in members
        )
        if not valid:
            raise RunDirError(f"{path}: group {name!r} must list ranks (integers in 0..{num_ranks - 1})")
        if len(set(members)) != len(members) or not members:
            raise RunDirError(f"{path}: group {name!r} is empty or lists a rank twice")
        groups[str(name)] = tuple(sorted(members))
    return groups


def _machines(labels: list[dict[str, Any]], topology: Topology, num_ranks: int) -> list[int]:
    """Rank -> the machine NCCL sees: the GPUs of one scale-up fabric (a node, or the trays of one
    NVLink domain), from the manifest, else from the topology's switches."""
    if len(labels) == num_ranks:
        for key in ("scale_up_domain", "node"):
            if all(_is_index(entry.get(key)) for entry in labels):
                return [int(entry[key]) for entry in labels]
    return host_groups(topology, num_ranks)


def _is_index(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
