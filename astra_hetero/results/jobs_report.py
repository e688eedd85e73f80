"""Tables of a run of several jobs sharing a cluster: each job's iteration time together and alone and
the slowdown, each job's stages as a run of its own, and the links the jobs shared and how busy they
were. A run of one job gets the ordinary summary (`report.summary_tables`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from astra_hetero.results.compare import RunSummary, summarize
from astra_hetero.results.facts import RunFacts
from astra_hetero.results.jobs import job_result
from astra_hetero.results.model import RunResult
from astra_hetero.results.report import TextTable, format_number, summary_tables, time_unit, to_text

MAX_LINK_ROWS = 12  # shared-link groups shown (result.json holds up to 64)


def run_summary_tables(summary: RunSummary, facts: RunFacts | None = None) -> list[TextTable]:
    """The summary of one run: per job and shared links for several jobs, else the ordinary one
    (`facts`: what the run directory's manifest says was simulated)."""
    if not summary.result.jobs:
        return summary_tables(summary, facts)
    result = summary.result
    tables = [jobs_table(summary.label, result)]
    for job in result.jobs:
        alone = job_result(result, job["name"])
        stage_table, *_ = summary_tables(summarize([(f"{summary.label} / {job['name']}", alone)])[0])
        tables.append(stage_table)
    if result.shared_links:
        tables.append(shared_links_table(result))
    whole = dataclasses.replace(summary, result=dataclasses.replace(result, iterations=()))
    _, by_gpu, *dynamics = summary_tables(whole)
    return [*tables, by_gpu, *dynamics]


def render_run_summary(result: RunResult, label: str = "", facts: RunFacts | None = None) -> str:
    return to_text(run_summary_tables(summarize([(label or result.backend, result)])[0], facts))


def jobs_table(label: str, result: RunResult) -> TextTable:
    times = [j["iteration_time_us"] for j in result.jobs] + [
        j.get("solo_iteration_time_us") or 0 for j in result.jobs
    ]
    scale, unit = time_unit(max(times))
    rows = []
    for job in result.jobs:
        alone = job.get("solo_iteration_time_us")
        slowdown = job.get("slowdown")
        rows.append(
            (
                job["name"],
                _ranges(job["ranks"]),
                format_number(job["start_us"] / 1000),
                str(len(job["iterations"])),
                format_number(job["iteration_time_us"] / scale),
                "-" if alone is None else format_number(alone / scale),
                "-" if slowdown is None else f"{slowdown - 1:+.1%}",
            )
        )
    solo_note = (
        "alone: the same job simulated by itself on the same cluster (same GPUs, same start, same events)"
        if any("solo_iteration_time_us" in j for j in result.jobs)
        else "alone: not simulated (run with the solo runs on: without --no-solo)"
    )
    return TextTable(
        title=f"{label}: {result.backend}, {len(result.jobs)} jobs on {result.num_ranks} GPUs; run span "
        f"{format_number(result.iteration_time_us / scale)} {unit}",
        columns=(
            "job",
            "ranks",
            "start (ms)",
            "iterations",
            f"together ({unit})",
            f"alone ({unit})",
            "slowdown",
        ),
        rows=tuple(rows),
        caption=f"mean iteration times; {solo_note}",
        notes=result.approximations,
    )


def shared_links_table(result: RunResult) -> TextTable:
    names = [j["name"] for j in result.jobs]
    links = result.shared_links[:MAX_LINK_ROWS]
    more = len(result.shared_links) - len(links)
    return TextTable(
        title="links the jobs shared (busiest first)",
        columns=("kind", "Gbit/s", "topology.txt lines", "busy", *(f"{n} (GB)" for n in names)),
        rows=tuple(
            (
                link["kind"] or "-",
                format_number(link["gbps"]),
                _lines(link),
                f"{link['busy']:.1%}",
                *(format_number(link["bytes"].get(n, 0) / 1e9) for n in names),
            )
            for link in links
        ),
        caption="busy: bytes carried over capacity × the run's span, per link of the group (lines with the "
        "same kind, rate and bytes of each job); bytes as the engine moves them (NCCL's unachieved "
        "bandwidth and protocol overhead included)"
        + (f"; {more} more groups in result.json" if more else ""),
    )


def _lines(link: dict) -> str:
    shown = _ranges([[line, line + 1] for line in link["lines"]])
    return shown if link["num_lines"] == len(link["lines"]) else f"{shown}, … ({link['num_lines']} lines)"


def _ranges(ranges: Sequence[Sequence[int]]) -> str:
    """[first, end) ranges as '0-7, 16-23' (adjacent ranges joined)."""
    joined: list[list[int]] = []
    for first, end in ranges:
        if joined and joined[-1][1] == first:
            joined[-1][1] = end
        else:
            joined.append([first, end])
    return ", ".join(str(a) if b - a == 1 else f"{a}-{b - 1}" for a, b in joined)
