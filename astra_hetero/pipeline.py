"""The product's main path as library calls: spec → run directory → backend → result.json/trace.json."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from astra_hetero import rundir
from astra_hetero.backends.base import create_backend
from astra_hetero.results.io import write_result
from astra_hetero.results.model import RunResult, SharedSpans, Span

if TYPE_CHECKING:  # imported where used: `run RUN_DIR` needs neither the spec schema nor the generator
    from astra_hetero.spec.schema import Spec
    from astra_hetero.workload.generate import Progress

PROGRESS_THRESHOLD_RANKS = 64


@contextmanager
def _progress_bar(total: int, label: str, enabled: bool) -> Iterator[Progress | None]:
    if not enabled or total < PROGRESS_THRESHOLD_RANKS:
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        transient=True,
    ) as bar:
        task = bar.add_task(label, total=total)
        yield lambda n: bar.advance(task, n)


def build_run_dir(
    spec: Spec, out: Path, *, workload: bool = True, topology: bool = True, progress: bool = False
) -> rundir.RunDir:
    """Write the requested parts into `out`; nothing of them appears unless all of them were written."""
    from astra_hetero.workload.generate import write_workload

    out = Path(out)
    with rundir.publish(out) as staging:
        if workload:
            with _progress_bar(spec.cluster.num_gpus, "writing traces", progress) as advance:
                write_workload(spec, staging, advance)
        if topology:
            from astra_hetero.topology import write_topology

            write_topology(spec, staging)
    return rundir.RunDir(out)


# Above this many spans trace.json grows past what timeline viewers open comfortably (~100 MB).
MAX_TIMELINE_SPANS = 400_000
TIMELINE_MODES = ("auto", "all", "none")


def execute(
    run_dir: Path, backend: str = "embedded", timeline: str = "auto", **backend_options: Any
) -> RunResult:
    """Run a backend on a complete run directory; write result.json (and trace.json) only on success.

    `timeline`: "all" keeps every span, "none" writes no trace.json, "auto" keeps every span of small
    runs and, past MAX_TIMELINE_SPANS, the spans of representative ranks (see `sample_spans`).
    """
    from astra_hetero.results.timeline import write_timeline

    if timeline not in TIMELINE_MODES:
        raise ValueError(f"timeline must be one of {', '.join(TIMELINE_MODES)}, not {timeline!r}")
    run_dir = Path(run_dir)
    if backend == "embedded":
        backend_options = {**backend_options, "timeline": timeline != "none"}
    output = create_backend(backend, **backend_options).run(run_dir)
    if timeline != "none":
        spans, note = output.spans, ""
        if timeline == "auto" and len(spans) > MAX_TIMELINE_SPANS:
            spans, note = sample_spans(output.result, spans, MAX_TIMELINE_SPANS)
        write_timeline(run_dir / rundir.TIMELINE, output.result, spans, note)
    write_result(run_dir, output.result)
    return output.result


def sample_spans(result: RunResult, spans: Sequence[Span], limit: int) -> tuple[tuple[Span, ...], str]:
    """Spans of the TP-index-0 rank of every pipeline cell (its TP peers run in lockstep), thinned
    further by a stride over those ranks if that is still more than `limit`."""
    leaders = [r.rank for r in result.ranks if r.tp_index in (0, None)]
    per_rank = len(spans) / max(result.num_ranks, 1)
    stride = max(1, math.ceil(len(leaders) * per_rank / limit))
    kept = set(leaders[::stride])
    chosen = (
        spans.for_ranks(kept) if isinstance(spans, SharedSpans) else tuple(s for s in spans if s.rank in kept)
    )
    note = (
        f"{len(kept)} of {result.num_ranks} ranks shown (TP index 0 of each pipeline cell"
        f"{f', every {stride}th' if stride > 1 else ''}); run with --timeline all for every rank"
    )
    return chosen, note
