"""Turn what an ASTRA-sim binary printed into per-rank cycle counts, or a clear error.

A result exists only when every rank printed its `finished` line: ASTRA-sim exits 0 without them when
it rejects a trace node, and large runs abort at exit (status 134) after printing all of them. So the
finish lines decide, and the exit status is reported beside the result when it is not 0.
One cycle is one nanosecond.
"""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass

from astra_hetero.backends.astrasim.process import ProcessOutcome
from astra_hetero.errors import BackendFailed

_FINISHED = re.compile(r"sys\[(\d+)\] finished, (\d+) cycles, exposed communication (\d+) cycles")
_STATISTIC = re.compile(r"sys\[(\d+)\], (Wall time|Comm time|GPU time): (\d+)")

LOG_TAIL_LINES = 30


@dataclass(frozen=True)
class RankCycles:
    """One rank's figures, in cycles (= ns). `gpu` is 0 when the rank ran no compute node."""

    rank: int
    finish: int
    exposed_comm: int
    wall: int | None = None
    comm: int | None = None
    gpu: int = 0


@dataclass(frozen=True)
class ParsedRun:
    ranks: tuple[RankCycles, ...]  # ordered by rank, one per rank
    warnings: tuple[str, ...] = ()


def log_tail(text: str, num_lines: int = LOG_TAIL_LINES) -> str:
    return "\n".join(text.rstrip("\n").splitlines()[-num_lines:])


def parse_output(text: str, num_ranks: int, outcome: ProcessOutcome, binary: str = "ASTRA-sim") -> ParsedRun:
    """Per-rank cycles from `text` (stdout and stderr); BackendFailed unless all `num_ranks` finished."""
    finished = _finish_lines(text, num_ranks, binary)
    missing = [rank for rank in range(num_ranks) if rank not in finished]
    if missing:
        raise BackendFailed(_failure_message(text, num_ranks, missing, outcome, binary), log_tail(text))
    statistics = _statistics(text)
    ranks = tuple(RankCycles(rank, *finished[rank], **statistics.get(rank, {})) for rank in range(num_ranks))
    return ParsedRun(ranks, _warnings(outcome))


def _finish_lines(text: str, num_ranks: int, binary: str) -> dict[int, tuple[int, int]]:
    finished: dict[int, tuple[int, int]] = {}
    for match in _FINISHED.finditer(text):
        rank, cycles, exposed = (int(group) for group in match.groups())
        if rank >= num_ranks:
            raise BackendFailed(
                f"{binary} reported rank {rank}, but the run directory has {num_ranks} ranks", log_tail(text)
            )
        if rank in finished:
            raise BackendFailed(f"{binary} reported rank {rank} finished twice", log_tail(text))
        finished[rank] = (cycles, exposed)
    return finished


def _statistics(text: str) -> dict[int, dict[str, int]]:
    keys = {"Wall time": "wall", "Comm time": "comm", "GPU time": "gpu"}
    statistics: dict[int, dict[str, int]] = {}
    for match in _STATISTIC.finditer(text):
        statistics.setdefault(int(match.group(1)), {})[keys[match.group(2)]] = int(match.group(3))
    return statistics


def _failure_message(
    text: str, num_ranks: int, missing: list[int], outcome: ProcessOutcome, binary: str
) -> str:
    done = num_ranks - len(missing)
    progress = f"{done} of {num_ranks} ranks printed their `finished` line (missing: {_ranges(missing)})"
    if outcome.timed_out:
        return f"{binary} timed out after {outcome.wall_time_s:.1f} s and was killed; {progress}"
    if not text.strip():
        return f"{binary} printed nothing and {_ending(outcome.exit_status)}"
    if outcome.exit_status == 0:
        return (
            f"{binary} exited 0 but {progress}; ASTRA-sim does this when it rejects a trace node "
            "(e.g. a missing comm_size or comm_type): see the log"
        )
    return f"{binary} {_ending(outcome.exit_status)} before every rank finished; {progress}"


def _warnings(outcome: ProcessOutcome) -> tuple[str, ...]:
    if outcome.timed_out:
        return (
            f"killed at the timeout ({outcome.wall_time_s:.1f} s) after every rank had finished; "
            "the cycle counts are complete",
        )
    if outcome.exit_status:
        return (
            f"the binary {_ending(outcome.exit_status)} after every rank had finished; "
            "the cycle counts are complete",
        )
    return ()


def _ending(exit_status: int | None) -> str:
    if exit_status is None:
        return "ended with an unknown status"
    if exit_status < 0:
        try:
            name = signal.Signals(-exit_status).name
        except ValueError:
            name = f"signal {-exit_status}"
        return f"was killed by {name}"
    return f"exited with status {exit_status}"


def _ranges(ranks: list[int]) -> str:
    """[0, 1, 2, 5] -> '0-2, 5'."""
    spans: list[str] = []
    start = previous = ranks[0]
    for rank in [*ranks[1:], None]:
        if rank is not None and rank == previous + 1:
            previous = rank
            continue
        spans.append(str(start) if start == previous else f"{start}-{previous}")
        if rank is not None:
            start = previous = rank
    return ", ".join(spans)
