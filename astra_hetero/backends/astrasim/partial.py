"""What an ASTRA-sim run stopped at its budget (`timeout_s`) had done, and how far a running one is.

ns-3 runs of a study take minutes to hours; one that outruns its budget is killed, but what it did is
kept: the ranks that printed their `finished` line (with their cycles), and for ns-3 the flows its
`ns3/fct.txt` lists as complete and the simulated time the last of them reached. `PartialRun` is
that record; the backend raises `BackendTimedOut` carrying it, and a sweep or study writes it beside
the point's run directory (`<point>.partial.json`: the run directory itself is published only
whole, with a result). `progress_line` reads the same files while the binary runs.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from astra_hetero.backends.astrasim.ns3_outputs import FCT_FILE
from astra_hetero.errors import BackendFailed

PARTIAL_SUFFIX = ".partial.json"  # beside the point's run directory: `points/<point>.partial.json`
_FINISHED = re.compile(r"sys\[(\d+)\] finished, (\d+) cycles")  # as `parse` reads it


@dataclass(frozen=True)
class PartialRun:
    """A run killed at its budget: `ranks_finished` of `num_ranks` printed their finish (their
    cycles in `finish_cycles`, rank -> cycles); ns-3's completed flows, their bytes, and the
    simulated time (µs) the last completed flow reached (0 without ns-3 output)."""

    backend: str
    budget_s: float
    wall_time_s: float
    num_ranks: int
    ranks_finished: int
    finish_cycles: dict[int, int]
    flows_completed: int
    bytes_completed: int
    simulated_us: float
    log_tail: str

    def as_json(self) -> dict[str, Any]:
        return {"format": "astra-hetero/partial-run@1", **asdict(self)}


class BackendTimedOut(BackendFailed):
    """The binary outran its budget and was stopped; `partial` is what it had done."""

    def __init__(self, message: str, partial: PartialRun) -> None:
        self.partial = partial
        super().__init__(message, partial.log_tail)


def partial_path(run_dir: Path) -> Path:
    return Path(str(run_dir) + PARTIAL_SUFFIX)


def read_partial(run_dir: Path) -> dict[str, Any] | None:
    """The partial record of the point at `run_dir`, if its last run was stopped at its budget."""
    import json

    path = partial_path(run_dir)
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def finished_ranks(text: str) -> dict[int, int]:
    return {int(m.group(1)): int(m.group(2)) for m in _FINISHED.finditer(text)}


def ns3_progress(run_dir: Path) -> tuple[int, int, float]:
    """(flows completed, their bytes, simulated µs reached) from ns-3's flow file so far; a line
    being written is skipped."""
    path = Path(run_dir) / FCT_FILE
    if not path.is_file():
        return 0, 0, 0.0
    flows = size = 0
    reached = 0
    for line in path.read_text(errors="replace").splitlines():
        fields = line.split()
        try:
            bytes_, start, fct = int(fields[4]), int(fields[5]), int(fields[6])
        except (IndexError, ValueError):
            continue
        flows, size, reached = flows + 1, size + bytes_, max(reached, start + fct)
    return flows, size, reached / 1000


def partial_run(
    backend: str, run_dir: Path, text: str, num_ranks: int, budget_s: float, wall_time_s: float, tail: str
) -> PartialRun:
    finish = finished_ranks(text)
    flows, size, reached = ns3_progress(run_dir)
    return PartialRun(
        backend, budget_s, wall_time_s, num_ranks, len(finish), finish, flows, size, reached, tail
    )


def progress_line(run_dir: Path, log_path: Path, num_ranks: int, elapsed_s: float) -> str:
    """One line on a running binary: ranks finished, and for ns-3 flows done and simulated time."""
    try:
        text = log_path.read_text(errors="replace")
    except OSError:
        text = ""
    line = f"{Path(run_dir).name}: {elapsed_s:.0f} s, {len(finished_ranks(text))}/{num_ranks} ranks finished"
    flows, _, reached = ns3_progress(run_dir)
    if flows:
        line += f", {flows} flows done, {reached / 1000:.3f} ms simulated"
    return line
