"""The `plan` transform: a point's spec replaced by the plan `astra-hetero plan` picks for it.

The planner runs as a library (`planner.find_plans`) on the point's cluster, model and global batch,
with the transform's `search:` section (its `time_budget_s` caps the search). One search yields both
picks — its best plan and its homogeneous-assumption baseline — so the points of a study that differ
only in the pick share it: the search runs once, under a lock, and its outcome is kept by content in
the study's workspace (`OUT/plans/`):

    OUT/plans/<model>_<gpus>_<key>/   best.yaml, plans.csv, search.json, report.md (the planner's own
                                      outputs) and picks.json (both picks as complete specs)
    OUT/plans/cache/                  every plan simulated, by content (the planner's cache)

The key hashes the point's effective spec (calibration and code included, as the planner's cache
does) with the search settings, time budget included, so a changed input searches again. A point that
resumes finds its picks here and does not search at all. Without a workspace (a point's spec asked
for outside a study run) the search runs in a temporary directory and keeps nothing.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from astra_hetero import rundir
from astra_hetero.errors import InfeasiblePlan
from astra_hetero.jobs.load import RunSpec, parse_run_spec
from astra_hetero.planner.cache import PlanCache, content_key
from astra_hetero.planner.candidate import plan_spec
from astra_hetero.planner.driver import PlanReport, find_plans
from astra_hetero.planner.outputs import best_spec_data, write_outputs
from astra_hetero.planner.problem import problem_from_data
from astra_hetero.spec import Spec
from astra_hetero.studies.schema import PlanTransform

PICKS = "picks.json"
PICKS_FORMAT = "astra-hetero/study-plan@1"
CACHE_DIR = "cache"


def planned_spec(spec: RunSpec, transform: PlanTransform, workspace: Path | None) -> RunSpec:
    """The spec of the plan `transform.pick` names, for the cluster, model and batch of `spec`."""
    if workspace is None:
        with tempfile.TemporaryDirectory(prefix="astra-hetero-study-plan-") as scratch:
            return planned_spec(spec, transform, Path(scratch))
    picks = plan_picks(spec, transform, Path(workspace))
    chosen = picks["picks"][transform.pick]
    if chosen is None:
        raise InfeasiblePlan("transform.pick", f"there is no {transform.pick} plan: {picks['baseline_note']}")
    return parse_run_spec(chosen["spec"])


def plan_picks(spec: RunSpec, transform: PlanTransform, workspace: Path) -> dict[str, Any]:
    """The search's outcome for `spec` (picks.json's content): read if kept, else searched and kept."""
    key = search_key(spec, transform)
    directory = workspace / f"{_slug(spec)}_{key[:12]}"
    workspace.mkdir(parents=True, exist_ok=True)
    with _locked(workspace / f".{directory.name}.lock"):
        found = _read_picks(directory / PICKS, key)
        if found is None:
            found = _search(spec, transform, directory, key, workspace / CACHE_DIR)
    return found


def search_key(spec: RunSpec, transform: PlanTransform) -> str:
    """What the search's outcome depends on: the spec's content (as the planner's cache keys it: its
    calibration table and the package's code included) and the search's settings (budget included)."""
    content = content_key(spec.model_dump(mode="json"), spec.calibration, "embedded")
    text = json.dumps([content, transform.search.model_dump(mode="json")], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _search(
    spec: RunSpec, transform: PlanTransform, directory: Path, key: str, cache_dir: Path
) -> dict[str, Any]:
    data = spec.model_dump(mode="json")
    data["search"] = transform.search.model_dump(mode="json")
    problem = problem_from_data(data)
    # One process: the study already runs one point per core (--jobs).
    report = find_plans(problem, jobs=1, cache=PlanCache(cache_dir))
    shutil.rmtree(directory, ignore_errors=True)  # what a search killed before its picks left
    write_outputs(report, directory, plots=False)  # raises InfeasiblePlan when no plan ran
    picks = _picks(report, key)
    rundir.write_json_atomic(directory / PICKS, picks)  # last: its presence means the search is whole
    return picks


def _picks(report: PlanReport, key: str) -> dict[str, Any]:
    best, baseline = report.best, report.baseline_best
    assert best is not None  # write_outputs refused a report without one
    base = report.problem.base
    picks: dict[str, Any] = {"best": _pick(best_spec_data(report), best)}
    if baseline is not None:
        baseline_spec = plan_spec(base, baseline.plan)
        data = baseline_spec.model_dump(mode="json")
        if report.problem.neighbours is not None:  # the shared cluster, the planned job's plan in place
            data = report.problem.neighbours.embed(baseline_spec)
        picks["baseline"] = _pick({**data, "name": f"{data['name']}-homogeneous-plan"}, baseline)
    else:
        picks["baseline"] = None
    notes = report.baseline.notes if report.baseline is not None else []
    stopped = report.baseline.stopped if report.baseline is not None else "the search ran no baseline"
    return {
        "format": PICKS_FORMAT,
        "key": key,
        "picks": picks,
        "speedup_vs_baseline": report.speedup,
        "baseline_note": "; ".join([*notes, stopped]),
        "search": {
            "candidates": report.search.num_candidates,
            "simulated": len(report.search.trials),
            "stopped": report.search.stopped,
            "wall_time_s": round(report.wall_time_s, 3),
            "simulations_run": report.num_simulated,
            "cache_hits": report.cache_hits,
        },
    }


def _pick(spec_data: dict[str, Any], trial: Any) -> dict[str, Any]:
    return {"iteration_time_us": trial.time_us, "plan": trial.plan.label, "spec": spec_data}


def _read_picks(path: Path, key: str) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("format") != PICKS_FORMAT or data.get("key") != key:
        return None
    return data


def _slug(spec: RunSpec) -> str:
    """`llama-65b_h100x64-a100x32-l40sx32`: the model (a shared cluster's job names) and the GPU mix,
    for a reader of OUT/plans/."""
    counts: dict[str, int] = {}
    for group in spec.cluster.node_groups:
        counts[group.gpu.type_key] = counts.get(group.gpu.type_key, 0) + group.num_gpus
    mix = "-".join(f"{gpu}x{n}" for gpu, n in counts.items())
    if isinstance(spec, Spec):
        what = spec.model.preset or f"{spec.model.num_layers}-layer-model"
    else:
        what = "jobs-" + "-".join(spec.job_names)
    text = f"{what}_{mix}"
    return "".join(c if c.isalnum() or c in "._-" else "-" for c in text)[:100]


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on `path` (created if missing): the other points of one search wait."""
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
