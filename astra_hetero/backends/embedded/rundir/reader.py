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
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from astra_hetero import rundir
from astra_hetero.astrasim_inputs.system import Roofline, read_system
from astra_hetero.backends.embedded.rundir.astrasim_study import AstraSimStudy, read_study
from astra_hetero.backends.embedded.rundir.comm_inputs import CommInputs, read_comm_inputs
from astra_hetero.backends.embedded.rundir.compute_times import check_compute_times
from astra_hetero.backends.embedded.rundir.dcqcn_config import DcqcnParams, read_dcqcn_config
from astra_hetero.backends.embedded.rundir.link_model import FLUID_MODELS, apply_link_model
from astra_hetero.backends.embedded.rundir.manifest import MAX_RANKS, ManifestFields, manifest_fields
from astra_hetero.backends.embedded.rundir.topology import Topology, host_groups, read_topology
from astra_hetero.backends.embedded.trace.classes import bind_class_trace, check_class_trace
from astra_hetero.backends.embedded.trace.decode import read_rank_trace
from astra_hetero.backends.embedded.trace.records import RankTrace
from astra_hetero.backends.embedded.trace.twins import rank_values
from astra_hetero.errors import RunDirError
from astra_hetero.manifest_jobs import RunJob, read_jobs
from astra_hetero.rank_classes import RankClassMap, has_class_map, read_class_map
from astra_hetero.results.model import APPROXIMATION

_PARALLEL_MIN_RANKS = 64  # below this, starting worker processes costs more than it saves


@dataclass(frozen=True)
class DcqcnInputs:
    """The DCQCN fluid model's inputs: ns3/config.txt's parameters and the links at the rates the file
    gives them (its ECN thresholds are keyed by those); `mode` dcqcn (every switch link) or auto."""

    params: DcqcnParams
    file_topology: Topology
    mode: str
    config_path: str  # named in errors (a link rate without ECN thresholds)


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
    system_file: Path | None = None  # the ASTRA-sim system file the directory runs with, if any
    roofline: Roofline | None = None  # set when that file enables roofline: how compute nodes are timed
    astrasim: AstraSimStudy | None = None  # an imported study's own inputs (manifest `astrasim`)
    issue_by_id: bool = False  # ready nodes start lowest Chakra id first (ASTRA-sim's rule)
    jobs: tuple[RunJob, ...] = ()  # several jobs sharing the cluster (manifest `jobs`), else none
    # traces by class (workload/rank_classes.json): trace_paths then name each rank's class trace
    classes: RankClassMap | None = None
    dcqcn: DcqcnInputs | None = None  # link_model dcqcn / auto: what the DCQCN fluid model reads

    @property
    def num_ranks(self) -> int:
        return len(self.trace_paths)

    def is_idle(self, rank: int) -> bool:
        """The manifest marks `rank` idle (a GPU the plan leaves unused)."""
        return rank < len(self.labels) and self.labels[rank].get("idle") is True


def read_run_dir(root: Path, collective_model: str | None = None) -> SimInput:
    """`collective_model`: nccl or ideal instead of the manifest's (`run --collective-model`)."""
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
    if not manifest_path.is_file() and not (root / rundir.NS3_TOPOLOGY).is_file():
        raise RunDirError(
            f"{root}: a plain ASTRA-sim input set without {rundir.NS3_TOPOLOGY}; bring it in with "
            "`astra-hetero import -o RUN_DIR --workload-configuration PREFIX --system-configuration "
            "SYSTEM.json --network-configuration NETWORK.yml ...` (its own command line) and run RUN_DIR"
        )
    classes = None
    # per-rank files, where present (written for ASTRA-sim, or by hand), are what runs: the engine's
    # own classification checks them; otherwise the traces by class
    per_rank = (root / f"{rundir.WORKLOAD_PREFIX}.0.et").exists()
    if not per_rank and has_class_map(root) and fields.workload_prefix in (None, rundir.WORKLOAD_PREFIX):
        classes = read_class_map(root, fields.num_ranks)
        prefix = root / rundir.WORKLOAD_PREFIX
        num_ranks = classes.num_ranks
        class_paths = [root / t for t in classes.traces]
        paths = [class_paths[k] for k in classes.class_of]
    else:
        prefix = _trace_prefix(root, fields.workload_prefix)
        num_ranks = fields.num_ranks if fields.num_ranks is not None else _count_ranks(root, prefix)
        paths = _trace_paths(prefix, num_ranks)
    file_topology = read_topology(root / rundir.NS3_TOPOLOGY, num_ranks)
    topology, link_model = apply_link_model(file_topology, root, manifest)
    dcqcn = None
    if manifest.get("link_model") in FLUID_MODELS:
        dcqcn = DcqcnInputs(
            read_dcqcn_config(root / rundir.NS3_CONFIG),
            file_topology,
            manifest["link_model"],
            str(root / rundir.NS3_CONFIG),
        )
    if len(topology.npus) < num_ranks:
        raise RunDirError(
            f"{root / rundir.NS3_TOPOLOGY}: {len(topology.npus)} non-switch nodes for {num_ranks} ranks"
        )
    groups = _comm_groups(prefix.parent / Path(rundir.COMM_GROUPS).name, num_ranks)
    if collective_model is not None:
        manifest = {**manifest, **_model_override(manifest, collective_model, root)}
    comm = read_comm_inputs(root, manifest, fields.labels, topology, num_ranks)
    if comm.model == "nccl" and manifest.get("source") == "astrasim-import":
        line = (
            f"{APPROXIMATION}NCCL on an ASTRA-sim study: each link's kind taken from its dimension "
            "(dimension 0 of a multi-dimensional network NVLink, the others NIC; ns3/link_kinds.json)"
        )
        comm = replace(comm, warnings=(line, *comm.warnings))
    system_file = _system_file(root, fields.system_configuration)
    roofline = read_system(system_file).roofline if system_file is not None else None
    study = read_study(root, manifest, system_file)
    if comm.model == "ideal" and comm.algorithm == "astrasim" and study is not None and study.approximations:
        notes = "; ".join(study.approximations)
        line = f"{APPROXIMATION}ASTRA-sim's system layer as the embedded engine follows it: {notes}"
        comm = replace(comm, warnings=(line, *comm.warnings))
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
        system_file,
        roofline,
        study,
        fields.issue_by_id,
        read_jobs(manifest, num_ranks, manifest_path),
        classes,
        dcqcn,
    )


def read_traces(sim: SimInput, ranks: list[int], workers: int | None = None) -> list[RankTrace]:
    """Decode the traces of `ranks` (in that order), in worker processes when there are many."""
    if sim.classes is not None:
        return _class_traces(sim, sim.classes, ranks)
    paths = [sim.trace_paths[r] for r in ranks]
    workers = workers if workers is not None else min(2, os.cpu_count() or 1)
    if workers <= 1 or len(paths) < _PARALLEL_MIN_RANKS:
        traces = [read_rank_trace(p, sim.num_ranks, sim.roofline) for p in paths]
    else:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            chunk = max(1, len(paths) // (workers * 8))
            count = len(paths)
            traces = list(
                pool.map(
                    read_rank_trace, paths, [sim.num_ranks] * count, [sim.roofline] * count, chunksize=chunk
                )
            )
    for rank, trace in zip(ranks, traces, strict=True):
        check_compute_times(trace, sim.trace_paths[rank], sim.is_idle(rank), sim.system_file)
    return traces


def _class_traces(sim: SimInput, classes: RankClassMap, ranks: list[int]) -> list[RankTrace]:
    """Each class trace decoded once, bound to every rank of `ranks` in its class."""
    decoded: dict[int, tuple[RankTrace, tuple[int, ...]]] = {}
    traces = []
    for rank in ranks:
        k = classes.class_of[rank]
        if k not in decoded:
            trace = read_rank_trace(sim.trace_paths[rank], sim.num_ranks, sim.roofline)
            check_class_trace(trace, classes, k, sim.trace_paths[rank])
            check_compute_times(trace, sim.trace_paths[rank], sim.is_idle(rank), sim.system_file)
            decoded[k] = (trace, rank_values(trace)[2])
        trace, peer_pattern = decoded[k]
        if sim.is_idle(rank) != sim.is_idle(classes.reps[k]):
            check_compute_times(trace, sim.trace_paths[rank], sim.is_idle(rank), sim.system_file)
        traces.append(bind_class_trace(trace, peer_pattern, classes.groups[rank], classes.peers[rank]))
    return traces


def _model_override(manifest: dict[str, Any], model: str, root: Path) -> dict[str, Any]:
    """The manifest keys that choose `model` for this run. NCCL's model needs each link's kind and each
    rank's GPU architecture: said at once when the directory lacks them, never a silent fallback."""
    if model not in ("ideal", "nccl"):
        raise RunDirError(f"collective model must be ideal or nccl, not {model!r}")
    if model == "ideal":
        keep = manifest.get("collective_model") == "ideal"
        return {
            "collective_model": "ideal",
            "collective_algorithm": manifest.get("collective_algorithm") if keep else None,
        }
    ranks = manifest.get("ranks") or []
    if (
        not (root / rundir.NS3_LINK_KINDS).is_file()
        or not ranks
        or not all(r.get("architecture") for r in ranks)
    ):
        missing = (
            "the kind of each link (ns3/link_kinds.json)"
            if not (root / rundir.NS3_LINK_KINDS).is_file()
            else (
                "each rank's GPU architecture (an imported study gets it from an overlay's npu_groups gpu:)"
            )
        )
        raise RunDirError(f"{root}: the NCCL model needs {missing}")
    return {"collective_model": "nccl", "collective_algorithm": None, "collective_protocol": "auto"}


def _system_file(root: Path, relative: str | None) -> Path | None:
    """The ASTRA-sim system file the run directory's traces run with: the manifest's
    `system_configuration` (an imported study's own file), else `analytical/system.json` if present."""
    if relative is not None:
        path = rundir.inside(root, relative, "manifest.json system_configuration")
        if not path.is_file():
            raise RunDirError(f"{path}: missing (manifest.json system_configuration names it)")
        return path
    default = root / rundir.ANALYTICAL_SYSTEM
    return default if default.is_file() else None


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
    # "" and "0" both name every rank (ASTRA-sim's default group; its group files cannot define 0)
    groups: dict[str, tuple[int, ...]] = {"": tuple(range(num_ranks)), "0": tuple(range(num_ranks))}
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
