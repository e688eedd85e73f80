"""Reading and writing `result.json` (atomically)."""

from __future__ import annotations

import json
from pathlib import Path

from astra_hetero.errors import RunDirError
from astra_hetero.results.model import RunResult
from astra_hetero.rundir import RESULT, write_text_atomic


def write_result(run_dir: Path, result: RunResult) -> Path:
    path = Path(run_dir) / RESULT
    write_text_atomic(path, result_text(result))
    return path


def result_text(result: RunResult) -> str:
    """result.json's text: the header indented, each rank and collective on a line of its own.

    Large runs carry a million collective records; indenting every field goes through json's pure
    Python encoder at a fraction of the speed of its C encoder, which one line per record keeps."""
    data = result.to_json()
    records = {key: data.pop(key) for key in ("ranks", "collectives")}
    head = json.dumps(data, indent=2)  # an object: ends with "\n}"
    encode = json.JSONEncoder().encode
    lists = [
        f'  "{key}": [' + ",".join("\n    " + encode(item) for item in items) + ("\n  ]" if items else "]")
        for key, items in records.items()
    ]
    return head[:-2] + ",\n" + ",\n".join(lists) + "\n}\n"


def read_result(run_dir: Path) -> RunResult:
    path = Path(run_dir) / RESULT
    if not path.is_file():
        raise RunDirError(f"{path}: missing (run `astra-hetero run` on this directory first)")
    try:
        return RunResult.from_json(json.loads(path.read_text()))
    except (json.JSONDecodeError, TypeError, KeyError) as exc:
        raise RunDirError(f"{path}: not a result file ({exc})") from None
