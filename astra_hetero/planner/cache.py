"""Simulated plans stored by content: the hash of the complete effective spec (presets resolved,
calibration table included) and of the code that simulates it. A rerun of the same search finds
every plan here; any change to the spec or to the package's code gives new keys.
"""

from __future__ import annotations

import hashlib
import json
import os
from functools import cache
from pathlib import Path
from typing import Any

from astra_hetero.planner.evaluation import Evaluation
from astra_hetero.rundir import write_json_atomic
from astra_hetero.spec.schema import Spec

CACHE_FORMAT = "astra-hetero/plan-cache@1"
_PACKAGE = Path(__file__).resolve().parents[1]


def default_cache_dir() -> Path:
    """$ASTRA_HETERO_CACHE, else $XDG_CACHE_HOME/astra-hetero/plans, else ~/.cache/astra-hetero/plans."""
    explicit = os.environ.get("ASTRA_HETERO_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "astra-hetero" / "plans"


@cache
def code_version() -> str:
    """Hash of every source and data file of the package (what the simulation's outcome depends on)."""
    digest = hashlib.sha256()
    for path in sorted(_PACKAGE.rglob("*")):
        if path.suffix in (".py", ".yaml", ".j2") and "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(_PACKAGE)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def plan_key(spec: Spec, backend: str = "embedded") -> str:
    return content_key(spec.model_dump(mode="json"), spec.calibration, backend)


def content_key(content: dict[str, Any], calibration: str | None, backend: str) -> str:
    """The key of a spec's plain data (any spec kind: a shared cluster's too) simulated by `backend`."""
    content = {k: v for k, v in content.items() if k != "name"}  # the name changes nothing simulated
    digest = hashlib.sha256()
    digest.update(json.dumps(content, sort_keys=True).encode())
    if calibration:
        try:
            digest.update(Path(calibration).read_bytes())
        except OSError:  # the simulation will say what is wrong; its failure is keyed as such
            digest.update(b"unreadable calibration table")
    digest.update(backend.encode())
    digest.update(code_version().encode())
    return digest.hexdigest()


class PlanCache:
    """One JSON file per simulated plan under `root`; `root=None` disables caching."""

    def __init__(self, root: Path | None) -> None:
        self.root = Path(root) if root is not None else None
        self.hits = 0

    def _path(self, key: str) -> Path:
        assert self.root is not None
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> Evaluation | None:
        if self.root is None:
            return None
        path = self._path(key)
        if not path.is_file():
            return None
        try:
            data = json.loads(path.read_text())
            if data.get("format") != CACHE_FORMAT:
                return None
            found = Evaluation.from_json(data["evaluation"])
        except (OSError, ValueError, KeyError, TypeError):
            return None  # a damaged entry is simulated again and rewritten
        self.hits += 1
        return found.as_cached()

    def put(self, key: str, evaluation: Evaluation) -> None:
        if self.root is None or not evaluation.deterministic:
            return
        write_json_atomic(self._path(key), {"format": CACHE_FORMAT, "evaluation": evaluation.to_json()})
