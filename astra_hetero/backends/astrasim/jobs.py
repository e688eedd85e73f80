"""Several jobs in one run directory on the ASTRA-sim backends.

ASTRA-sim needs nothing new to run them together: to it they are ranks with disjoint comm groups. It
starts every rank at 0 and runs each trace once, so a job that starts later or runs several
iterations is refused (`refuse_schedule`). Each job's time alone comes from one more run of the
binary on a scratch copy of the directory where every other job's ranks hold the idle trace.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from astra_hetero import rundir
from astra_hetero.errors import RunDirError
from astra_hetero.manifest_jobs import RunJob
from astra_hetero.results.jobs import finish_us
from astra_hetero.results.model import RunResult
from astra_hetero.workload.encode import idle_trace

_OUTPUTS = (rundir.RESULT, rundir.TIMELINE, rundir.LOGS_DIR, "report")


def refuse_schedule(jobs: Sequence[RunJob], backend: str) -> None:
    for i, job in enumerate(jobs):
        if job.start_ns:
            raise RunDirError(
                f"jobs[{i}] ({job.name!r}) starts at {job.start_ns / 1e6:g} ms: the {backend} backend starts "
                "every rank at 0; run it on the embedded backend"
            )
        if job.iterations != 1:
            raise RunDirError(
                f"jobs[{i}] ({job.name!r}) runs {job.iterations} iterations: the {backend} backend simulates "
                "one iteration of the traces; run several on the embedded backend"
            )


def solo_times(
    run_dir: Path, jobs: Sequence[RunJob], simulate: Callable[[Path], RunResult], log_name: str
) -> list[float]:
    """Each job's time alone: the binary on a copy of `run_dir` with the other jobs' ranks idle. The
    runs' logs are kept beside the run's own as `<log>.solo-<job index>.log`."""
    idle = idle_trace()
    out = []
    for j, job in enumerate(jobs):
        with tempfile.TemporaryDirectory(prefix="astra-hetero-solo-") as scratch:
            copy = Path(scratch) / "run"
            shutil.copytree(run_dir, copy, symlinks=True, ignore=shutil.ignore_patterns(*_OUTPUTS))
            layout = rundir.RunDir(copy)
            for other in jobs:
                if other is not job:
                    for rank in other.ranks:
                        layout.trace_path(rank).write_bytes(idle)
            result = simulate(copy)
            log = copy / log_name
            if log.is_file():
                (run_dir / rundir.LOGS_DIR).mkdir(exist_ok=True)
                shutil.copyfile(log, run_dir / f"{log_name.removesuffix('.log')}.solo-{j}.log")
        out.append(finish_us(result, job))
    return out
