"""YAML → a validated spec of one job (`Spec`) or of several jobs sharing a cluster (`SharedClusterSpec`).

A spec with `jobs:` gives the cluster's sections (cluster, network, collectives, compute, calibration,
dynamics) at the top and each job's own under `jobs:`; the single-job sections at the top are
refused with a pointer to where they belong. Every check of a single-job spec runs per job on the
GPUs it owns (`specs.place_jobs`), after the ownership checks.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from astra_hetero.dynamics.selection import check_dynamics
from astra_hetero.errors import SpecError
from astra_hetero.jobs.allocation import world_size, world_text
from astra_hetero.jobs.specs import PlacedJob, job_errors, place_jobs
from astra_hetero.spec.load import (
    check_consistency,
    parse_spec,
    read_spec_data,
    resolve_files,
    spec_error_from_validation,
    validate_sections,
)
from astra_hetero.spec.schema import Spec
from astra_hetero.spec.schema.jobs import JobSpec, SharedClusterSpec

logger = logging.getLogger(__name__)

RunSpec = Spec | SharedClusterSpec

# top-level sections of a single-job spec that belong to each job in a shared-cluster spec
_PER_JOB = ("model", "parallelism", "precision", "mapping", "partition", "scope", "iterations")


def load_run_spec(path: str | Path) -> RunSpec:
    """A spec file of one job or of several (`jobs:`), validated and checked."""
    path = Path(path)
    spec = parse_run_spec(read_spec_data(path), path)
    jobs = f", {len(spec.jobs)} jobs" if isinstance(spec, SharedClusterSpec) else ""
    logger.info("read %s: %r, %d GPUs%s", path, spec.name, spec.cluster.num_gpus, jobs)
    return spec


def parse_run_spec(data: Any, source: Path | None = None) -> RunSpec:
    if isinstance(data, dict) and "jobs" in data:
        return parse_shared_spec(data, source)
    return parse_spec(data, source)


def validate_run_sections(data: Any, source: Path | None = None) -> RunSpec:
    """Every section on its own, without the cross-section checks, of a spec of one job or several."""
    if isinstance(data, dict) and "jobs" in data:
        return validate_shared_sections(data, source)
    return validate_sections(data, source)


def parse_shared_spec(data: dict[str, Any], source: Path | None = None) -> SharedClusterSpec:
    shared = validate_shared_sections(data, source)
    check_shared(shared)
    return shared


def validate_shared_sections(data: dict[str, Any], source: Path | None = None) -> SharedClusterSpec:
    """The schema alone (no per-job checks): what the planner starts from."""
    for key in _PER_JOB:
        if key in data:
            raise SpecError(
                key,
                f"with `jobs:`, each job gives its own {key} (jobs[i].{key}); the top level holds the "
                "shared cluster's sections (cluster, network, collectives, compute, calibration, dynamics)",
            )
    try:
        shared = SharedClusterSpec.model_validate(data)
    except ValidationError as exc:
        raise spec_error_from_validation(exc) from None
    except RecursionError:
        raise SpecError("", "the spec is nested too deeply") from None
    names = shared.job_names
    for i, name in enumerate(names):
        if name in names[:i]:
            raise SpecError(
                f"jobs[{i}].name", f"{name!r} is also jobs[{names.index(name)}]'s name; names must be unique"
            )
    return resolve_files(shared, source)


def check_shared(shared: SharedClusterSpec) -> list[PlacedJob]:
    """Ownership, then every single-job check per job; the placed jobs."""
    check_dynamics(shared)  # type: ignore[arg-type]  # reads only `dynamics` and `cluster`
    placed = place_jobs(shared)
    for job in placed:
        check_job(job)
    return placed


def check_job(placed: PlacedJob) -> None:
    """The job's size against its GPUs, then the single-job spec's cross-section checks."""
    par, job = placed.job.parallelism, placed.job
    world, have = world_size(par), len(placed.ranks)
    if world > have:
        where = f"its nodes ({placed.where}.nodes)" if job.nodes is not None else "the nodes taken for it"
        raise SpecError(
            f"{placed.where}.parallelism",
            f"job {job.name!r} needs {world_text(par)} GPUs but {where} hold {have}",
        )
    if world < have and not placed.spec.mapping.allow_idle_gpus:
        raise SpecError(
            f"{placed.where}.parallelism",
            f"job {job.name!r} uses {world_text(par)} of the {have} GPUs of "
            f"its nodes ({placed.where}.nodes); set {placed.where}.mapping.allow_idle_gpus to leave the "
            "rest idle",
        )
    with job_errors(placed):
        check_consistency(placed.spec)


def job_named(shared: SharedClusterSpec, name: str, field: str) -> tuple[int, JobSpec]:
    """The job called `name` (SpecError at `field` naming the jobs there are)."""
    for i, job in enumerate(shared.jobs):
        if job.name == name:
            return i, job
    raise SpecError(field, f"no job is called {name!r}; jobs: {', '.join(repr(n) for n in shared.job_names)}")
