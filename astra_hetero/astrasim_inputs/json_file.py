"""Reading one of ASTRA-sim's JSON input files (system, remote memory) with errors that name the file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from astra_hetero.errors import RunDirError


def read_json_object(path: Path, what: str, shape: str) -> dict[str, Any]:
    """The JSON object in `path`; RunDirError naming the file and what is wrong with it. `what` names
    the kind of file ("system file"), `shape` what its object holds, for a file that is not one."""
    try:
        data = json.loads(Path(path).read_bytes())
    except FileNotFoundError:
        raise RunDirError(f"{path}: {what} missing") from None
    except OSError as exc:
        raise RunDirError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    except json.JSONDecodeError as exc:  # the position, not the decoder's message: that may quote the file
        raise RunDirError(f"{path}: not a JSON {what} (line {exc.lineno}, column {exc.colno})") from None
    except ValueError:  # bytes that are not UTF-8 text
        raise RunDirError(f"{path}: not a JSON {what} (not UTF-8 text)") from None
    if not isinstance(data, dict):
        raise RunDirError(f"{path}: a {what} is a JSON object ({shape})")
    return data
