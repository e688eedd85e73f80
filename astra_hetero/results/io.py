"""Reading and writing `result.json` (atomically)."""

from __future__ import annotations

import json
from pathlib import Path

from astra_hetero.errors import RunDirError
from astra_hetero.results.model import RunResult
from astra_hetero.rundir import RESULT, write_json_atomic


def write_result(run_dir: Path, result: RunResult) -> Path:
    path = Path(run_dir) / RESULT
    write_json_atomic(path, result.to_json())
    return path


def read_result(run_dir: Path) -> RunResult:
    path = Path(run_dir) / RESULT
    if not path.is_file():
        raise RunDirError(f"{path}: missing (run `astra-hetero run` on this directory first)")
    try:
        return RunResult.from_json(json.loads(path.read_text()))
    except (json.JSONDecodeError, TypeError, KeyError) as exc:
        raise RunDirError(f"{path}: not a result file ({exc})") from None
