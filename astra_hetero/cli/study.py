"""`astra-hetero study STUDY.yaml -o OUT [--backend NAME] [--docker IMAGE] [--jobs N] [--ray ADDRESS]`."""

from __future__ import annotations

import argparse
from pathlib import Path

from astra_hetero.backends.base import backend_names
from astra_hetero.bounds import MAX_SWEEP_POINTS
from astra_hetero.cli.options import add_figure_format_argument, positive_int
from astra_hetero.cli.run import add_astrasim_options


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "study", help="run a study (points over a base spec), tabulate it and write its report with figures"
    )
    parser.add_argument("study_file", type=Path, help="study file (YAML): base spec, axes, tables, figures")
    parser.add_argument(
        "-o",
        "--output",
        type=Path,
        required=True,
        help="directory for points/, results.csv, report.md and the figures",
    )
    parser.add_argument(
        "--backend",
        choices=backend_names(),
        help="simulator for points that pin none (default: the study file's, else embedded)",
    )
    parser.add_argument(
        "--reduced",
        action="store_true",
        help="run the study's reduced version (fewer points or a cut-down workload)",
    )
    parser.add_argument("--jobs", "-j", type=int, default=1, help="points run in parallel (local processes)")
    parser.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="run the points as tasks on this Ray cluster; OUT must be visible to every node",
    )
    add_astrasim_options(parser, timeout_help="per point, ASTRA-sim backends (default: the study file's)")
    parser.add_argument(
        "--check",
        nargs="?",
        const=CHECK_AUTO,
        metavar="EXPERIMENTS",
        help="afterwards compare the study's numbers with those the experiments list expects, PASS/FAIL per "
        "number, exit 1 if any fails (default list: experiments.yaml beside the study file or above it)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    add_figure_format_argument(parser)
    parser.add_argument(
        "--max-points",
        type=positive_int,
        default=MAX_SWEEP_POINTS,
        metavar="N",
        help=f"most points a study may have, refused before any runs (default {MAX_SWEEP_POINTS:,})",
    )
    parser.set_defaults(func=study)


CHECK_AUTO = "auto"


def study(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape

    from astra_hetero.progress import progress_bar
    from astra_hetero.studies import build_table, load_study, run_study, write_report
    from astra_hetero.studies.run import StudyOutcome
    from astra_hetero.sweep.run import first_line

    plan = load_study(args.study_file, reduced=args.reduced, max_points=args.max_points)
    # a bad list, or one with no numbers for this run, is refused before anything runs
    expected = _expected(args, args.backend or plan.file.backend or "embedded") if args.check else None
    options = {
        "binary": args.binary,
        "bin_dir": args.bin_dir,
        "docker_image": args.docker,
        "timeout_s": args.timeout if args.timeout is not None else plan.file.timeout_s,
    }
    console = Console()
    label = f"{plan.name}{' (reduced)' if args.reduced else ''}"
    with progress_bar(console, args.quiet) as bar:
        task = bar.add_task(label, total=len(plan.points))

        def done(outcome: StudyOutcome) -> None:
            if not outcome.ok:
                bar.console.print(f"[red]failed[/red] {outcome.point.name}: {first_line(outcome.error)}")
            bar.advance(task)

        outcomes = run_study(
            plan, args.output, args.backend, options, jobs=args.jobs, ray_address=args.ray, on_outcome=done
        )
    table = build_table(plan, outcomes)
    files = write_report(table, args.output, args.study_file, fmt=args.figure_format)
    num_failed = sum(not row.ok for row in table.rows)
    num_resumed = sum(o.resumed for o in outcomes)
    console.print(
        f"{label}: {len(outcomes)} points, {len(outcomes) - num_failed} ok"
        + (f", {num_failed} failed" if num_failed else "")
        + (f" ({num_resumed} complete from an earlier run, not run again)" if num_resumed else "")
    )
    console.print(f"results: {files.csv}")
    console.print(f"report:  {files.report}")
    if files.figures:
        console.print(f"figures: {', '.join(str(p) for p in files.figures)}")
    for name, why in files.skipped_figures:
        console.print(f"[yellow]figure {name!r} not drawn: {escape(why)}[/yellow]", highlight=False)
    code = 1 if num_failed else 0
    if expected is not None:
        from astra_hetero.studies.expectations import check_lines, check_values, table_values

        experiment_id, variant, items = expected
        checks = check_values(items, table_values(table.rows, list(table.columns)))
        console.file.flush()
        print("\n".join(check_lines(experiment_id, variant, checks)), flush=True)  # unwrapped lines
        code = code or (0 if all(c.ok for c in checks) else 1)
    return code


def _expected(args: argparse.Namespace, backend: str) -> tuple[str, str, list]:
    """(experiment id, "full" | "reduced" and the backend, expected numbers) of the study file in the
    experiments list."""
    from astra_hetero.errors import SpecError
    from astra_hetero.studies.expectations import experiment_for, find_list, for_backend, load_experiments

    path = find_list(args.study_file, None if args.check == CHECK_AUTO else Path(args.check))
    experiment = experiment_for(load_experiments(path), path, args.study_file)
    variant = experiment.reduced if args.reduced else experiment
    name = "reduced" if args.reduced else "full"
    if variant is None:
        raise SpecError("--check", f"{path}: experiment {experiment.id} lists no numbers for --reduced")
    items = for_backend(experiment, variant, backend)
    if not items:
        raise SpecError(
            "--check", f"{path}: experiment {experiment.id} ({name}) lists no numbers for backend {backend}"
        )
    return experiment.id, f"{name}, {backend}", items
