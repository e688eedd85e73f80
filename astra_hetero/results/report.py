"""Text reports of one run or several: compact tables as plain text (rich) or as Markdown.

Tables are built once as plain rows (`TextTable`) and rendered either way, so the terminal output and
report.md always show the same numbers. Rows are per stage and per GPU type, never per rank, so a
1024-rank run still fits on a screen. All times in a table share one unit, chosen from its largest value.
"""

from __future__ import annotations

import dataclasses
import io
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from rich import box
from rich.console import Console
from rich.table import Table

from astra_hetero.results.aggregate import GroupStats, Spread
from astra_hetero.results.compare import (
    ASTRA_SPLIT_KEY,
    RunSummary,
    all_gpus,
    all_stages,
    splits_differ,
    summarize,
)
from astra_hetero.results.facts import RunFacts, fact_lines
from astra_hetero.results.model import RunResult
from astra_hetero.results.throughput import throughput_line

WIDTH = 80  # every table fits an 80-column terminal; list cells (GPUs, ranks, links) wrap inside it
_UNITS = ((1e6, "s"), (1e3, "ms"), (1.0, "µs"))
SPREAD_CAPTION = (
    "Each time is the mean over the group's ranks, with the lowest–highest rank below it where they "
    "differ. exposed comm: communicating while no compute runs; idle: neither (pipeline bubbles, "
    "waiting for peers or for the slowest rank)."
)
ASTRA_SPREAD_CAPTION = (
    "Each time is the mean over the group's ranks, with the lowest–highest rank below it where they "
    "differ. As ASTRA-sim reports them, exposed comm is the rank's finish minus its compute (pipeline "
    "bubbles and waiting on peers included); idle is the time after the rank finished."
)
IDLE_PERCENT = "idle %"


@dataclass(frozen=True)
class TextTable:
    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    caption: str = ""
    notes: tuple[str, ...] = ()  # lines printed after the caption, each on its own line
    lead: tuple[str, ...] = ()  # lines between the title and the table (they may wrap)
    wrap: tuple[int, ...] = ()  # columns whose cells are lists and may wrap to fit the width


def render_summary(
    result: RunResult, label: str = "", facts: RunFacts | None = None, width: int = WIDTH
) -> str:
    """What was simulated and how well it uses the hardware, then per-stage and per-GPU-type
    compute, exposed communication and idle time."""
    return to_text(summary_tables(summarize([(label or result.backend, result)])[0], facts), width)


def compare_runs(results: Sequence[tuple[str, RunResult]]) -> str:
    """Iteration times side by side (ratio to the first run), per-stage time, idle by GPU type."""
    return to_text(comparison_tables(summarize(results)))


def summary_tables(summary: RunSummary, facts: RunFacts | None = None) -> list[TextTable]:
    result = summary.result
    scale, unit = time_unit(result.iteration_time_us)
    spread_columns = (f"compute\n({unit})", f"exposed\ncomm ({unit})", f"idle\n({unit})")
    title = (
        f"{summary.label}: {result.backend} backend, {result.num_ranks} ranks, "
        f"iteration {format_number(result.iteration_time_us / scale)} {unit}"
    )
    lead = tuple(line for line in (*fact_lines(facts or RunFacts()), throughput_line(result)) if line)
    by_stage = TextTable(
        title=title,
        lead=lead,
        # shown whole, each on a line of its own
        notes=(
            *([f"{len(result.warnings)} warning(s) in result.json"] if result.warnings else []),
            *result.approximations,
        ),
        columns=("stage", "ranks", "GPUs", *spread_columns),
        rows=tuple(
            (g.label, str(g.num_ranks), ", ".join(g.gpus), *_spreads(g, scale)) for g in summary.stages
        ),
        caption=ASTRA_SPREAD_CAPTION if ASTRA_SPLIT_KEY in result.meta else SPREAD_CAPTION,
        wrap=(2,),
    )
    iteration = result.iteration_time_us
    by_gpu = TextTable(
        title=f"{summary.label}: by GPU type",
        columns=("GPU", "ranks", "stages", *spread_columns, IDLE_PERCENT),
        rows=tuple(
            (
                g.label,
                str(g.num_ranks),
                _ranges(g.stages),
                *_spreads(g, scale),
                f"{g.idle_us.mean / iteration:.0%}" if iteration > 0 else "-",
            )
            for g in summary.gpus
        ),
        caption=f"{IDLE_PERCENT}: the mean idle time of the type's ranks as a share of the iteration.",
        wrap=(2,),
    )
    return [by_stage, by_gpu, *_dynamics_tables(result, scale, unit)]


def _dynamics_tables(result: RunResult, scale: float, unit: str) -> list[TextTable]:
    """Each iteration's time, and which ranks and links each dynamics event touched."""
    tables = []
    if len(result.iterations) > 1:
        tables.append(
            TextTable(
                title=f"{len(result.iterations)} iterations (iteration time above is their mean)",
                columns=("iteration", f"time ({unit})"),
                rows=tuple(
                    (str(it["index"]), format_number(it["time_us"] / scale)) for it in result.iterations
                ),
            )
        )
    if result.events:
        tables.append(
            TextTable(
                title="dynamics events",
                columns=("event", "from (ms)", "to (ms)", "ranks", "topology.txt link lines"),
                wrap=(3, 4),
                rows=tuple(
                    (
                        f"[{e['index']}] {e['event']}",
                        format_number(e["start_us"] / 1000),
                        "end" if e["end_us"] is None else format_number(e["end_us"] / 1000),
                        _ranges(e["ranks"]) or "-",
                        _ranges(e["links"]) or "-",
                    )
                    for e in result.events
                ),
            )
        )
    return tables


def comparison_tables(summaries: Sequence[RunSummary]) -> list[TextTable]:
    labels = tuple(s.label for s in summaries)
    scale, unit = time_unit(max(s.result.iteration_time_us for s in summaries))
    iteration = TextTable(
        title=f"iteration time (reference: {labels[0]})",
        columns=("run", "backend", "ranks", f"iteration ({unit})", "ratio to first"),
        rows=tuple(
            (
                s.label,
                s.result.backend,
                str(s.result.num_ranks),
                format_number(s.result.iteration_time_us / scale),
                _ratio(s.ratio_to_first),
            )
            for s in summaries
        ),
    )
    if splits_differ(summaries):
        return [dataclasses.replace(iteration, notes=(MIXED_SPLITS,)), *_mixed_split_tables(summaries)]
    stages = TextTable(
        title=f"per-stage busy time ({unit}): compute + exposed comm, mean over the stage's ranks",
        columns=("stage", *labels),
        rows=tuple(
            (f"stage {stage}", *(_busy(s.stage(stage), scale) for s in summaries))
            for stage in all_stages(summaries)
        ),
    )
    idle = TextTable(
        title=f"where the idle time sits: mean idle per rank ({unit}) and share of the run's idle",
        columns=("GPU", *labels),
        rows=tuple((gpu, *(_idle_cell(s, gpu, scale) for s in summaries)) for gpu in all_gpus(summaries)),
    )
    return [iteration, stages, idle]


def side_by_side_table(before: RunSummary, after: RunSummary) -> TextTable:
    """Each rank's compute, exposed communication and idle in two runs of the same ranks (a study and
    the study with an overlay), ranks with the same six figures on one row."""
    scale, unit = time_unit(max(before.result.iteration_time_us, after.result.iteration_time_us))
    rows: dict[tuple[str, ...], list[int]] = {}
    for a, b in zip(before.result.ranks, after.result.ranks, strict=True):
        cells = tuple(
            f"{format_number(getattr(a, key) / scale)} → {format_number(getattr(b, key) / scale)}"
            for key in ("compute_us", "exposed_comm_us", "idle_us")
        )
        rows.setdefault((b.gpu, *cells), []).append(a.rank)
    return TextTable(
        title=f"per rank, {before.label} → {after.label} ({unit})",
        columns=("ranks", "GPU", "compute", "exposed comm", "idle"),
        rows=tuple((_ranges(ranks), *key) for key, ranks in sorted(rows.items(), key=lambda kv: kv[1][0])),
        caption="ranks with the same figures in both runs share a row",
        wrap=(1,),  # a long GPU label wraps; the before → after figures stay whole
    )


MIXED_SPLITS = (
    "These runs come from backends that split the time a rank is not computing differently: "
    "ASTRA-sim's exposed communication is a rank's finish minus its compute, so it includes pipeline "
    "bubbles and waiting on peers, and its idle time is only what follows the rank's finish; the "
    "embedded engine counts as exposed only communication with no compute running, and the bubbles "
    "as idle. Idle or exposed communication of one would be misread against the other, so the "
    "tables compare compute and the time not computing (exposed comm + idle), which mean the same on both."
)


def _mixed_split_tables(summaries: Sequence[RunSummary]) -> list[TextTable]:
    labels = tuple(s.label for s in summaries)
    scale, unit = time_unit(max(s.result.iteration_time_us for s in summaries))

    def cell(group: GroupStats | None, of: str) -> str:
        if group is None:
            return "-"
        value = group.compute_us.mean if of == "compute" else group.exposed_comm_us.mean + group.idle_us.mean
        return format_number(value / scale)

    stages = TextTable(
        title=f"per-stage compute ({unit}), mean over the stage's ranks",
        columns=("stage", *labels),
        rows=tuple(
            (f"stage {stage}", *(cell(s.stage(stage), "compute") for s in summaries))
            for stage in all_stages(summaries)
        ),
    )
    waiting = TextTable(
        title=f"time not computing ({unit}): exposed comm + idle, mean per rank of each GPU type",
        columns=("GPU", *labels),
        rows=tuple(
            (gpu, *(cell(next((g for g in s.gpus if g.label == gpu), None), "waiting") for s in summaries))
            for gpu in all_gpus(summaries)
        ),
    )
    return [stages, waiting]


def time_unit(largest_us: float) -> tuple[float, str]:
    """(divisor, name) of the unit that shows `largest_us` with at most three integer digits."""
    return next(((scale, name) for scale, name in _UNITS if abs(largest_us) >= scale), _UNITS[-1])


def to_text(tables: Iterable[TextTable], width: int = WIDTH) -> str:
    buffer = io.StringIO()
    console = Console(
        file=buffer, width=width, color_system=None, force_terminal=False, highlight=False, emoji=False
    )
    for table in tables:
        # Title and caption are printed apart from the table so that they never wrap to its width.
        console.print(table.title, markup=False)
        for line in table.lead:
            console.print(line, markup=False)
        rich_table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
        for i, column in enumerate(table.columns):
            wraps = i in table.wrap
            rich_table.add_column(
                column, justify="left" if i == 0 or wraps else "right", no_wrap=not wraps, overflow="fold"
            )  # a header may hold a line break ("exposed\ncomm (ms)"): narrower columns
        for row in table.rows:
            rich_table.add_row(*row)
        console.print(rich_table)
        if table.caption:
            console.print(table.caption + "\n", markup=False)
        for note in table.notes:  # soft_wrap: a note stays one line however long
            console.print(note + "\n", soft_wrap=True, markup=False)
    return _tidy(buffer.getvalue())


def _tidy(text: str) -> str:
    """Strip rich's right padding and keep at most one blank line in a row."""
    lines: list[str] = []
    for line in (raw.rstrip() for raw in text.splitlines()):
        if line or (lines and lines[-1]):
            lines.append(line)
    return "\n".join(lines).rstrip() + "\n"


def to_markdown(tables: Iterable[TextTable]) -> str:
    parts: list[str] = []
    for table in tables:
        lines = [f"### {table.title}", ""]
        lines += [line for lead in table.lead for line in (lead, "")]
        lines += [
            "| " + " | ".join(c.replace("\n", " ") for c in table.columns) + " |",
            "|" + "|".join(["---"] + ["---:"] * (len(table.columns) - 1)) + "|",
        ]
        lines += [
            "| " + " | ".join(cell.replace("|", "\\|").replace("\n", "<br>") for cell in row) + " |"
            for row in table.rows
        ]
        if table.caption:
            lines += ["", table.caption]
        lines += [line for note in table.notes for line in ("", f"> {note}")]
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"


def _spreads(group: GroupStats, scale: float) -> tuple[str, str, str]:
    return (
        _spread(group.compute_us, scale),
        _spread(group.exposed_comm_us, scale),
        _spread(group.idle_us, scale),
    )


def _spread(spread: Spread, scale: float) -> str:
    """The mean, and below it the lowest–highest where they differ at the precision shown."""
    mean, low, high = (format_number(v / scale) for v in (spread.mean, spread.min, spread.max))
    return mean if low == high else f"{mean}\n{low}–{high}"


def format_number(value: float) -> str:
    """Four significant digits without an exponent: 612.3, 61.23, 6.123, 0.6123 (at most 4 decimals)."""
    if not math.isfinite(value):  # a sweep value written as .inf/.nan: shown as given, not a crash
        return str(value)
    if round(value, 4) == 0:  # 3e-6 is a rounding residue at four decimals, not "0.0000"
        return "0"
    integer_digits = math.floor(math.log10(abs(value))) + 1
    return f"{value:,.{min(max(4 - integer_digits, 1), 4)}f}"


def _ranges(values: Sequence[int]) -> str:
    """Compact list of integers: (0, 1, 2, 5) -> '0-2, 5'."""
    runs: list[list[int]] = []
    for value in values:
        if runs and value == runs[-1][-1] + 1:
            runs[-1].append(value)
        else:
            runs.append([value])
    return ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)


def _ratio(ratio: float) -> str:
    return "n/a" if math.isnan(ratio) else f"{ratio:.3f}x"


def _busy(group: GroupStats | None, scale: float) -> str:
    return "-" if group is None else format_number(group.busy_us / scale)


def _idle_cell(summary: RunSummary, gpu: str, scale: float) -> str:
    group = next((g for g in summary.gpus if g.label == gpu), None)
    if group is None:
        return "-"
    return f"{format_number(group.idle_us.mean / scale)} ({summary.idle_share_by_gpu[gpu]:.0%})"
