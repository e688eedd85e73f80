"""An ns-3 network configuration of an existing study: its `KEY value` lines, the files they name, and
the logical topology that gives ASTRA-sim its NPU dimensions.

ns-3 resolves the config's paths from the working directory it was started in, which the importer
cannot know: a relative path is looked up beside the config first, then from the current directory,
and the one found is recorded. In the run directory the config names the copies (`ns3/topology.txt`,
`ns3/flow.txt`, `ns3/trace.txt`) and writes its outputs under `ns3/`; every other line is kept.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

from astra_hetero import rundir
from astra_hetero.errors import RunDirError

INPUT_KEYS = {
    "TOPOLOGY_FILE": rundir.NS3_TOPOLOGY,
    "FLOW_FILE": "ns3/flow.txt",
    "TRACE_FILE": "ns3/trace.txt",
}
OUTPUT_KEYS = {
    "TRACE_OUTPUT_FILE": "ns3/mix.tr",
    "FCT_OUTPUT_FILE": "ns3/fct.txt",
    "PFC_OUTPUT_FILE": "ns3/pfc.txt",
    "QLEN_MON_FILE": "ns3/qlen.txt",
}


@dataclass(frozen=True)
class Ns3Network:
    config: Path
    text: str
    inputs: dict[str, Path]  # key -> the file found
    dims: tuple[int, ...]  # logical-dims
    logical_topology: Path
    num_npus_in_topology: int

    def relocated(self) -> str:
        """The config naming the run directory's copies and output paths, every other line as given."""
        lines = []
        for line in self.text.splitlines():
            parts = line.split()
            if parts and parts[0] in INPUT_KEYS:
                line = f"{parts[0]} {INPUT_KEYS[parts[0]]}"
            elif parts and parts[0] in OUTPUT_KEYS:
                line = f"{parts[0]} {OUTPUT_KEYS[parts[0]]}"
            lines.append(line)
        return "\n".join(lines) + "\n"


def read_ns3_network(config: Path, logical_topology: Path) -> Ns3Network:
    try:
        text = Path(config).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise RunDirError(f"{config}: cannot be read ({exc})") from None
    values = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2:
            values[parts[0]] = parts[1]
    inputs = {}
    for key in INPUT_KEYS:
        if key not in values:
            raise RunDirError(f"{config}: {key} is missing (ns-3 needs it)")
        inputs[key] = _locate(values[key], config, key)
    dims = _logical_dims(logical_topology)
    npus = _topology_npus(inputs["TOPOLOGY_FILE"])
    if npus < math.prod(dims):
        raise RunDirError(
            f"{inputs['TOPOLOGY_FILE']}: {npus} non-switch nodes for the {math.prod(dims)} NPUs of "
            f"{logical_topology}"
        )
    return Ns3Network(Path(config), text, inputs, dims, Path(logical_topology), npus)


def _locate(value: str, config: Path, key: str) -> Path:
    path = Path(value)
    candidates = [path] if path.is_absolute() else [Path(config).parent / path, path]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise RunDirError(
        f"{config}: {key} {value} not found (looked for {', '.join(str(c) for c in candidates)}); ns-3 "
        "resolves it from the directory it runs in"
    )


def _logical_dims(path: Path) -> tuple[int, ...]:
    data = rundir.read_json_object(Path(path), "")
    dims = data.get("logical-dims")
    try:
        parsed = tuple(int(d) for d in dims)  # type: ignore[union-attr]
    except (TypeError, ValueError):
        raise RunDirError(f'{path}: expected {{"logical-dims": ["N", ...]}}') from None
    if not parsed or min(parsed) < 1:
        raise RunDirError(f"{path}: logical-dims must be positive integers, not {dims!r}")
    return parsed


def _topology_npus(path: Path) -> int:
    try:
        header = Path(path).read_text().split("\n", 1)[0]
    except (OSError, UnicodeDecodeError) as exc:
        raise RunDirError(f"{path}: cannot be read ({exc})") from None
    fields = header.split()
    if len(fields) < 3 or not all(re.fullmatch(r"[0-9]+", f) for f in fields[:3]):
        raise RunDirError(f"{path}: first line must be `total_nodes switch_count link_count`")
    return int(fields[0]) - int(fields[1])


def logical_topology_text(dims: tuple[int, ...]) -> str:
    return json.dumps({"logical-dims": [str(d) for d in dims]}, indent=4) + "\n"
