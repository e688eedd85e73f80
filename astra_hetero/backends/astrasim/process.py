"""Run one native command with a timeout, its output streamed into a log file.

The process gets its own session so that a timeout (or Ctrl-C) can end it together with anything it
started; nothing is left running behind a failed run.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from astra_hetero.backends.astrasim.command import Command
from astra_hetero.errors import BackendUnavailable
from astra_hetero.rundir import open_output

logger = logging.getLogger(__name__)

# After SIGTERM, how long a timed-out simulator may take to exit before it gets SIGKILL.
TERMINATE_GRACE_S = 5.0


@dataclass(frozen=True)
class ProcessOutcome:
    """How a run ended. `exit_status` is negative when a signal ended it (subprocess convention)."""

    exit_status: int | None
    timed_out: bool
    wall_time_s: float


def log_header(command: Command) -> str:
    """The first line of every log: what ran where (the parser ignores it)."""
    return f"# astra-hetero: cwd={command.cwd} argv={list(command.argv)}\n"


def open_log(log_path: Path) -> BinaryIO:
    """The log file, opened without following a symlink anywhere under the run directory
    (`logs/` or the log itself pointing elsewhere must not make us overwrite a file outside)."""
    return open_output(log_path.parents[1], f"{log_path.parent.name}/{log_path.name}")


# How often a long run says how far it is (`progress`), in seconds.
PROGRESS_EVERY_S = 60.0


def run_native(
    command: Command,
    log_path: Path,
    timeout_s: float | None,
    progress: Callable[[float], None] | None = None,
) -> ProcessOutcome:
    """`progress(elapsed_s)` is called every PROGRESS_EVERY_S while the binary runs."""
    Path(command.cwd).mkdir(parents=True, exist_ok=True)
    logger.info("running %s in %s (log: %s)", " ".join(command.argv), command.cwd, log_path)
    started = time.monotonic()
    with open_log(log_path) as log:
        log.write(log_header(command).encode())
        log.flush()
        try:
            process = subprocess.Popen(
                list(command.argv),
                cwd=command.cwd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as exc:
            raise BackendUnavailable(f"cannot start {command.argv[0]}: {exc.strerror or exc}") from None
        timed_out = False
        try:
            _wait(process, started, timeout_s, progress)
        except subprocess.TimeoutExpired:
            timed_out = True
            _end_group(process)
        finally:
            if process.poll() is None:  # interrupted (e.g. KeyboardInterrupt): leave nothing running
                _end_group(process)
    outcome = ProcessOutcome(process.returncode, timed_out, time.monotonic() - started)
    logger.info(
        "%s ended with status %s after %.1f s%s",
        Path(command.argv[0]).name,
        outcome.exit_status,
        outcome.wall_time_s,
        " (timed out)" if timed_out else "",
    )
    return outcome


def _wait(
    process: subprocess.Popen,
    started: float,
    timeout_s: float | None,
    progress: Callable[[float], None] | None,
) -> None:
    """Wait for the process until `timeout_s` (TimeoutExpired), reporting progress on the way."""
    while True:
        elapsed = time.monotonic() - started
        left = None if timeout_s is None else timeout_s - elapsed
        if left is not None and left <= 0:
            raise subprocess.TimeoutExpired(process.args, timeout_s or 0)
        step = PROGRESS_EVERY_S if progress is not None else left
        try:
            process.wait(timeout=step if left is None or step is None else min(step, left))
            return
        except subprocess.TimeoutExpired:
            if progress is not None:
                progress(time.monotonic() - started)


def _end_group(process: subprocess.Popen) -> None:
    """SIGTERM the whole process group, give it a grace period, then SIGKILL whatever is left."""
    _signal_group(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=TERMINATE_GRACE_S)
    except subprocess.TimeoutExpired:
        pass
    _signal_group(process.pid, signal.SIGKILL)  # children may outlive the leader
    process.wait()


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass  # the group is already gone
