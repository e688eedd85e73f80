"""report.md of a planning session: the answer first (best plan, baseline, speed-up), then how the
search got there (space, pruned by reason, simulations, wall time), the best plans, and the plots."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from astra_hetero.planner.base import Trial
from astra_hetero.planner.dimensions import active_dimensions, describe_options
from astra_hetero.planner.driver import PlanReport
from astra_hetero.planner.feasibility import DESCRIPTIONS, Reason
from astra_hetero.planner.pricing import cheapest_within, cost_per_iteration, gpus_used_by_type
from astra_hetero.planner.settings import allowed
from astra_hetero.planner.table import Row
from astra_hetero.results.figure_files import markdown_figure

TOP_ROWS = 10


def render_report(report: PlanReport, rows: Sequence[Row], images: Sequence[str]) -> str:
    problem = report.problem
    spec = problem.base
    groups = ", ".join(
        f"{name} ({g.num_gpus}× {g.gpu.name})"
        for g, name in zip(spec.cluster.node_groups, spec.cluster.group_names, strict=True)
    )
    lines = [
        f"# Plan search: {spec.name}",
        "",
        f"{problem.num_gpus} GPUs — {groups}; global batch {spec.parallelism.global_batch_size} × "
        f"{spec.model.seq_len} tokens. Times are simulated by the embedded backend.",
        "",
        *_neighbours(report),
        *_idle(report, rows),
        *_answer(report, rows),
        "## Search",
        "",
        *_search(report),
        "## Best plans",
        "",
        *_top_table(rows),
        *[f"{markdown_figure(name)}\n" for name in images],
        "## The space",
        "",
        *_space(report),
    ]
    return "\n".join(lines) + "\n"


def _neighbours(report: PlanReport) -> list[str]:
    """Planning one job of a shared cluster: what its times mean."""
    neighbours = report.problem.neighbours
    if neighbours is None:
        return []
    others = ", ".join(f"`{n}`" for n in neighbours.others) or "none"
    if not neighbours.simulate:
        return [
            f"Job `{neighbours.name}` of a shared cluster, planned on its GPUs above as if alone "
            f"(`search.neighbours: ignore`): every time below is its mean iteration time without the jobs "
            f"{others}; `best.yaml` runs it beside them.",
            "",
        ]
    return [
        f"Job `{neighbours.name}` of a shared cluster, planned on its GPUs above beside the jobs {others} "
        "as written (their plans, placements, starts and iterations fixed). Every time below is the job's "
        "mean iteration time simulated on the whole cluster with them.",
        "",
    ]


def _plan_line(trial: Trial, rows: Sequence[Row]) -> str:
    row = next((r for r in rows if r.trial is trial), None)
    tokens = f", {row.values['tokens_per_s']:,.0f} tokens/s" if row else ""
    plan = trial.plan
    layers, batches = " ".join(map(str, plan.layers)), " ".join(map(str, plan.micro_batches))
    return (
        f"{trial.time_us / 1e3:,.3f} ms{tokens} — tp {plan.tp}, pp {plan.pp}, dp {plan.dp}, cp {plan.cp}, "
        f"{describe_options(plan.options)}; mapping `{plan.mapping_text}`; layers `{layers}`; "
        f"micro-batches `{batches}`; memory headroom {trial.headroom_gib:.1f} GiB"
    )


def _idle(report: PlanReport, rows: Sequence[Row]) -> list[str]:
    """What the best plan leaves idle, and why: against the fastest plan that uses every GPU."""
    best, problem = report.best, report.problem
    if best is None:
        return []
    total = Counter(device.gpu_type for device in problem.devices)
    used = gpus_used_by_type(problem, best)
    idle = {gpu: n - used.get(gpu, 0) for gpu, n in sorted(total.items()) if n > used.get(gpu, 0)}
    if not idle:
        return [f"The best plan uses all {problem.num_gpus} GPUs.", ""]
    listed = ", ".join(f"{n} of the {total[gpu]} {gpu}" for gpu, n in idle.items())
    lines = [f"**The best plan leaves {sum(idle.values())} of {problem.num_gpus} GPUs idle**: {listed}."]
    everything = [r for r in rows if r.values["status"] == "ok" and r.values["idle_gpus"] == 0]
    if everything:
        fastest = everything[0].trial  # rows are fastest first
        lines[0] += (
            f" Why: the fastest plan that uses every GPU (tp {fastest.plan.tp}, pp {fastest.plan.pp}, "
            f"dp {fastest.plan.dp}, mapping `{fastest.plan.mapping_text}`) takes "
            f"{fastest.time_us / 1e3:,.3f} ms, {fastest.time_us / best.time_us - 1:.1%} longer than the "
            f"best plan's {best.time_us / 1e3:,.3f} ms: the GPUs left out would add more to the slowest "
            "stage or to the communication than they take off the compute."
        )
    else:
        lines[0] += (
            " Why: no plan that uses every GPU was simulated — none was feasible or none came close "
            "enough to the best to be run (the reasons candidates were set aside are under *The space*)."
        )
    return [*lines, ""]


def _answer(report: PlanReport, rows: Sequence[Row]) -> list[str]:
    best, baseline = report.best, report.baseline_best
    lines = []
    if best is not None:
        lines += [f"**Best plan** ({best.source}): {_plan_line(best, rows)}. It is `best.yaml`.", ""]
    if baseline is not None and report.speedup is not None:
        lines += [
            f"**Homogeneous-assumption baseline**: {_plan_line(baseline, rows)}.",
            "",
            f"The best plan is **{report.speedup:.3f}×** as fast as the baseline "
            f"({(1 - 1 / report.speedup) * 100:.1f} % less time per iteration).",
            "",
        ]
    elif report.baseline is not None:
        lines += [f"Homogeneous-assumption baseline: {report.baseline.stopped}.", ""]
    if report.baseline is not None:
        lines += [f"- baseline: {note}" for note in report.baseline.notes] + [""]
    if report.spec_plan is not None:
        lines += [f"**The spec's own plan**: {_plan_line(report.spec_plan, rows)}.", ""]
    cheapest = cheapest_within(report.problem, [r.trial for r in rows])
    if cheapest is not None:
        cost = cost_per_iteration(report.problem, cheapest)
        lines += [
            f"**Cheapest plan within {report.problem.settings.max_slowdown:.0%} of the fastest**: "
            f"{_plan_line(cheapest, rows)}; {cost:.6g} per iteration (prices per GPU-hour: "
            + ", ".join(f"{k} {v:g}" for k, v in report.problem.settings.prices_per_gpu_hour.items())
            + ").",
            "",
        ]
    return lines


def _search(report: PlanReport) -> list[str]:
    search = report.search
    tally = search.tally
    header = (
        "candidates considered",
        "feasible",
        "simulated",
        "search wall time",
        "workers",
        "simulations run",
        "cache hits",
        "replica orderings collapsed",
    )
    values = (
        search.num_candidates,
        search.num_feasible,
        len(search.trials),
        f"{search.wall_time_s:.1f} s",
        report.jobs,
        report.num_simulated,
        report.cache_hits,
        search.num_collapsed,
    )
    lines = [
        "| " + " | ".join(header) + " |",
        "|" + "---:|" * len(header),
        "| " + " | ".join(map(str, values)) + " |",
        "",
        f"Planner `{search.planner}`; stopped: {search.stopped}. Whole session (baseline included): "
        f"{report.wall_time_s:.1f} s.",
        "",
        "| reason | candidates | what it means / first example |",
        "|---|---:|---|",
    ]
    for reason in Reason:
        keys = [k for k in tally.counts if k.split(":")[0] == reason.value]
        for key in sorted(keys, key=lambda k: -tally.counts[k]):
            example = tally.examples.get(key, "") or DESCRIPTIONS[reason]
            lines.append(f"| {key} | {tally.counts[key]} | {_cell(example[:140])} |")
    return [*lines, ""]


def _top_table(rows: Sequence[Row]) -> list[str]:
    names = [
        "rank",
        "source",
        "iteration_time_us",
        "tokens_per_s",
        "tp",
        "pp",
        "dp",
        *(d.field for d in active_dimensions()),
        "mapping",
        "layers",
        "micro_batches",
        "memory_headroom_gib",
    ]
    lines = ["| " + " | ".join(names) + " |", "|" + "---|" * len(names)]
    for row in rows[:TOP_ROWS]:
        lines.append("| " + " | ".join(_cell(row.values.get(n, "")) for n in names) + " |")
    return [*lines, "", "Every simulated plan is in `plans.csv`.", ""]


def _cell(value: object) -> str:
    """A markdown table cell: pipes escaped (mappings separate stages with `|`)."""
    return str(value).replace("|", "\\|")


def _space(report: PlanReport) -> list[str]:
    settings = report.problem.settings
    searched = []
    for dimension in active_dimensions():
        values = allowed(getattr(settings, dimension.field, None)) or dimension.values(report.problem.base)
        searched.append(f"{dimension.field} ∈ {{{', '.join(map(str, values))}}}")
    classes = ", ".join(f"{c.name} ({c.num_gpus} GPUs)" for c in report.problem.classes)
    use = "every GPU used" if settings.use_all_gpus else "GPUs may be left idle"
    return [
        f"- device classes (node groups with identical hardware are one pool): {classes}",
        f"- tp {settings.tp or 'any that fits'}, pp {settings.pp or 'any'}, dp {settings.dp or 'any'}, "
        f"cp {settings.cp or 'by sequence length'}; {use}",
        f"- mapping: {settings.mapping}; stage order: {settings.stage_order}; at most "
        f"{settings.max_distinct_replicas} distinct pipelines per grid; grids that differ only in the order "
        "of their replicas are one plan",
        f"- splits: layers {settings.layers}, micro-batches {settings.micro_batches} (every split when a "
        f"grid has at most {settings.max_splits}, else the balanced one, refined around the best "
        f"{settings.refine_top} plans)",
        f"- options: {'; '.join(searched)}",
        f"- budget: {settings.max_simulations} simulations"
        + (f", {settings.time_budget_s:g} s" if settings.time_budget_s else "")
        + f"; estimate margin {settings.estimate_margin}",
    ]
