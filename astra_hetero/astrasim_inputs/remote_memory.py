"""ASTRA-sim's remote-memory file (`--remote-memory-configuration`), checked as its analytical
remote-memory backend reads it (astra-memory-analytical `AnalyticalRemoteMemory.cc`): a JSON object
whose `memory-type` is one of four names and whose numbers are numbers. The importer copies the file
verbatim; this check makes a file ASTRA-sim would exit on an error naming the file, before anything
is written.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from astra_hetero.astrasim_inputs.json_file import read_json_object
from astra_hetero.errors import RunDirError

# AnalyticalRemoteMemory.cc accepts these and exits with "Unsupported memory type" on anything else.
MEMORY_TYPES = ("NO_MEMORY_EXPANSION", "PER_NODE_MEMORY_EXPANSION", "PER_NPU_MEMORY_EXPANSION", "MEMORY_POOL")
NUMBERS = ("num-nodes", "num-npus-per-node", "remote-mem-latency", "remote-mem-bw")


def check_remote_memory(path: Path) -> dict[str, Any]:
    """The file's settings; RunDirError naming the file and the key when ASTRA-sim could not use it."""
    data = read_json_object(path, "remote-memory file", "memory-type, ...")
    kind = data.get("memory-type", MEMORY_TYPES[0])
    if kind not in MEMORY_TYPES:
        raise RunDirError(f"{path}: memory-type must be one of {', '.join(MEMORY_TYPES)}, not {kind!r}")
    for key in NUMBERS:
        value = data.get(key, 0)
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if not number or not math.isfinite(value) or value < 0:
            raise RunDirError(f"{path}: {key} must be a number >= 0, not {value!r}")
    return data
