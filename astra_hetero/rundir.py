"""Run-directory layout and atomic publication.

A run directory is what every backend executes. Its paths are a contract with other tools:

    spec.yaml                       the validated spec, as resolved
    manifest.json                   per-rank placement (node, GPU, stage, replica, TP index, work)
    workload/workload.<rank>.et     Chakra execution traces, one per rank
    workload/comm_groups.json       ASTRA-sim comm groups ({"<id>": [ranks]})
    ns3/topology.txt, ns3/config.txt, ns3/logical_topology.json, ns3/flow.txt, ns3/trace.txt
    analytical/network.yml, analytical/system.json           multi-dimensional (congestion-unaware)
    analytical/network_1d.yml, analytical/system_1d.json     one dimension (congestion-aware)
    analytical/remote_memory.json
    result.json, trace.json, logs/  written by `run`

Writers never leave a half-written directory that looks complete: they build their part in a
staging directory beside the target and move it in only when whole (`publish`).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MANIFEST = "manifest.json"
SPEC = "spec.yaml"
WORKLOAD_DIR = "workload"
WORKLOAD_PREFIX = "workload/workload"
COMM_GROUPS = "workload/comm_groups.json"
NS3_DIR = "ns3"
NS3_TOPOLOGY = "ns3/topology.txt"
NS3_CONFIG = "ns3/config.txt"
NS3_LOGICAL_TOPOLOGY = "ns3/logical_topology.json"
ANALYTICAL_DIR = "analytical"
ANALYTICAL_NETWORK = "analytical/network.yml"
ANALYTICAL_SYSTEM = "analytical/system.json"
ANALYTICAL_NETWORK_1D = "analytical/network_1d.yml"
ANALYTICAL_SYSTEM_1D = "analytical/system_1d.json"
REMOTE_MEMORY = "analytical/remote_memory.json"
RESULT = "result.json"
TIMELINE = "trace.json"
LOGS_DIR = "logs"


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


def read_json_object(path: Path, if_missing: str) -> dict[str, Any]:
    """A run-directory JSON file that must hold an object; RunDirError naming the file otherwise."""
    from astra_hetero.errors import RunDirError

    if not path.is_file():
        raise RunDirError(f"{path}: missing ({if_missing})")
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


def write_json_atomic(path: Path, data: Any) -> None:
    write_text_atomic(path, json.dumps(data, indent=2, sort_keys=False) + "\n")


@contextmanager
def publish(root: Path) -> Iterator[Path]:
    """Yield an empty staging directory; on success move each of its entries into `root`.

    Entries replace same-named ones in `root` (a directory is swapped whole). On any exception the
    staging directory is removed and `root` is left exactly as it was.
    """
    root = Path(root)
    root.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{root.name}.staging-", dir=root.parent))
    try:
        yield staging
        root.mkdir(exist_ok=True)
        for entry in sorted(staging.iterdir()):
            _swap_into(entry, root / entry.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _swap_into(source: Path, target: Path) -> None:
    if target.is_dir() and not target.is_symlink():
        retired = target.with_name(f".{target.name}.old-{os.getpid()}")
        os.replace(target, retired)
        os.replace(source, target)
        shutil.rmtree(retired, ignore_errors=True)
    else:
        os.replace(source, target)
