"""Run-directory layout and atomic publication.

A run directory is what every backend executes. Its paths are a contract with other tools:

    spec.yaml                       the validated spec, as resolved
    manifest.json                   per-rank placement (node, GPU, stage, replica, TP index, work)
    workload/workload.<rank>.et     Chakra execution traces, one per rank
    workload/comm_groups.json       ASTRA-sim comm groups ({"<id>": [ranks]})
    ns3/topology.txt, ns3/config.txt, ns3/logical_topology.json, ns3/flow.txt, ns3/trace.txt
    ns3/link_kinds.json             the kind of every topology.txt link (nvlink, pcie, xgmi, nic, uplink)
    nccl_tests/                     copies of the spec's measured nccl-tests tables (manifest lists them)
    analytical/network.yml, analytical/system.json           multi-dimensional (congestion-unaware)
    analytical/network_1d.yml, analytical/system_1d.json     one dimension (congestion-aware)
    analytical/approximations.json  per network file, what ASTRA-sim was told only as a bottleneck
    analytical/remote_memory.json
    dynamics.json                   timed events resolved to ranks and topology.txt link lines; iterations
    calibration.csv                 a copy of the spec's calibration table, if it has one
    result.json, trace.json, logs/  written by `run`
    .astra-hetero.json              marks the directory as ours: its parts and their inputs (outputs.py)

Writers never leave a half-written directory that looks complete: a whole new state of the directory
is built beside it and published in one step (`outputs.publish_output`). Readers stay inside it:
`inside` refuses paths (a manifest's `workload_prefix`, a symlinked `workload/`) that lead out.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from astra_hetero.errors import RunDirError, SpecError

MANIFEST = "manifest.json"
SPEC = "spec.yaml"
WORKLOAD_DIR = "workload"
WORKLOAD_PREFIX = "workload/workload"
COMM_GROUPS = "workload/comm_groups.json"
NS3_DIR = "ns3"
NS3_TOPOLOGY = "ns3/topology.txt"
NS3_CONFIG = "ns3/config.txt"
NS3_LOGICAL_TOPOLOGY = "ns3/logical_topology.json"
NS3_LINK_KINDS = "ns3/link_kinds.json"
NCCL_TESTS_DIR = "nccl_tests"
ANALYTICAL_DIR = "analytical"
ANALYTICAL_NETWORK = "analytical/network.yml"
ANALYTICAL_SYSTEM = "analytical/system.json"
ANALYTICAL_NETWORK_1D = "analytical/network_1d.yml"
ANALYTICAL_SYSTEM_1D = "analytical/system_1d.json"
APPROXIMATIONS = "analytical/approximations.json"
REMOTE_MEMORY = "analytical/remote_memory.json"
NS3_RUN_OUTPUTS = ("ns3/mix.tr", "ns3/fct.txt", "ns3/pfc.txt", "ns3/qlen.txt")  # written by ns-3 as it runs
DYNAMICS = "dynamics.json"  # the spec's dynamics resolved to ranks and topology links, and iterations
RESULT = "result.json"
TIMELINE = "trace.json"
LOGS_DIR = "logs"
CALIBRATION = "calibration.csv"  # a copy of the spec's calibration table; spec.yaml names it relatively
TOPOLOGY_PNG = "topology.png"  # `topology --draw`; topology.svg / topology.pdf in those formats
TOPOLOGY_FIGURES = ("topology.png", "topology.svg", "topology.pdf")
REPORT_DIR = "report"


@dataclass(frozen=True)
class RunDir:
    """Paths inside one run directory; construction touches no disk."""

    root: Path

    def path(self, relative: str) -> Path:
        return self.root / relative

    def trace_path(self, rank: int) -> Path:
        return self.root / f"{WORKLOAD_PREFIX}.{rank}.et"

    @property
    def manifest_path(self) -> Path:
        return self.root / MANIFEST

    def read_manifest(self) -> dict[str, Any]:
        return read_json_object(self.manifest_path, "run `astra-hetero generate` first")


# Within `shared_reads()`: (device, inode, size, mtime) of a file -> the object parsed from it. A
# context variable, not a module global: each thread or task sees only the block it runs in.
_SHARED: ContextVar[dict[tuple[int, int, int, int], dict[str, Any]] | None] = ContextVar(
    "astra_hetero_shared_reads", default=None
)


@contextmanager
def shared_reads() -> Iterator[None]:
    """Within this block each manifest.json is parsed once while it is unchanged (the same
    inode, size and modification time; a rename, as publishing a run directory does, keeps all
    three): at 131,072 GPUs manifest.json is 44 MB and its readers (the engine, the result's
    throughput, the summary) would parse it again each. Callers inside must not change what they
    are given; code that edits a manifest (the importer) runs outside such a block."""
    token = _SHARED.set(_SHARED.get() if _SHARED.get() is not None else {})
    try:
        yield
    finally:
        _SHARED.reset(token)


def read_json_object(path: Path, if_missing: str) -> dict[str, Any]:
    """A run-directory JSON file that must hold an object; RunDirError naming the file otherwise."""
    if not path.is_file():
        raise RunDirError(f"{path}: missing ({if_missing})")
    shared = _SHARED.get()
    if shared is None or path.name != MANIFEST:
        return _parse_json_object(path)
    try:
        stat = path.stat()
    except OSError:
        return _parse_json_object(path)
    key = (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)
    data = shared.get(key)
    if data is None:
        data = shared[key] = _parse_json_object(path)
    return data


def _parse_json_object(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_bytes())
    except OSError as exc:
        raise RunDirError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    except ValueError as exc:  # JSONDecodeError, or UnicodeDecodeError for binary content
        reason = str(exc) if isinstance(exc, json.JSONDecodeError) else "not UTF-8 text"
        raise RunDirError(f"{path}: not valid JSON ({reason})") from None
    except RecursionError:
        raise RunDirError(f"{path}: nested too deeply") from None
    if not isinstance(data, dict):
        raise RunDirError(f"{path}: expected a JSON object")
    return data


def file_sha256(path: Path) -> str:
    """The hex SHA-256 of a file's bytes, read a MiB at a time."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_text_atomic(path: Path, text: str) -> None:
    """Write to a temporary file beside `path`, then rename over it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp creates 0600; give the file ordinary permissions
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def write_spec(root: Path, data: dict[str, Any]) -> None:
    """spec.yaml from a validated spec's data; its calibration table is copied in and named relatively,
    so the run directory can move (spec.yaml reads back from inside the directory)."""
    data = dict(data)
    if data.get("calibration"):
        source = Path(data["calibration"])
        try:
            shutil.copyfile(source, root / CALIBRATION)
        except OSError as exc:
            raise SpecError("calibration", f"{source}: cannot be copied ({exc.strerror or exc})") from None
        data["calibration"] = CALIBRATION
    (root / SPEC).write_text(yaml.safe_dump(data, sort_keys=False))


def topology_figure(fmt: str) -> str:
    """The cluster drawing's file name in a figure format (png, svg, pdf)."""
    name = f"topology.{fmt}"
    if name not in TOPOLOGY_FIGURES:
        raise ValueError(f"no cluster drawing as {fmt!r}; formats: png, svg, pdf")
    return name


def write_json_atomic(path: Path, data: Any) -> None:
    write_text_atomic(path, json.dumps(data, indent=2, sort_keys=False) + "\n")


NAME_MAX = 255  # bytes in one file name: ext4, XFS, APFS and NTFS alike


def inside(root: Path, relative: str | Path, what: str) -> Path:
    """`root / relative`, refused (RunDirError) if it leads outside `root` by `..` or a symlink, or
    names what no file system holds (asking about it would be an OSError, not an answer)."""
    if any(len(part.encode(errors="surrogateescape")) > NAME_MAX for part in Path(relative).parts):
        raise RunDirError(f"{root}: {what} has a name longer than {NAME_MAX} bytes, which no file can have")
    path = Path(root) / relative
    try:
        real_root = Path(root).resolve(strict=True)
        real = path.resolve()
    except (OSError, RuntimeError):
        raise RunDirError(f"{path}: {what} cannot be resolved (a symlink loop?)") from None
    if real != real_root and real_root not in real.parents:
        raise RunDirError(f"{path}: {what} leads outside the run directory ({real}); refusing to read it")
    return path


def check_inputs_inside(root: Path) -> None:
    """Every input file of the run directory is inside it (no symlink leading out, e.g. `workload/`)."""
    root = Path(root)
    for relative in (MANIFEST, SPEC, WORKLOAD_DIR, NS3_DIR, ANALYTICAL_DIR):
        if not os.path.lexists(root / relative):
            continue
        inside(root, relative, relative)
        if (root / relative).is_dir():
            with os.scandir(root / relative) as entries:
                for entry in entries:
                    if entry.is_symlink():
                        inside(root, f"{relative}/{entry.name}", f"{relative}/{entry.name}")


def open_output(root: Path, relative: str) -> Any:
    """Open `root/relative` for binary writing without following any symlink on the way (a log must
    never overwrite a file outside the run directory)."""
    path = Path(root)
    parts = Path(relative).parts
    for part in parts[:-1]:
        path = path / part
        if path.is_symlink():
            raise RunDirError(f"{path}: a symlink; outputs are written only inside the run directory")
        path.mkdir(exist_ok=True)
    path = path / parts[-1]
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags, 0o666)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise RunDirError(f"{path}: cannot write ({reason}); a symlink there is refused") from None
    return os.fdopen(fd, "wb")


def check_dynamics_kept(root: Path) -> None:
    """RunDirError if the run directory's manifest or spec records dynamics (events, or more than one
    iteration) but dynamics.json is gone: without it every backend would simulate one static iteration
    and report it as the answer."""
    root = Path(root)
    if (root / DYNAMICS).is_file():
        return
    for source, events, iterations in _recorded_dynamics(root):
        if events or iterations > 1:
            raise RunDirError(
                f"{root / DYNAMICS}: missing, but {source} records {events} dynamics event(s) and "
                f"{iterations} iterations; build the run directory again (`astra-hetero build`)"
            )


def _recorded_dynamics(root: Path) -> list[tuple[str, int, int]]:
    """(file, number of events, iterations) as manifest.json and spec.yaml record them, where they do."""
    found = []
    if (root / MANIFEST).is_file():
        recorded = read_json_object(root / MANIFEST, "").get("dynamics")
        if recorded is not None:
            events = recorded.get("events") if isinstance(recorded, dict) else None
            iterations = recorded.get("iterations") if isinstance(recorded, dict) else None
            if not all(isinstance(v, int) and not isinstance(v, bool) for v in (events, iterations)):
                raise RunDirError(
                    f"{root / MANIFEST}: dynamics must be {{events: <count>, iterations: <count>}}, "
                    f"not {recorded!r}"[:300]
                )
            found.append((MANIFEST, events, iterations))
    spec = _spec_mapping(root / SPEC)
    if spec is not None:
        events = spec.get("dynamics") or []
        iterations = spec.get("iterations", 1)
        found.append((SPEC, len(events) if isinstance(events, list) else 1, iterations))
    return found


def _spec_mapping(path: Path) -> dict[str, Any] | None:
    """The run directory's spec.yaml as a plain mapping (its top-level keys are all this needs; the
    spec schema is not imported to run a directory), or None where there is none."""
    if not path.is_file():
        return None
    try:
        data = yaml.safe_load(path.read_bytes())
    except OSError as exc:
        raise RunDirError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    except (yaml.YAMLError, RecursionError):
        raise RunDirError(f"{path}: not valid YAML") from None
    if not isinstance(data, dict):
        raise RunDirError(f"{path}: expected a mapping (the spec the directory was built from)")
    iterations = data.get("iterations", 1)
    if not isinstance(iterations, int) or isinstance(iterations, bool):
        raise RunDirError(f"{path}: iterations must be an integer, not {iterations!r}"[:300])
    return data
