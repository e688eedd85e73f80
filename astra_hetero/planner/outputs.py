"""Write a planning session's outputs: best.yaml, plans.csv, search.json, report.md and its plots.

Everything is written into a staging directory and moved into OUT only when all of it is whole.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import yaml

from astra_hetero import provenance, rundir
from astra_hetero.errors import InfeasiblePlan
from astra_hetero.outputs import publish
from astra_hetero.planner.candidate import plan_spec
from astra_hetero.planner.driver import PlanReport
from astra_hetero.planner.feasibility import DESCRIPTIONS, Reason
from astra_hetero.planner.pricing import cheapest_within
from astra_hetero.planner.table import Row, columns, plan_rows

BEST, PLANS, SUMMARY, REPORT = "best.yaml", "plans.csv", "search.json", "report.md"
SUMMARY_FORMAT = "astra-hetero/plan@1"


def best_spec_data(report: PlanReport) -> dict[str, Any]:
    best = report.best
    if best is None:
        raise InfeasiblePlan("search", no_plan_message(report))
    problem = report.problem
    spec = plan_spec(problem.base, best.plan)
    if problem.neighbours is not None:  # the whole shared cluster, the planned job's plan in place
        data = problem.neighbours.embed(spec)
        return {**data, "name": f"{data['name']}-planned"}
    return spec.model_copy(update={"name": f"{problem.base.name}-planned"}).model_dump(mode="json")


def no_plan_message(report: PlanReport) -> str:
    counts = ", ".join(f"{key} {n}" for key, n in report.search.tally.counts.most_common(6))
    return (
        f"no plan of the {report.search.num_candidates} candidates ran ({counts or 'none considered'}); "
        "widen the search section (tp/pp/dp, recompute, distributed_optimizer) or the cluster"
    )


def write_outputs(
    report: PlanReport, out: Path, plots: bool = True, fmt: str = "png", spec_file: Path | None = None
) -> dict[str, Path]:
    """`spec_file`: the spec as given, whose sha256 the provenance records."""
    from astra_hetero.planner.plots import write_plots
    from astra_hetero.planner.report import render_report

    best_data = best_spec_data(report)  # raises before anything is written when there is no plan
    rows = plan_rows(report)
    out = Path(out)
    with publish(out) as staging:
        (staging / BEST).write_text(_best_header(report) + yaml.safe_dump(best_data, sort_keys=False))
        (staging / PLANS).write_text(plans_csv(rows))
        images = write_plots(report, rows, staging, fmt) if plots else []
        (staging / SUMMARY).write_text(_json(summary(report, rows, spec_file)))
        (staging / REPORT).write_text(render_report(report, rows, [p.name for p in images]))
    return {name: out / name for name in (BEST, PLANS, SUMMARY, REPORT)}


def plans_csv(rows: list[Row]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns(), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow(row.values)
    return buffer.getvalue()


def summary(report: PlanReport, rows: list[Row], spec_file: Path | None = None) -> dict[str, Any]:
    search = report.search
    cheapest = cheapest_within(report.problem, [r.trial for r in rows])
    by_trial = {id(r.trial): r.values for r in rows}
    return {
        "format": SUMMARY_FORMAT,
        "planner": search.planner,
        "space": {
            "candidates": search.num_candidates,
            "feasible": search.num_feasible,
            "pruned_by_reason": {r.value: search.tally.total(r) for r in Reason if search.tally.total(r)},
            "pruned_by_key": dict(search.tally.counts),
            "simulated": len(search.trials),
        },
        "stopped": search.stopped,
        "search_wall_time_s": round(search.wall_time_s, 3),
        "total_wall_time_s": round(report.wall_time_s, 3),
        "jobs": report.jobs,
        "simulations_run": report.num_simulated,
        "cache_hits": report.cache_hits,
        "best": by_trial.get(id(report.best)) if report.best else None,
        "baseline": by_trial.get(id(report.baseline_best)) if report.baseline_best else None,
        "baseline_notes": report.baseline.notes if report.baseline else [],
        "speedup_vs_baseline": report.speedup,
        "spec_plan": by_trial.get(id(report.spec_plan)) if report.spec_plan else None,
        "cheapest_within_slowdown": by_trial.get(id(cheapest)) if cheapest else None,
        "max_slowdown": report.problem.settings.max_slowdown,
        "reasons": {r.value: DESCRIPTIONS[r] for r in Reason},
        # the planner simulates with the embedded engine; the spec hashed is the file as given
        provenance.KEY: provenance.record(
            "embedded", spec_hash=rundir.file_sha256(Path(spec_file)) if spec_file else None
        ),
    }


def _best_header(report: PlanReport) -> str:
    best = report.best
    assert best is not None
    lines = [
        "# The fastest plan `astra-hetero plan` found; run it with `astra-hetero run best.yaml -o RUN_DIR`.",
        f"# Simulated iteration time (embedded backend): {best.time_us / 1e3:.3f} ms — {best.plan.label}",
    ]
    neighbours = report.problem.neighbours
    if neighbours is not None and not neighbours.simulate:
        lines.append(f"# (job {neighbours.name!r} timed alone; this file runs it beside the other jobs)")
    elif neighbours is not None:
        lines.append(
            f"# (the mean iteration time of job {neighbours.name!r} beside the fixed jobs "
            f"{', '.join(repr(n) for n in neighbours.others) or '(none)'})"
        )
    if report.baseline_best is not None and report.speedup is not None:
        lines.append(
            f"# Homogeneous-assumption baseline: {report.baseline_best.time_us / 1e3:.3f} ms "
            f"(this plan is {report.speedup:.3f}x as fast)"
        )
    return "\n".join(lines) + "\n"


def _json(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=1, default=str) + "\n"
