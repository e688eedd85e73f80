"""Simulate candidate specs through the pipeline as a library: build a run directory in a temporary
place, run the embedded backend on it, keep the summary (`Evaluation`), delete the directory.

Plans run in parallel worker processes (`jobs`) or as Ray tasks (`ray_address`); results are cached
by content, so a plan simulated once — in this search or an earlier one — is never simulated again.
"""

from __future__ import annotations

import multiprocessing
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from astra_hetero.errors import AstraHeteroError, BackendUnavailable
from astra_hetero.planner.cache import PlanCache, content_key, plan_key
from astra_hetero.planner.evaluation import Evaluation
from astra_hetero.spec.schema import Spec

if TYPE_CHECKING:
    from astra_hetero.planner.neighbours import Neighbours


def simulate(spec_data: dict[str, Any], job: str | None = None) -> Evaluation:
    """One plan, start to finish; never raises for a failure of the plan itself. `job`: the spec is
    a shared cluster's and the plan is this job's; the evaluation is the job's, beside the others."""
    from astra_hetero import pipeline
    from astra_hetero.jobs.load import parse_run_spec
    from astra_hetero.results.jobs import job_result

    started = time.perf_counter()
    try:
        spec = parse_run_spec(spec_data)
        with tempfile.TemporaryDirectory(prefix="astra-hetero-plan-") as scratch:
            run_dir = pipeline.build_run_dir(spec, Path(scratch) / "run")
            # one decoding process: the search already runs one simulation per core; no solo runs
            result = pipeline.execute(run_dir.root, "embedded", timeline="none", workers=1, solo=False)
    except AstraHeteroError as exc:
        return Evaluation.failed(f"{type(exc).__name__}: {exc}")
    except Exception as exc:  # a bug hit by one plan must not end the search
        return Evaluation.failed(f"{type(exc).__name__}: {exc}")
    if job is not None:
        result = job_result(result, job)
    return Evaluation.of(result, time.perf_counter() - started)


class Evaluator:
    """Runs batches of specs: cached ones at once, the rest in parallel. Use as a context manager."""

    def __init__(self, cache: PlanCache, jobs: int = 1, ray_address: str | None = None) -> None:
        if jobs < 1:
            raise BackendUnavailable(f"--jobs must be at least 1, got {jobs}")
        self.cache, self.jobs, self.ray_address = cache, jobs, ray_address
        self.num_simulated = 0
        self._pool: ProcessPoolExecutor | None = None
        self._ray: Any = None
        self._ray_connected_here = False

    def __enter__(self) -> Evaluator:
        if self.ray_address:
            self._ray, self._ray_connected_here = _connect_ray(self.ray_address)
        elif self.jobs > 1:
            # spawn: the parent runs a progress thread, and forking a threaded process is unsafe
            self._pool = ProcessPoolExecutor(self.jobs, mp_context=multiprocessing.get_context("spawn"))
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
        if self._ray is not None and self._ray_connected_here:
            self._ray.shutdown()

    @property
    def parallelism(self) -> int:
        """How many plans one batch should hold to keep every worker busy."""
        if self._ray is not None:
            return max(1, int(self._ray.cluster_resources().get("CPU", 1)))
        return self.jobs

    def evaluate(self, specs: Sequence[Spec], neighbours: Neighbours | None = None) -> list[Evaluation]:
        """`neighbours`: the specs are plans of one job of a shared cluster, simulated beside the others."""
        if neighbours is None:
            keys = [plan_key(spec) for spec in specs]
            data = [spec.model_dump(mode="json") for spec in specs]
        else:
            data = [neighbours.candidate(spec) for spec in specs]
            keys = [content_key(d, d.get("calibration"), f"embedded job {neighbours.name}") for d in data]
        found: list[Evaluation | None] = [self.cache.get(key) for key in keys]
        missing = [i for i, hit in enumerate(found) if hit is None]
        job = neighbours.name if neighbours is not None else None
        fresh = self._run([data[i] for i in missing], job)
        for i, evaluation in zip(missing, fresh, strict=True):
            self.cache.put(keys[i], evaluation)
            found[i] = evaluation
        self.num_simulated += len(missing)
        return [f for f in found if f is not None]

    def _run(self, batch: list[dict[str, Any]], job: str | None = None) -> list[Evaluation]:
        if not batch:
            return []
        if self._ray is not None:
            return _run_on_ray(self._ray, batch, job)
        if self._pool is None:
            return [simulate(data, job) for data in batch]
        futures = [self._pool.submit(simulate, data, job) for data in batch]
        return [_outcome(future) for future in futures]


def _outcome(future: Future[Evaluation]) -> Evaluation:
    try:
        return future.result()
    except Exception as exc:  # the worker process died (e.g. killed for memory)
        return Evaluation.failed(f"worker failed: {type(exc).__name__}: {exc}", deterministic=False)


def _connect_ray(address: str) -> Any:
    try:
        import ray
    except ImportError:
        raise BackendUnavailable(
            "--ray needs the optional Ray extra: pip install 'astra-hetero[ray]'"
        ) from None
    if not ray.is_initialized():
        ray.init(address=address)
    return ray


def _run_on_ray(ray: Any, batch: list[dict[str, Any]], job: str | None = None) -> list[Evaluation]:
    task = ray.remote(simulate)
    refs = [task.remote(data, job) for data in batch]
    results = []
    for ref in refs:
        try:
            results.append(ray.get(ref))
        except ray.exceptions.RayError as exc:  # the task or its worker died
            results.append(Evaluation.failed(f"Ray task failed: {exc}", deterministic=False))
    return results
