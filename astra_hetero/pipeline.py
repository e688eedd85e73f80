"""The product's main path as library calls: spec → run directory → backend → result.json/trace.json.

Every call publishes one consistent state of its run directory (see outputs.py): `build_run_dir`
writes inputs, `execute` adds a result to existing inputs, `run_spec` does both in one step.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from astra_hetero import provenance, rundir
from astra_hetero.backends.base import create_backend
from astra_hetero.bounds import WorkLimits, check_work
from astra_hetero.errors import BackendFailed, RunDirError
from astra_hetero.outputs import RUN_PARTS, OutputStaging, publish_output
from astra_hetero.progress import progress_bar
from astra_hetero.results.io import check_result, relocate, write_result
from astra_hetero.results.jobs import with_job_throughput
from astra_hetero.results.model import APPROXIMATION, RunOutput, RunResult, SharedSpans, Span
from astra_hetero.results.throughput import with_throughput
from astra_hetero.side_build import SIDE_BUILD_MIN_GPUS, SideBuild, can_fork

logger = logging.getLogger(__name__)

if TYPE_CHECKING:  # imported where used: `run RUN_DIR` needs neither the spec schema nor the generator
    from astra_hetero.spec.schema import Spec
    from astra_hetero.spec.schema.jobs import SharedClusterSpec
    from astra_hetero.workload.generate import Progress

    RunSpec = Spec | SharedClusterSpec  # one job, or several sharing the cluster (`jobs:`)

PROGRESS_THRESHOLD_RANKS = 64


@contextmanager
def _progress_bar(total: int, label: str, enabled: bool) -> Iterator[Progress | None]:
    if not enabled or total < PROGRESS_THRESHOLD_RANKS:
        yield None
        return
    with progress_bar(transient=True) as bar:
        task = bar.add_task(label, total=total)
        yield lambda n: bar.advance(task, n)


def topology_inputs(spec: RunSpec) -> str:
    """Fingerprint of what the workload and topology parts of a run directory must agree on."""
    data = {"cluster": spec.cluster.model_dump(mode="json"), "network": spec.network.model_dump(mode="json")}
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


@contextmanager
def run_dir_staging(out: Path, force: bool = False, foreign_ok: bool = False) -> Iterator[OutputStaging]:
    """A new state of the run directory `out`, published whole when the block ends without error."""
    # running a plain input directory keeps its inputs: only the result's names would be replaced
    replaced = RUN_PARTS["result"] if foreign_ok else None
    with publish_output(
        Path(out), RUN_PARTS, force=force, what="run directory", foreign_ok=foreign_ok, replaced=replaced
    ) as run:
        yield run


def build_run_dir(
    spec: RunSpec,
    out: Path,
    *,
    workload: bool = True,
    topology: bool = True,
    progress: bool = False,
    limits: WorkLimits | None = None,
    force: bool = False,
    draw: str | None = None,
    per_rank: bool = False,
) -> rundir.RunDir:
    """Write the requested parts into `out`, published in one step with the old parts that still match
    them (a workload and a topology built from the same cluster and network); old results are dropped.
    `per_rank`: also write every rank's trace file (`workload/workload.<rank>.et`) beside the traces by
    class (ASTRA-sim's backends write them on demand)."""
    _check_work(spec, limits or WorkLimits(), workload=workload, topology=topology, per_rank=per_rank)
    with run_dir_staging(out, force) as run:
        build_into(
            run, spec, workload=workload, topology=topology, progress=progress, draw=draw, per_rank=per_rank
        )
    return rundir.RunDir(Path(out))


def _check_work(
    spec: RunSpec, limits: WorkLimits, *, workload: bool = True, topology: bool = True, per_rank: bool = False
) -> None:
    """`per_rank`: the traces will be written (or simulated) rank by rank, not by class."""
    if _is_shared(spec):
        from astra_hetero.jobs.build import check_shared_work

        check_shared_work(spec, limits, workload=workload, topology=topology)  # type: ignore[arg-type]
    else:
        check_work(spec, limits, workload=workload, topology=topology, per_rank=per_rank)  # type: ignore[arg-type]


def _is_shared(spec: RunSpec) -> bool:
    """A spec of several jobs sharing the cluster (`jobs:`)."""
    return hasattr(spec, "jobs")


def build_into(
    run: OutputStaging,
    spec: RunSpec,
    *,
    workload: bool,
    topology: bool,
    progress: bool,
    draw: str | None = None,
    per_rank: bool = False,
) -> None:
    """`draw`: also draw the cluster, as that figure format (png, svg, pdf); `per_rank`: see
    `build_run_dir`."""
    inputs = topology_inputs(spec)
    logger.info(
        "building %s%s%s",
        "the workload" if workload else "",
        " and " if workload and topology else "",
        "the network" if topology else "",
    )
    side = None
    if workload and topology and draw is None and spec.cluster.num_gpus >= SIDE_BUILD_MIN_GPUS and can_fork():
        # a large cluster: the network part is built in a forked process beside the workload
        side = SideBuild(lambda path: _write_topology(spec, path, None), run.path)
    try:
        if workload:
            run.write("workload", inputs, lambda path: _write_workload(spec, path, progress, per_rank))
        else:
            run.keep("workload", inputs)
    except BaseException:
        if side is not None:
            side.abandon()
        raise
    if side is not None:
        run.write("topology", inputs, side.finish)
    elif topology:
        run.write("topology", inputs, lambda path: _write_topology(spec, path, draw))
    else:
        run.keep("topology", inputs, skip=_ns3_run_output)


def _write_workload(spec: RunSpec, path: Path, progress: bool, per_rank: bool = False) -> None:
    if _is_shared(spec):
        from astra_hetero.jobs.build import write_shared_workload

        with _progress_bar(spec.cluster.num_gpus, "writing traces", progress) as advance:
            write_shared_workload(spec, path, advance)  # type: ignore[arg-type]
        return
    from astra_hetero.workload.generate import write_workload

    with _progress_bar(spec.cluster.num_gpus, "writing traces", progress) as advance:
        write_workload(spec, path, advance, per_rank)
    if spec.dynamics or spec.iterations > 1:
        from astra_hetero.dynamics.selection import dynamics_document
        from astra_hetero.topology import checked_graph

        rundir.write_json_atomic(path / rundir.DYNAMICS, dynamics_document(spec, checked_graph(spec)))


def _write_topology(spec: RunSpec, path: Path, draw: str | None) -> None:
    from astra_hetero.topology import checked_graph, write_topology

    graph = checked_graph(spec)
    write_topology(spec, path, graph)
    if draw:
        from astra_hetero.topology.draw import draw_cluster

        draw_cluster(graph, path / rundir.topology_figure(draw))


def _ns3_run_output(relative: str) -> bool:
    return relative in rundir.NS3_RUN_OUTPUTS


# Above this many spans trace.json grows past what timeline viewers open comfortably (~100 MB).
MAX_TIMELINE_SPANS = 400_000
TIMELINE_MODES = ("auto", "all", "none")


def run_spec(
    spec: RunSpec,
    out: Path,
    backend: str = "embedded",
    timeline: str = "auto",
    *,
    limits: WorkLimits | None = None,
    force: bool = False,
    progress: bool = False,
    **backend_options: Any,
) -> RunResult:
    """Build `spec` into the run directory `out` and simulate it; inputs and result are published
    together, so `out` never holds inputs without their result (or a result beside other inputs)."""
    _check_timeline(timeline)
    # ASTRA-sim's backends read a trace per rank; the embedded engine rank by rank (--no-fold) too
    per_rank = backend != "embedded" or backend_options.get("fold") is False
    _check_work(spec, limits or WorkLimits(), per_rank=per_rank)
    with run_dir_staging(out, force) as run:
        build_into(run, spec, workload=True, topology=True, progress=progress)
        return _simulate(run, backend, timeline, backend_options)


def execute(
    run_dir: Path,
    backend: str = "embedded",
    timeline: str = "auto",
    *,
    force: bool = False,
    **backend_options: Any,
) -> RunResult:
    """Run a backend on a complete run directory and publish its inputs with the new result.json (and
    trace.json, logs/) in one step; on failure the directory is left as it was, old result included.

    `timeline`: "all" keeps every span, "none" writes no trace.json, "auto" keeps every span of small
    runs and, past MAX_TIMELINE_SPANS, the spans of representative ranks (see `sample_spans`).
    """
    _check_timeline(timeline)
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise RunDirError(f"{run_dir}: no such run directory")
    with run_dir_staging(run_dir, force, foreign_ok=True) as run:
        workload, topology = run.old_inputs("workload"), run.old_inputs("topology")
        if workload and topology and workload != topology:
            raise RunDirError(
                f"{run_dir}: its workload and its network were built from different specs; "
                "run `astra-hetero build` on it again"
            )
        run.keep("workload")
        run.keep("topology", skip=_ns3_run_output)
        return _simulate(run, backend, timeline, backend_options, keep_failed_logs=True)


def _check_timeline(timeline: str) -> None:
    if timeline not in TIMELINE_MODES:
        raise ValueError(f"timeline must be one of {', '.join(TIMELINE_MODES)}, not {timeline!r}")


def _simulate(
    run: OutputStaging, backend: str, timeline: str, options: dict[str, Any], keep_failed_logs: bool = False
) -> RunResult:
    """Run the backend on the staging directory; its result, timeline and logs become the result part.

    With `keep_failed_logs` (a rerun on the same inputs), the logs of a run that failed are moved into
    the existing directory as `logs/<name>.failed.log`, beside its previous result, for diagnosis.
    """
    rundir.check_inputs_inside(run.path)
    logger.info("simulating %s on the %s backend", run.root, backend)
    if backend == "embedded":
        options = {**options, "timeline": timeline != "none"}
    runner = create_backend(backend, **options)
    inputs = run.parts.get("workload", {}).get("inputs")

    def write(path: Path) -> RunResult:
        try:
            output = runner.run(path)
        except BackendFailed as exc:
            if keep_failed_logs and run.staging.previous is not None:
                _keep_failed_logs(path, run.staging.previous, exc)
            raise
        manifest = rundir.read_json_object(path / rundir.MANIFEST, "run `astra-hetero generate` first")
        stated = with_throughput(output.result, manifest, str(run.root / rundir.MANIFEST))
        stated = with_job_throughput(stated, manifest)
        stated = replace(stated, meta=provenance.complete(stated.meta, backend, path))
        output = _with_workload_notes(path, dataclasses.replace(output, result=stated), manifest)
        return _write_result(path, run.root, output, timeline)

    return run.write("result", inputs, write)


def _with_workload_notes(path: Path, output: RunOutput, manifest: dict[str, Any]) -> RunOutput:
    """The result with the workload's approximations (`manifest`, read from path/manifest.json) among
    its warnings, whichever backend ran it."""
    notes = manifest.get("approximations") or []
    if not isinstance(notes, list) or not all(isinstance(n, str) for n in notes):
        raise RunDirError(f"{path / rundir.MANIFEST}: approximations must be a list of strings")
    warnings = tuple(APPROXIMATION + n for n in notes if APPROXIMATION + n not in output.result.warnings)
    if not warnings:
        return output
    return replace(output, result=replace(output.result, warnings=(*warnings, *output.result.warnings)))


def _keep_failed_logs(staging: Path, previous: Path, exc: BackendFailed) -> None:
    logs = staging / rundir.LOGS_DIR
    if not logs.is_dir() or (previous / rundir.LOGS_DIR).is_symlink():
        return
    kept = []
    for log in sorted(logs.glob("*.log")):
        target = previous / rundir.LOGS_DIR / f"{log.stem}.failed.log"
        try:
            target.parent.mkdir(exist_ok=True)
            os.replace(log, target)  # a rename: the log never passes through a symlink or memory
        except OSError:
            continue
        kept.append(f"{rundir.LOGS_DIR}/{target.name}")
    if kept and exc.args:
        exc.args = (f"{exc.args[0]}\n(the failed run's log: {', '.join(kept)})", *exc.args[1:])


def _write_result(path: Path, root: Path, output: RunOutput, timeline: str) -> RunResult:
    from astra_hetero.results.timeline import write_timeline

    result = relocate(output.result, path, root)
    check_result(result)
    if timeline != "none":
        spans, note = output.spans, ""
        if timeline == "auto" and len(spans) > MAX_TIMELINE_SPANS:
            spans, note = sample_spans(result, spans, MAX_TIMELINE_SPANS)
        write_timeline(path / rundir.TIMELINE, result, spans, note)
    write_result(path, result)
    logger.info(
        "iteration %.6g us (simulated in %s s); result.json%s written",
        result.iteration_time_us,
        result.wall_time_s,
        "" if timeline == "none" else " and trace.json",
    )
    return result


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
