"""Run a study's points through the sweep machinery, skipping the points already complete in OUT.

A point is *complete* when `OUT/points/<name>/study-point.json` exists, was written for the point's
current inputs (a SHA-256 over its spec data, transforms, backend, backend options that change the
answer, the calibration table's bytes and the package version) and names the SHA-256 of the
`result.json` beside it. Change any input, or replace or remove result.json, and the point runs again.
The record is written by this process after the point's result.json, so a run killed in between
leaves the point incomplete, never wrongly complete.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from astra_hetero import rundir
from astra_hetero.backends.astrasim.partial import partial_path
from astra_hetero.studies.plan import Study, StudyPoint
from astra_hetero.sweep.plan import Sweep
from astra_hetero.sweep.run import PointOutcome, run_local, run_on_ray
from astra_hetero.version import __version__

POINTS_DIR = "points"
PLANS_DIR = "plans"  # the plan searches of `plan` transforms, shared by the points (planning.py)
RECORD = "study-point.json"
RECORD_FORMAT = "astra-hetero/study-point@1"
# Backend options that change a result; the others (timeout, timeline) only change whether one comes.
ANSWER_OPTIONS = ("binary", "bin_dir", "docker_image")


@dataclass(frozen=True)
class StudyOutcome:
    point: StudyPoint
    run_dir: Path
    ok: bool
    resumed: bool = False  # complete before this run: not run again
    error: str = ""


OnOutcome = Callable[[StudyOutcome], None]


def points_dir(out: Path) -> Path:
    return Path(out) / POINTS_DIR


def resolve_backends(study: Study, backend: str | None) -> tuple[StudyPoint, ...]:
    """Each point with its backend decided: its variant's pin, else `backend` (the command line's),
    else the study file's, else embedded."""
    default = backend or study.file.backend or "embedded"
    return tuple(dataclasses.replace(p, backend=p.backend or default) for p in study.points)


def plans_dir(out: Path) -> Path:
    return Path(out) / PLANS_DIR


def inputs_digest(point: StudyPoint, options: dict[str, Any]) -> str:
    calibration = point.spec_data.get("calibration")
    inputs = {
        "spec": point.spec_data,
        "transforms": [t.model_dump(mode="json") for t in point.transforms],
        "backend": point.backend,
        # the embedded engine ignores the ASTRA-sim options, so they must not rerun its points
        "options": {key: options.get(key) for key in ANSWER_OPTIONS} if point.backend != "embedded" else {},
        "calibration_sha256": rundir.file_sha256(Path(calibration)) if calibration else None,
        "version": __version__,
    }
    text = json.dumps(inputs, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def is_complete(run_dir: Path, digest: str) -> bool:
    record_path, result_path = run_dir / RECORD, run_dir / rundir.RESULT
    if not (record_path.is_file() and result_path.is_file()):
        return False
    try:
        record = json.loads(record_path.read_text())
    except (json.JSONDecodeError, OSError):
        return False
    return (
        isinstance(record, dict)
        and record.get("inputs_sha256") == digest
        and record.get("result_sha256") == rundir.file_sha256(result_path)
    )


def run_study(
    study: Study,
    out: Path,
    backend: str | None = None,
    options: dict[str, Any] | None = None,
    jobs: int = 1,
    ray_address: str | None = None,
    on_outcome: OnOutcome | None = None,
) -> list[StudyOutcome]:
    """Run every incomplete point (locally or on Ray); return one outcome per point, in point order."""
    options = {key: value for key, value in (options or {}).items() if value is not None}
    on_outcome = on_outcome or (lambda outcome: None)
    root = points_dir(out)
    root.mkdir(parents=True, exist_ok=True)
    workspace = str(plans_dir(out).resolve())
    points = tuple(dataclasses.replace(p, workspace=workspace) for p in resolve_backends(study, backend))
    digests = {p.name: inputs_digest(p, options) for p in points}
    outcomes: dict[str, StudyOutcome] = {}
    pending = []
    for point in points:
        run_dir = root / point.name
        if is_complete(run_dir, digests[point.name]):
            outcomes[point.name] = StudyOutcome(point, run_dir, ok=True, resumed=True)
            on_outcome(outcomes[point.name])
        else:
            _forget(run_dir)
            pending.append(point)
    by_name = {p.name: p for p in pending}

    def done(outcome: PointOutcome) -> None:
        point, run_dir = by_name[outcome.name], root / outcome.name
        if outcome.ok:
            _write_record(run_dir, digests[point.name], point)
        outcomes[point.name] = StudyOutcome(point, run_dir, outcome.ok, error=outcome.error)
        on_outcome(outcomes[point.name])

    if pending:
        batch = Sweep(study.name, tuple(pending), ())
        run_options = {"timeline": "none", **options}
        if ray_address:
            run_on_ray(batch, root, "embedded", run_options, ray_address, done)
        else:
            run_local(batch, root, "embedded", run_options, jobs, done)
    return [outcomes[p.name] for p in points]


def _forget(run_dir: Path) -> None:
    """An incomplete point keeps nothing that could pass for its result."""
    for name in (RECORD, rundir.RESULT, rundir.TIMELINE):
        (run_dir / name).unlink(missing_ok=True)
    partial_path(run_dir).unlink(missing_ok=True)  # a budget-stopped earlier attempt
    shutil.rmtree(run_dir / rundir.LOGS_DIR, ignore_errors=True)


def _write_record(run_dir: Path, digest: str, point: StudyPoint) -> None:
    rundir.write_json_atomic(
        run_dir / RECORD,
        {
            "format": RECORD_FORMAT,
            "point": point.name,
            "levels": point.levels,
            "backend": point.backend,
            "inputs_sha256": digest,
            "result_sha256": rundir.file_sha256(run_dir / rundir.RESULT),
        },
    )
