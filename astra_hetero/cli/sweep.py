"""`astra-hetero sweep SWEEP.yaml -o OUT_DIR [--backend NAME] [--jobs N] [--ray ADDRESS]`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from astra_hetero.backends.base import backend_names
from astra_hetero.bounds import MAX_SWEEP_POINTS as MAX_POINTS
from astra_hetero.cli.options import (
    add_figure_format_argument,
    add_force_argument,
    add_limit_arguments,
    limits_from,
    positive_int,
    positive_seconds,
)
from astra_hetero.cli.run import backend_options
from astra_hetero.results.model import APPROXIMATION

if TYPE_CHECKING:
    from astra_hetero.sweep import PointOutcome


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("sweep", help="run a list or grid of spec variants and tabulate them")
    parser.add_argument("sweep_file", type=Path, help="sweep file (YAML): a base spec plus grid or variants")
    parser.add_argument(
        "-o", "--output", type=Path, required=True, help="directory for the points and sweep.csv"
    )
    parser.add_argument(
        "--backend",
        choices=backend_names(),
        help="simulator for every point (default: the sweep file's, else embedded)",
    )
    parser.add_argument(
        "--jobs", "-j", type=positive_int, default=1, help="points run in parallel (local processes)"
    )
    parser.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="run the points as tasks on this Ray cluster ('auto', 'ray://host:10001'); "
        "OUT_DIR must be visible to every node",
    )
    parser.add_argument("--binary", help="ASTRA-sim binary to use (ASTRA-sim backends)")
    parser.add_argument(
        "--bin-dir", help="directory holding the ASTRA-sim binaries (else $ASTRA_SIM_BIN_DIR, PATH)"
    )
    parser.add_argument("--docker", metavar="IMAGE", help="run the ASTRA-sim binary inside this Docker image")
    parser.add_argument(
        "--timeout", type=positive_seconds, metavar="SECONDS", help="per point (default: the sweep file's)"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument(
        "--max-points",
        type=positive_int,
        default=MAX_POINTS,
        metavar="N",
        help=f"most points a sweep may have (default {MAX_POINTS:,})",
    )
    add_figure_format_argument(parser)
    add_force_argument(parser)
    add_limit_arguments(parser)
    parser.set_defaults(func=sweep)


def sweep(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from astra_hetero.progress import progress_bar
    from astra_hetero.sweep import load_sweep, run_sweep  # here: every command imports this module
    from astra_hetero.sweep.run import CSV_NAME, first_line

    plan = load_sweep(args.sweep_file, args.max_points)
    args.backend = args.backend or plan.backend or "embedded"
    args.timeout = args.timeout if args.timeout is not None else plan.timeout_s
    console = Console()
    with progress_bar(console, args.quiet) as bar:
        task = bar.add_task(f"{plan.name} ({args.backend})", total=len(plan.points))

        def done(outcome: PointOutcome) -> None:
            if not outcome.ok:
                bar.console.print(f"[red]failed[/red] {outcome.name}: {first_line(outcome.error)}")
            bar.advance(task)

        outcomes = run_sweep(
            plan,
            args.output,
            args.backend,
            backend_options(args),
            jobs=args.jobs,
            ray_address=args.ray,
            on_done=done,
            limits=limits_from(args),
            force=args.force,
        )
    table = Table(title=f"{plan.name}: {len(plan.points)} points, backend {args.backend}")
    for column in ("point", "status", "iteration (ms)", "mean idle (ms)", "error"):
        table.add_column(column, justify="right" if "ms" in column else "left")
    for outcome in outcomes:
        metrics = outcome.metrics
        table.add_row(
            outcome.name,
            "ok" if outcome.ok else "failed",
            f"{metrics['iteration_time_us'] / 1e3:.3f}" if outcome.ok else "",
            f"{metrics['mean_idle_us'] / 1e3:.3f}" if outcome.ok else "",
            first_line(outcome.error)[:80],
        )
    console.print(table)
    for line, names in approximations(outcomes).items():  # each distinct line once, whole
        where = "" if len(names) == len(outcomes) else f" [{', '.join(names)}]"
        console.print(line + where, soft_wrap=True, markup=False, highlight=False)
    from astra_hetero.sweep.figure import write_sweep_figure

    figure = write_sweep_figure(plan, outcomes, args.output, args.figure_format)
    num_failed = sum(not outcome.ok for outcome in outcomes)
    failures = f"; {num_failed} point(s) failed" if num_failed else ""
    console.print(f"wrote {args.output / CSV_NAME} and {figure}{failures}")
    return 1 if num_failed else 0


def approximations(outcomes: list[PointOutcome]) -> dict[str, list[str]]:
    """Each distinct approximation line of the points' results -> the points it applies to."""
    found: dict[str, list[str]] = {}
    for outcome in outcomes:
        for warning in outcome.warnings:
            if warning.startswith(APPROXIMATION):
                found.setdefault(warning, []).append(outcome.name)
    return found
