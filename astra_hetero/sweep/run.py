"""Run sweep points in parallel (local processes, or Ray tasks) and combine their results.

Each point builds its own run directory `OUT_DIR/<point name>` and runs it through
`pipeline.execute`; a point that fails is recorded with its error and the others go on.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import multiprocessing
import signal
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from statistics import fmean
from typing import Any

from astra_hetero.backends.astrasim.partial import BackendTimedOut, partial_path
from astra_hetero.bounds import WorkLimits
from astra_hetero.errors import AstraHeteroError, BackendUnavailable, RunDirError
from astra_hetero.results.model import RunResult
from astra_hetero.rundir import write_text_atomic
from astra_hetero.staging import clean_directory
from astra_hetero.sweep.plan import Sweep, SweepPoint

logger = logging.getLogger(__name__)

CSV_NAME = "sweep.csv"
METRICS = (
    "iteration_time_us",
    "num_ranks",
    "mean_compute_us",
    "mean_exposed_comm_us",
    "mean_idle_us",
    "max_idle_us",
)


@dataclass(frozen=True)
class PointOutcome:
    index: int
    name: str
    overrides: dict[str, Any]
    run_dir: str
    error: str = ""  # empty when the point succeeded
    metrics: dict[str, float] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.error


OnDone = Callable[[PointOutcome], None]


def run_point(
    point: SweepPoint,
    out_dir: str,
    backend: str,
    options: dict[str, Any],
    limits: WorkLimits | None = None,
    force: bool = False,
) -> PointOutcome:
    """Build and run one point (published with its result in one step); never raises for a failure of
    the point itself."""
    from astra_hetero import pipeline

    run_dir = Path(out_dir) / point.name
    logger.info("point %s: starting", point.name)
    try:
        spec = point.spec()
        result = pipeline.run_spec(
            spec, run_dir, point.backend or backend, limits=limits, force=force, **options
        )
    except BackendTimedOut as exc:  # stopped at its budget: keep what it had done
        where = partial_path(run_dir)
        write_text_atomic(where, json.dumps(exc.partial.as_json(), indent=1) + "\n")
        logger.info("point %s: stopped at its budget (%s)", point.name, where)
        return _failed(point, run_dir, f"{exc} (what it had done: {where.name})")
    except AstraHeteroError as exc:
        logger.info("point %s: failed (%s)", point.name, first_line(str(exc)))
        return _failed(point, run_dir, str(exc))
    except Exception as exc:  # a bug hit by one point must not end the other points
        return _failed(point, run_dir, f"{type(exc).__name__}: {exc}")
    logger.info("point %s: iteration %.6g us", point.name, result.iteration_time_us)
    return PointOutcome(
        point.index,
        point.name,
        point.overrides,
        str(run_dir),
        metrics=result_metrics(result),
        warnings=result.warnings,
    )


def run_local(
    sweep: Sweep,
    out_dir: Path,
    backend: str,
    options: dict[str, Any],
    jobs: int,
    on_done: OnDone,
    limits: WorkLimits | None = None,
    force: bool = False,
) -> list[PointOutcome]:
    if jobs < 1:
        raise BackendUnavailable(f"--jobs must be at least 1, got {jobs}")
    outcomes = []
    if jobs == 1:
        for point in sweep.points:
            outcomes.append(run_point(point, str(out_dir), backend, options, limits, force))
            on_done(outcomes[-1])
        return outcomes
    # spawn: the parent runs a progress thread, and forking a threaded process is unsafe. Workers ignore
    # SIGINT: Ctrl-C reaches the whole process group, and the parent alone decides what happens.
    package = logging.getLogger("astra_hetero")
    level = package.level if package.handlers else logging.NOTSET  # `-v`: workers log as the parent does
    pool = ProcessPoolExecutor(
        jobs, mp_context=multiprocessing.get_context("spawn"), initializer=_init_worker, initargs=(level,)
    )
    try:
        futures = {
            pool.submit(run_point, point, str(out_dir), backend, options, limits, force): point
            for point in sweep.points
        }
        for future in as_completed(futures):
            point = futures[future]
            try:
                outcome = future.result()
            except Exception as exc:  # the worker process died (e.g. killed); the point failed
                outcome = _failed(point, out_dir / point.name, f"worker failed: {type(exc).__name__}: {exc}")
            outcomes.append(outcome)
            on_done(outcome)
    except BaseException:
        _stop(pool)  # interrupted: end the points in flight, and remove what they were building
        clean_directory(out_dir)
        raise
    pool.shutdown()
    return sorted(outcomes, key=lambda o: o.index)


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _init_worker(level: int) -> None:
    """A worker process: Ctrl-C is the parent's to handle; with `-v`, the package's log records (a long
    ns-3 run's progress) go to stderr as in the parent."""
    _ignore_sigint()
    if level != logging.NOTSET:
        logger = logging.getLogger("astra_hetero")
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(name)s: %(message)s", "%H:%M:%S"))
        logger.addHandler(handler)
        logger.setLevel(level)


def _stop(pool: ProcessPoolExecutor) -> None:
    processes = getattr(pool, "_processes", None) or {}  # the executor has no public way to stop them
    for process in list(processes.values()):
        process.terminate()
    pool.shutdown(wait=True, cancel_futures=True)


def run_on_ray(
    sweep: Sweep,
    out_dir: Path,
    backend: str,
    options: dict[str, Any],
    address: str,
    on_done: OnDone,
    limits: WorkLimits | None = None,
    force: bool = False,
) -> list[PointOutcome]:
    """Each point as one Ray task. OUT_DIR must be on a filesystem every Ray node sees."""
    try:
        import ray
    except ImportError:
        raise BackendUnavailable(
            "--ray needs the optional Ray extra: pip install 'astra-hetero[ray]'"
        ) from None
    connected_here = not ray.is_initialized()
    if connected_here:
        ray.init(address=address)
    try:
        task = ray.remote(run_point)
        pending = {
            task.remote(point, str(out_dir), backend, options, limits, force): point for point in sweep.points
        }
        outcomes = []
        while pending:
            (ready,), _ = ray.wait(list(pending), num_returns=1)
            point = pending.pop(ready)
            try:
                outcome = ray.get(ready)
            except ray.exceptions.RayError as exc:  # the task or its worker died
                outcome = _failed(point, out_dir / point.name, f"Ray task failed: {exc}")
            outcomes.append(outcome)
            on_done(outcome)
    finally:
        if connected_here:
            ray.shutdown()
    return sorted(outcomes, key=lambda o: o.index)


def run_sweep(
    sweep: Sweep,
    out_dir: Path,
    backend: str,
    options: dict[str, Any] | None = None,
    jobs: int = 1,
    ray_address: str | None = None,
    on_done: OnDone | None = None,
    limits: WorkLimits | None = None,
    force: bool = False,
) -> list[PointOutcome]:
    """Run every point, write OUT_DIR/sweep.csv, return the outcomes in point order."""
    out_dir = Path(out_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise RunDirError(f"{out_dir}: cannot be used as the sweep directory ({reason})") from None
    options = {key: value for key, value in (options or {}).items() if value is not None}
    on_done = on_done or (lambda outcome: None)
    if ray_address:
        outcomes = run_on_ray(sweep, out_dir, backend, options, ray_address, on_done, limits, force)
    else:
        outcomes = run_local(sweep, out_dir, backend, options, jobs, on_done, limits, force)
    write_csv(out_dir / CSV_NAME, sweep.override_keys, outcomes)
    return outcomes


def write_csv(path: Path, override_keys: Sequence[str], outcomes: Sequence[PointOutcome]) -> Path:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["point", *override_keys, "status", *METRICS, "num_warnings", "run_dir", "error"])
    for outcome in outcomes:
        writer.writerow(
            [
                outcome.name,
                *(_cell(outcome.overrides.get(key, "")) for key in override_keys),
                "ok" if outcome.ok else "failed",
                *(_cell(outcome.metrics.get(metric, "")) for metric in METRICS),
                len(outcome.warnings),
                outcome.run_dir,
                first_line(outcome.error),
            ]
        )
    write_text_atomic(path, buffer.getvalue())
    return path


def first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


def _cell(value: Any) -> Any:
    return round(value, 3) if isinstance(value, float) else value


def result_metrics(result: RunResult) -> dict[str, float]:
    return {
        "iteration_time_us": result.iteration_time_us,
        "num_ranks": result.num_ranks,
        "mean_compute_us": fmean(r.compute_us for r in result.ranks),
        "mean_exposed_comm_us": fmean(r.exposed_comm_us for r in result.ranks),
        "mean_idle_us": fmean(r.idle_us for r in result.ranks),
        "max_idle_us": max(r.idle_us for r in result.ranks),
    }


def _failed(point: SweepPoint, run_dir: Path, error: str) -> PointOutcome:
    return PointOutcome(point.index, point.name, point.overrides, str(run_dir), error=error or "failed")
