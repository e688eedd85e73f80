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

from astra_hetero.cli.options import (
    add_figure_format_argument,
    add_force_argument,
    add_json_argument,
    print_json,
)
from astra_hetero.errors import RunDirError
from astra_hetero.outputs import publish
from astra_hetero.provenance import KEY as PROVENANCE_KEY
from astra_hetero.provenance import short as short_provenance
from astra_hetero.results.compare import RunSummary, report_json, summarize
from astra_hetero.results.facts import RunFacts, read_facts
from astra_hetero.results.figure_files import FIGURE_FORMATS, markdown_figure
from astra_hetero.results.io import read_result
from astra_hetero.results.jobs_report import run_summary_tables
from astra_hetero.results.model import RunResult
from astra_hetero.results.report import (
    TextTable,
    comparison_tables,
    side_by_side_table,
    to_markdown,
    to_text,
)
from astra_hetero.rundir import write_json_atomic, write_text_atomic

REPORT_DIR = "report"
REPORT_ENTRIES = (
    "report.json",
    "report.md",
    *(f"{name}.{fmt}" for name in ("stages", "iteration") for fmt in FIGURE_FORMATS),
)


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
    parser.add_argument("--no-plots", action="store_true", help="skip the plots")
    add_figure_format_argument(parser)
    add_json_argument(parser, "the report (report.json's content, and the files written)")
    add_force_argument(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    run_dirs: list[Path] = list(args.run_dirs)
    if len(run_dirs) == 1 and overlaid_original(run_dirs[0]) is not None:
        # an imported study with an overlay: the study as given first, then the overlaid one
        return _run(
            args, [overlaid_original(run_dirs[0]), run_dirs[0]], ["original", run_dirs[0].name], run_dirs[0]
        )
    return _run(args, run_dirs, run_labels(run_dirs), None)


def overlaid_original(run_dir: Path) -> Path | None:
    """The study `run_dir` lays an overlay over (its `original/`), once both have a result."""
    original = run_dir / "original"
    overlaid = (run_dir / "overlay.yaml").is_file() and (original / "result.json").is_file()
    return original if overlaid and (run_dir / "result.json").is_file() else None


def _run(args: argparse.Namespace, run_dirs: list[Path], labels: list[str], home: Path | None) -> int:
    results = [(label, read_result(run_dir)) for label, run_dir in zip(labels, run_dirs, strict=True)]
    out_dir = args.output or default_output([home] if home is not None else run_dirs)
    per_rank = home is not None
    facts = [read_facts(run_dir) for run_dir in run_dirs]
    if not args.json:
        print(report_text(results, facts, per_rank), end="")
    written, data = write_report(
        results,
        run_dirs,
        out_dir,
        plots=not args.no_plots,
        force=args.force,
        facts=facts,
        fmt=args.figure_format,
        per_rank=per_rank,
    )
    if args.json:
        print_json({**data, "files": [str(path) for path in written]})
        return 0
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


def report_text(
    results: Sequence[tuple[str, RunResult]], facts: Sequence[RunFacts] = (), per_rank: bool = False
) -> str:
    summaries = summarize(results)
    facts = list(facts) or [RunFacts()] * len(summaries)
    parts = [to_text(run_summary_tables(s, f)) for s, f in zip(summaries, facts, strict=True)]
    if len(summaries) >= 2:
        parts.append(to_text(_comparison(summaries, per_rank)))
    parts.append(to_text([provenance_table(summaries)]))
    return "\n".join(parts)


def provenance_table(summaries: Sequence[RunSummary]) -> TextTable:
    """What produced each run (astra_hetero/provenance.py): tool, backend, binary or image, spec hash."""
    rows = []
    for summary in summaries:
        facts = short_provenance(summary.result.meta.get(PROVENANCE_KEY))
        rows += [(summary.label, key, value) for key, value in facts.items()]
    return TextTable("provenance", ("run", "", "what produced it"), tuple(rows), wrap=(2,))


def _comparison(summaries: Sequence[RunSummary], per_rank: bool) -> list:
    tables = comparison_tables(summaries)
    if per_rank and len(summaries) == 2:
        tables.append(side_by_side_table(*summaries))
    return tables


def write_report(
    results: Sequence[tuple[str, RunResult]],
    run_dirs: Sequence[Path],
    out_dir: Path,
    plots: bool = True,
    force: bool = False,
    facts: Sequence[RunFacts] = (),
    fmt: str = "png",
    per_rank: bool = False,
) -> tuple[list[Path], dict]:
    """Write PNGs (unless `plots` is false), report.json and report.md into `out_dir`, replacing the
    previous report there as a whole; return their paths and report.json's content."""
    summaries = summarize(results)
    with publish(out_dir, force=force, entries=REPORT_ENTRIES) as staging:
        names: list[str] = []
        if plots:
            from astra_hetero.results.plots import write_plots

            names = [p.name for p in write_plots(results, staging, fmt)]
        data = report_json(summaries, names)
        facts = list(facts) or [RunFacts()] * len(run_dirs)
        for entry, run_dir, run_facts in zip(data["runs"], run_dirs, facts, strict=True):
            entry["run_dir"] = str(run_dir)
            entry["simulated"] = run_facts.to_json()
            entry["provenance"] = summary_provenance(entry["label"], results)
        write_json_atomic(staging / "report.json", data)
        write_text_atomic(staging / "report.md", _markdown(summaries, run_dirs, names, facts, per_rank))
        written = sorted(p.name for p in staging.iterdir())
    return [out_dir / name for name in written], data


def summary_provenance(label: str, results: Sequence[tuple[str, RunResult]]) -> dict | None:
    return next((r.meta.get(PROVENANCE_KEY) for name, r in results if name == label), None)


def _markdown(
    summaries: Sequence[RunSummary],
    run_dirs: Sequence[Path],
    plots: Sequence[str],
    facts: Sequence[RunFacts] = (),
    per_rank: bool = False,
) -> str:
    facts = list(facts) or [RunFacts()] * len(summaries)
    lines = ["# astra-hetero report", ""]
    lines += [
        f"- **{s.label}**: `{run_dir}` ({s.result.backend}, {s.result.num_ranks} ranks)"
        for s, run_dir in zip(summaries, run_dirs, strict=True)
    ]
    sections = ["\n".join(lines) + "\n"]
    if len(summaries) >= 2:
        sections.append("## Comparison\n\n" + to_markdown(_comparison(summaries, per_rank)))
    sections += [
        f"## {s.label}\n\n" + to_markdown(run_summary_tables(s, f))
        for s, f in zip(summaries, facts, strict=True)
    ]
    sections.append("## Provenance\n\n" + to_markdown([provenance_table(summaries)]))
    if plots:
        sections.append("## Plots\n\n" + "\n\n".join(markdown_figure(name) for name in plots) + "\n")
    return "\n".join(sections)
