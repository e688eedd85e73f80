"""What produced a result, plan or study: astra-hetero's version and commit, the backend and the identity of
its binary (path, size, sha256) or of its Docker image (id and component labels), and the spec's hash.

Recorded as one JSON object (`result.json`'s `meta.provenance`, `search.json`'s and `provenance.json`'s
`provenance`) so that a number can be traced to the code that made it:

    {"astra_hetero": {"version": "0.1.0", "commit": "<git sha>" | null, "dirty": bool | null},
     "backend": {"name": "analytical",
                 "binary": {"path": ..., "size": ..., "sha256": ...} | null,     (native runs)
                 "docker": {"image": ..., "id": "sha256:...", "labels": {...}} | null},
     "spec_sha256": "<sha256 of the run directory's spec.yaml>" | null,
     "environment": {"python": "3.11.2", "image_components": {...}}   (inside our image: its commits)}

The commit comes from the environment variable ASTRA_HETERO_COMMIT (set in our Docker image) or, for a
git checkout, from git itself; null when neither tells.
"""

from __future__ import annotations

import functools
import os
import platform
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from astra_hetero import rundir
from astra_hetero.version import __version__

COMMIT_ENV = "ASTRA_HETERO_COMMIT"
# Set by docker/astra-sim.Dockerfile: "component=commit" pairs of the ASTRA-sim build in the image.
IMAGE_COMPONENTS_ENV = "ASTRA_SIM_COMPONENTS"
# Image labels worth recording (docker/astra-sim.Dockerfile and docker/Dockerfile set them).
LABEL_PREFIXES = ("org.astra-hetero.", "org.opencontainers.image.")
KEY = "provenance"


@functools.lru_cache(maxsize=1)
def tool_identity() -> dict[str, Any]:
    """astra-hetero's version, and its git commit (and whether the checkout has changes) when known."""
    commit = os.environ.get(COMMIT_ENV) or None
    if commit == "unknown":  # what docker/Dockerfile sets when it was built without the commit
        commit = None
    dirty: bool | None = None
    if commit is None:
        commit, dirty = _git_commit(Path(__file__).resolve().parent.parent)
    return {"version": __version__, "commit": commit, "dirty": dirty}


def _git_commit(directory: Path) -> tuple[str | None, bool | None]:
    if not (directory / ".git").exists():
        return None, None
    try:
        head = subprocess.run(
            ["git", "-C", str(directory), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
        )
        if head.returncode != 0:
            return None, None
        status = subprocess.run(
            ["git", "-C", str(directory), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None, None
    dirty = bool(status.stdout.strip()) if status.returncode == 0 else None
    return head.stdout.strip() or None, dirty


def binary_identity(path: Path | str) -> dict[str, Any]:
    """The executable's resolved path, size and sha256 (cached per path, size and modification time)."""
    resolved = Path(path).resolve()
    stat = resolved.stat()
    digest = _sha256(str(resolved), stat.st_size, stat.st_mtime_ns)
    return {"path": str(resolved), "size": stat.st_size, "sha256": digest}


@functools.lru_cache(maxsize=32)
def _sha256(path: str, size: int, mtime_ns: int) -> str:
    return rundir.file_sha256(Path(path))


def image_identity(name: str, attrs: Mapping[str, Any]) -> dict[str, Any]:
    """A Docker image as the engine describes it (`image.attrs`): the name asked for, its id, and its
    astra-hetero / OCI labels (in images docker/build.sh made, every ASTRA-sim component's commit)."""
    labels = (attrs.get("Config") or {}).get("Labels") or {}
    return {
        "image": name,
        "id": attrs.get("Id"),
        "labels": {k: v for k, v in sorted(labels.items()) if k.startswith(LABEL_PREFIXES)},
    }


def image_components(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Inside our image: the commits of the ASTRA-sim build it carries (from IMAGE_COMPONENTS_ENV)."""
    text = (os.environ if environ is None else environ).get(IMAGE_COMPONENTS_ENV, "")
    pairs = (item.split("=", 1) for item in text.split() if "=" in item)
    return {key: value for key, value in pairs}


def spec_sha256(run_dir: Path) -> str | None:
    """The sha256 of the run directory's spec.yaml (the spec as resolved), if it has one."""
    path = Path(run_dir) / rundir.SPEC
    return rundir.file_sha256(path) if path.is_file() else None


def environment() -> dict[str, Any]:
    data: dict[str, Any] = {"python": platform.python_version()}
    components = image_components()
    if components:
        data["image_components"] = components
    return data


def record(
    backend: str,
    *,
    binary: Mapping[str, Any] | None = None,
    docker: Mapping[str, Any] | None = None,
    spec_hash: str | None = None,
) -> dict[str, Any]:
    """One provenance object (the layout in this module's docstring)."""
    return {
        "astra_hetero": dict(tool_identity()),
        "backend": {
            "name": backend,
            "binary": dict(binary) if binary else None,
            "docker": dict(docker) if docker else None,
        },
        "spec_sha256": spec_hash,
        "environment": environment(),
    }


def complete(meta: Mapping[str, Any], backend: str, run_dir: Path) -> dict[str, Any]:
    """`meta` with a whole provenance record: what the backend said about itself (`meta["provenance"]`'s
    binary or docker) kept, the tool, spec hash and environment added."""
    given = meta.get(KEY) or {}
    given_backend = given.get("backend") or {}
    return {
        **meta,
        KEY: record(
            backend,
            binary=given_backend.get("binary"),
            docker=given_backend.get("docker"),
            spec_hash=spec_sha256(run_dir),
        ),
    }


def short(provenance: Mapping[str, Any] | None) -> dict[str, str]:
    """One line per fact, for reports: tool, backend, binary or image, spec."""
    if not provenance:
        return {"astra-hetero": "unknown (result written before provenance was recorded)"}
    tool = provenance.get("astra_hetero") or {}
    commit = tool.get("commit")
    lines = {
        "astra-hetero": f"{tool.get('version', '?')}"
        + (f" @ {commit[:12]}{' (modified)' if tool.get('dirty') else ''}" if commit else " (commit unknown)")
    }
    backend = provenance.get("backend") or {}
    lines["backend"] = str(backend.get("name", "?"))
    binary = backend.get("binary")
    if binary:
        digest = str(binary.get("sha256"))[:16]
        lines["binary"] = f"{binary.get('path')} ({binary.get('size')} bytes, sha256 {digest}…)"
    docker = backend.get("docker")
    if docker:
        image_id = str(docker.get("id") or "?")
        lines["image"] = f"{docker.get('image')} ({image_id[:19]})"
        commits = {
            k.removeprefix("org.astra-hetero.component."): v
            for k, v in (docker.get("labels") or {}).items()
            if k.startswith("org.astra-hetero.component.")
        }
        if commits:
            lines["components"] = ", ".join(f"{k} {v[:7]}" for k, v in commits.items())
    components = (provenance.get("environment") or {}).get("image_components")
    if components and "components" not in lines:
        lines["components"] = ", ".join(f"{k} {v[:7]}" for k, v in components.items())
    spec = provenance.get("spec_sha256")
    lines["spec sha256"] = spec if spec else "-"
    return lines


# The shape above, as reports read it back: field -> (types allowed, the shape of an object's fields).
_TEXT, _OPT_TEXT = (str,), (str, type(None))
_SHAPE: dict[str, Any] = {
    "astra_hetero": {"version": _TEXT, "commit": _OPT_TEXT, "dirty": (bool, type(None))},
    "backend": {
        "name": _TEXT,
        "binary": {"path": _TEXT, "size": (int,), "sha256": _TEXT},
        "docker": {"image": _TEXT, "id": _OPT_TEXT, "labels": "labels"},
    },
    "spec_sha256": _OPT_TEXT,
    "environment": {"image_components": "labels"},
}


def provenance_problem(provenance: Any) -> str:
    """What is wrong with a `provenance` object read back from a file (null: none recorded), or ''.
    Keys may be missing (older versions wrote fewer); those present must have the documented type."""
    return "" if provenance is None else _problem(provenance, _SHAPE, "provenance")


def _problem(value: Any, shape: Any, where: str) -> str:
    if isinstance(shape, tuple):
        ok = isinstance(value, shape) and (bool in shape or not isinstance(value, bool))  # True is an int
        return "" if ok else f"{where} must be {' or '.join(_type_name(t) for t in shape)}, not {value!r:.40}"
    if value is None and where.count(".") > 0:
        return ""  # an optional section
    if shape == "labels":  # name -> text
        ok = isinstance(value, dict) and all(isinstance(v, str) for v in value.values())
        return "" if ok else f"{where} must map names to text"
    if not isinstance(value, dict):
        return f"{where} must be an object"
    for key, inner in shape.items():
        if key in value:
            problem = _problem(value[key], inner, f"{where}.{key}")
            if problem:
                return problem
    return ""


def _type_name(kind: type) -> str:
    return {str: "text", bool: "true/false", int: "an integer", type(None): "null"}.get(kind, kind.__name__)
