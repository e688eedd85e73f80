"""The product's main path as library calls: spec → run directory → backend → result.json/trace.json."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from astra_hetero import rundir
from astra_hetero.backends.base import create_backend
from astra_hetero.results.io import write_result
from astra_hetero.results.model import RunResult
from astra_hetero.spec.schema import Spec
from astra_hetero.workload.generate import Progress, write_workload

PROGRESS_THRESHOLD_RANKS = 64


@contextmanager
def _progress_bar(total: int, label: str, enabled: bool) -> Iterator[Progress | None]:
    if not enabled or total < PROGRESS_THRESHOLD_RANKS:
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  transient=True) as bar:
        task = bar.add_task(label, total=total)
        yield lambda n: bar.advance(task, n)


def build_run_dir(spec: Spec, out: Path, *, workload: bool = True, topology: bool = True,
                  progress: bool = False) -> rundir.RunDir:
    """Write the requested parts into `out`; nothing of them appears unless all of them were written."""
    out = Path(out)
    with rundir.publish(out) as staging:
        if workload:
            with _progress_bar(spec.cluster.num_gpus, "writing traces", progress) as advance:
                write_workload(spec, staging, advance)
        if topology:
            from astra_hetero.topology import write_topology

            write_topology(spec, staging)
    return rundir.RunDir(out)


def execute(run_dir: Path, backend: str = "embedded", **backend_options: Any) -> RunResult:
    """Run a backend on a complete run directory; write result.json and trace.json only on success."""
    from astra_hetero.results.timeline import write_timeline

    run_dir = Path(run_dir)
    output = create_backend(backend, **backend_options).run(run_dir)
    write_timeline(run_dir / rundir.TIMELINE, output.result, output.spans)
    write_result(run_dir, output.result)
    return output.result
