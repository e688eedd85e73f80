"""`astra-hetero plan SPEC.yaml -o OUT [--jobs N] [--ray ADDRESS] [--time-budget SECONDS]`."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from astra_hetero.cli.options import add_figure_format_argument, add_json_argument, print_json

DEFAULT_JOBS = max(1, min(os.cpu_count() or 1, 8))


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "plan", help="find the fastest parallel plan and device mapping for a spec's cluster"
    )
    parser.add_argument(
        "spec", type=Path, help="spec (YAML): model, cluster, network, global batch, `search:`"
    )
    parser.add_argument(
        "-o",
        "--output",
        type=Path,
        required=True,
        help="directory for best.yaml, plans.csv, report.md, search.json and plots",
    )
    parser.add_argument(
        "--jobs",
        "-j",
        type=_positive(int),
        default=DEFAULT_JOBS,
        help=f"plans simulated in parallel (local processes; default {DEFAULT_JOBS})",
    )
    parser.add_argument("--ray", metavar="ADDRESS", help="simulate plans as tasks on this Ray cluster")
    parser.add_argument(
        "--time-budget",
        type=_positive(float),
        metavar="SECONDS",
        help="stop simulating after this long (default: search.time_budget_s, else none)",
    )
    parser.add_argument(
        "--max-simulations", type=_positive(int), metavar="N", help="overrides search.max_simulations"
    )
    parser.add_argument(
        "--cache",
        type=Path,
        metavar="DIR",
        help="where simulated plans are kept (default $ASTRA_HETERO_CACHE, else ~/.cache/astra-hetero/plans)",
    )
    parser.add_argument("--no-cache", action="store_true", help="simulate every plan afresh, keep nothing")
    parser.add_argument("--no-plots", action="store_true", help="report.md without figures")
    add_figure_format_argument(parser)
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    add_json_argument(parser, "the search's summary (search.json's content, and the files written)")
    parser.set_defaults(func=plan)


def _positive(kind: type) -> Any:
    """An argparse type: a number of `kind` above zero (else a usage error, exit 2)."""

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be above 0, got {text}")
        return value

    return parse


class _Bar:
    """The search's progress as a rich progress bar: one task per phase."""

    def __init__(self, bar: Any) -> None:
        self.bar, self.task = bar, None

    def phase(self, name: str, total: int | None = None) -> None:
        if self.task is not None:
            self.bar.update(self.task, visible=False)
        self.task = self.bar.add_task(name, total=total)

    def advance(self, count: int = 1, best_us: float | None = None) -> None:
        if self.task is None:
            return
        suffix = f" (best {best_us / 1e3:,.3f} ms)" if best_us is not None else ""
        description = self.bar.tasks[self.task].description.split(" (best")[0] + suffix
        self.bar.update(self.task, advance=count, description=description)


def plan(args: argparse.Namespace) -> int:
    from rich.console import Console

    from astra_hetero.planner.cache import PlanCache, default_cache_dir
    from astra_hetero.planner.driver import find_plans
    from astra_hetero.planner.outputs import write_outputs
    from astra_hetero.planner.problem import load_problem
    from astra_hetero.progress import progress_bar

    problem = load_problem(args.spec)
    if args.max_simulations is not None:
        problem = _with_settings(problem, max_simulations=args.max_simulations)
    cache = PlanCache(None if args.no_cache else (args.cache or default_cache_dir()))
    console = Console()
    with progress_bar(console, args.quiet or args.json, transient=True) as bar:
        report = find_plans(
            problem,
            jobs=args.jobs,
            ray_address=args.ray,
            time_budget_s=args.time_budget,
            cache=cache,
            progress=_Bar(bar),
        )
    written = write_outputs(
        report, args.output, plots=not args.no_plots, fmt=args.figure_format, spec_file=args.spec
    )
    if args.json:
        from astra_hetero.planner.outputs import summary
        from astra_hetero.planner.table import plan_rows

        files = {name: str(path) for name, path in written.items()}
        print_json({**summary(report, plan_rows(report), args.spec), "files": files})
        return 0
    console.print(_summary(report))
    console.print(f"wrote {', '.join(p.name for p in written.values())} in {args.output}")
    return 0


def _with_settings(problem: Any, **changes: Any) -> Any:
    from dataclasses import replace

    return replace(problem, settings=problem.settings.model_copy(update=changes))


def _summary(report: Any) -> Any:
    from rich.table import Table

    from astra_hetero.planner.dimensions import describe_options
    from astra_hetero.planner.table import plan_rows

    search = report.search
    rows = plan_rows(report)
    table = Table(
        title=f"{report.problem.base.name}: {search.num_candidates} candidates, "
        f"{search.num_feasible} feasible, {len(search.trials)} simulated in "
        f"{search.wall_time_s:.1f} s ({search.stopped})"
    )
    for column in ("#", "source", "iteration (ms)", "tokens/s", "tp·pp·dp", "options", "mapping", "layers"):
        table.add_column(column, justify="right" if column in ("#", "iteration (ms)", "tokens/s") else "left")
    for row in rows[:10]:
        v, plan = row.values, row.trial.plan
        table.add_row(
            str(v["rank"]),
            v["source"],
            f"{v['iteration_time_us'] / 1e3:,.3f}" if v["status"] == "ok" else "failed",
            f"{v['tokens_per_s']:,.0f}" if v["status"] == "ok" else "",
            f"{plan.tp}·{plan.pp}·{plan.dp}" + (f" cp{plan.cp}" if plan.cp > 1 else ""),
            describe_options(plan.options),
            plan.mapping_text,
            v["layers"],
        )
    pruned = ", ".join(f"{k} {n}" for k, n in search.tally.by_reason().items()) or "none"
    table.caption = f"pruned: {pruned}"
    if report.speedup is not None and report.baseline_best is not None:
        table.caption += (
            f"\nhomogeneous-assumption baseline {report.baseline_best.time_us / 1e3:,.3f} ms; "
            f"best is {report.speedup:.3f}x as fast"
        )
    return table
