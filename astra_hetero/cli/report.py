"""`astra-hetero report RUN_DIR [RUN_DIR ...]`: tables, a comparison and PNG plots of finished runs.

Each run directory must hold a `result.json` (written by `astra-hetero run`). Runs are labelled by
their directory names; the first run is the reference of the comparison. Outputs (PNGs, report.json,
report.md) are staged and moved into the output directory only when all of them are written.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from pathlib import Path

from astra_hetero.cli.options import add_force_argument
from astra_hetero.errors import RunDirError
from astra_hetero.outputs import publish
from astra_hetero.results.compare import RunSummary, report_json, summarize
from astra_hetero.results.io import read_result
from astra_hetero.results.model import RunResult
from astra_hetero.results.report import comparison_tables, summary_tables, to_markdown, to_text
from astra_hetero.rundir import write_json_atomic, write_text_atomic

REPORT_DIR = "report"
REPORT_ENTRIES = ("report.json", "report.md", "stages.png", "iteration.png")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "report",
        help="summarize and compare finished runs (tables, PNG plots, report.json/.md)",
        description="Summarize one run directory, or compare several (the first is the reference).",
    )
    parser.add_argument(
        "run_dirs", nargs="+", type=Path, metavar="RUN_DIR", help="run directory holding result.json"
    )
    parser.add_argument(
        "-o",
        "--output",
        type=Path,
        default=None,
        metavar="OUT_DIR",
        help="where to write the report (default: RUN_DIR/report for one run, "
        "a 'report' directory beside the first run for several)",
    )
    parser.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    add_force_argument(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    run_dirs: list[Path] = list(args.run_dirs)
    labels = run_labels(run_dirs)
    results = [(label, read_result(run_dir)) for label, run_dir in zip(labels, run_dirs, strict=True)]
    out_dir = args.output or default_output(run_dirs)
    print(report_text(results), end="")
    written = write_report(results, run_dirs, out_dir, plots=not args.no_plots, force=args.force)
    for path in written:
        print(f"wrote {path}")
    return 0


def run_labels(run_dirs: Sequence[Path]) -> list[str]:
    """Directory names; where two runs share a name, the parent directory is prefixed, then a number."""
    paths = [Path(os.path.abspath(d)) for d in run_dirs]  # abspath: no symlink is followed
    names = [p.name for p in paths]
    labels = [f"{p.parent.name}/{n}" if names.count(n) > 1 else n for p, n in zip(paths, names, strict=True)]
    distinct: list[str] = []
    for label in labels:
        candidate, n = label, 2
        while candidate in distinct:
            candidate, n = f"{label}#{n}", n + 1
        distinct.append(candidate)
    return distinct


def default_output(run_dirs: Sequence[Path]) -> Path:
    """RUN_DIR/report, or report/ beside the first run; never a symlink (a report written where no one
    asked must not land outside through one)."""
    if len(run_dirs) == 1:
        path = run_dirs[0] / REPORT_DIR
    else:
        path = Path(os.path.abspath(run_dirs[0])).parent / REPORT_DIR
    if path.is_symlink():
        raise RunDirError(f"{path}: a symlink; give the report's place with -o OUT_DIR")
    return path


def report_text(results: Sequence[tuple[str, RunResult]]) -> str:
    summaries = summarize(results)
    parts = [to_text(summary_tables(s)) for s in summaries]
    if len(summaries) >= 2:
        parts.append(to_text(comparison_tables(summaries)))
    return "\n".join(parts)


def write_report(
    results: Sequence[tuple[str, RunResult]],
    run_dirs: Sequence[Path],
    out_dir: Path,
    plots: bool = True,
    force: bool = False,
) -> list[Path]:
    """Write PNGs (unless `plots` is false), report.json and report.md into `out_dir`, replacing the
    previous report there as a whole; return their paths."""
    summaries = summarize(results)
    with publish(out_dir, force=force, entries=REPORT_ENTRIES) as staging:
        names: list[str] = []
        if plots:
            from astra_hetero.results.plots import write_plots

            names = [p.name for p in write_plots(results, staging)]
        data = report_json(summaries, names)
        for entry, run_dir in zip(data["runs"], run_dirs, strict=True):
            entry["run_dir"] = str(run_dir)
        write_json_atomic(staging / "report.json", data)
        write_text_atomic(staging / "report.md", _markdown(summaries, run_dirs, names))
        written = sorted(p.name for p in staging.iterdir())
    return [out_dir / name for name in written]


def _markdown(summaries: Sequence[RunSummary], run_dirs: Sequence[Path], plots: Sequence[str]) -> str:
    lines = ["# astra-hetero report", ""]
    lines += [
        f"- **{s.label}**: `{run_dir}` ({s.result.backend}, {s.result.num_ranks} ranks)"
        for s, run_dir in zip(summaries, run_dirs, strict=True)
    ]
    sections = ["\n".join(lines) + "\n"]
    if len(summaries) >= 2:
        sections.append("## Comparison\n\n" + to_markdown(comparison_tables(summaries)))
    sections += [f"## {s.label}\n\n" + to_markdown(summary_tables(s)) for s in summaries]
    if plots:
        sections.append("## Plots\n\n" + "\n\n".join(f"![{name}]({name})" for name in plots) + "\n")
    return "\n".join(sections)
