"""The ASTRA-sim backends: analytical (congestion-aware, -unaware) and ns-3, native or in Docker.

`run(run_dir)` checks the run directory, runs the binary with a timeout (its output streamed to
`logs/<backend>.log`), and parses the output into a `RunResult`. On any failure it raises with the
log's tail and returns nothing; the caller writes `result.json` only on success.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from astra_hetero import provenance, rundir
from astra_hetero.backends.astrasim.command import FLAVORS, Flavor, build_command, run_files
from astra_hetero.backends.astrasim.dynamics_check import refuse_dynamics
from astra_hetero.backends.astrasim.jobs import refuse_schedule, solo_times
from astra_hetero.backends.astrasim.locate import locate_binary
from astra_hetero.backends.astrasim.parse import ParsedRun, parse_output
from astra_hetero.backends.astrasim.partial import BackendTimedOut, partial_run, progress_line
from astra_hetero.backends.astrasim.process import ProcessOutcome, run_native
from astra_hetero.errors import BackendFailed, BackendUnavailable, RunDirError
from astra_hetero.manifest_jobs import read_jobs
from astra_hetero.rank_classes import has_class_map, materialize
from astra_hetero.results.jobs import with_job_records
from astra_hetero.results.model import APPROXIMATION, RankResult, RunOutput, RunResult, optional_int

logger = logging.getLogger(__name__)
CYCLES_NOTE = "ASTRA-sim cycles are nanoseconds; times here are microseconds (cycles / 1000)"
# ASTRA-sim reports finish = GPU time + exposed communication for every rank (checked on real output), so
# its "exposed communication" includes pipeline bubbles and waiting on peers.
EXPOSED_NOTE = (
    "exposed_comm_us is ASTRA-sim's exposed communication (finish − GPU time): it includes "
    "pipeline bubbles and waiting on peers; idle_us is the time after a rank finished"
)


@dataclass(frozen=True)
class AstraSimBackend:
    flavor: Flavor
    binary: str | None = None
    bin_dir: str | None = None
    docker_image: str | None = None
    timeout_s: float | None = None
    docker_client: Any = field(default=None, compare=False, repr=False)
    iterations: int | None = None  # only 1 is possible (see dynamics_check)
    solo: bool = True  # several jobs: also run each alone, for the slowdown its neighbours cause

    def __post_init__(self) -> None:
        if self.timeout_s is not None and self.timeout_s <= 0:
            raise BackendUnavailable(f"timeout_s must be positive, got {self.timeout_s}")

    @property
    def name(self) -> str:
        return self.flavor.backend

    @property
    def log_name(self) -> str:
        return f"{rundir.LOGS_DIR}/{self.name}.log"

    def run(self, run_dir: Path) -> RunOutput:
        """The simulator's result, its first warning saying what ASTRA-sim could not be told exactly."""
        run_dir = Path(run_dir)
        refuse_dynamics(run_dir, self.name, self.iterations)
        if has_class_map(run_dir):  # traces by class: ASTRA-sim reads one file per rank
            materialize(run_dir)
        manifest = rundir.RunDir(run_dir).read_manifest()
        jobs = read_jobs(manifest, len(rank_labels(manifest, run_dir)), run_dir / rundir.MANIFEST)
        refuse_schedule(jobs, self.name)
        run_files(self.flavor, run_dir)  # what it would run, checked before any binary is sought
        notes = approximation_warnings(run_dir, self.flavor.network)  # checked before a long run
        result = self._simulate(run_dir).result
        if jobs:
            solo = None
            if self.solo:
                solo = solo_times(run_dir, jobs, lambda d: self._simulate(d).result, self.log_name)
            result = with_job_records(result, jobs, solo)
        return RunOutput(replace(result, warnings=(*notes, *result.warnings)))

    def _simulate(self, run_dir: Path) -> RunOutput:
        run_dir = Path(run_dir)
        layout = rundir.RunDir(run_dir)
        manifest = layout.read_manifest()
        labels = rank_labels(manifest, run_dir)
        prefix = run_dir / str(manifest.get("workload_prefix", rundir.WORKLOAD_PREFIX))
        for rank in range(len(labels)):
            if not Path(f"{prefix}.{rank}.et").is_file():
                raise RunDirError(f"{prefix}.{rank}.et: missing trace of rank {rank}")
        log_path = run_dir / self.log_name

        def progress(elapsed_s: float) -> None:
            logger.info("%s", progress_line(run_dir, log_path, len(labels), elapsed_s))

        outcome, argv, identity = self._execute(run_dir, log_path, progress)
        text = log_path.read_text(errors="replace")
        try:
            parsed = parse_output(text, len(labels), outcome, binary=Path(argv[0]).name)
        except BackendFailed as exc:
            if not outcome.timed_out:
                raise
            partial = partial_run(
                self.name,
                run_dir,
                text,
                len(labels),
                self.timeout_s or 0.0,
                outcome.wall_time_s,
                exc.log_tail,
            )
            message = str(exc).split("\n--- log tail ---")[0]
            raise BackendTimedOut(
                f"{message}; stopped at its budget with {partial.flows_completed} flows done "
                f"({partial.simulated_us / 1000:.3f} ms simulated)",
                partial,
            ) from None
        meta = {
            "argv": list(argv),
            "log": self.log_name,
            "docker_image": self.docker_image,
            "exposed_comm_note": EXPOSED_NOTE,
            # the binary (native) or the image (Docker) that ran; pipeline adds the rest (provenance.py)
            provenance.KEY: {"backend": identity},
        }
        return RunOutput(to_result(self.name, parsed, labels, outcome, meta))

    def _execute(
        self, run_dir: Path, log_path: Path, progress: Callable[[float], None] | None = None
    ) -> tuple[ProcessOutcome, tuple[str, ...], dict[str, Any]]:
        """What ran and how it ended, and the identity of what ran (binary, or image)."""
        if self.docker_image is None:
            executable = locate_binary(self.flavor.binary_name, self.binary, self.bin_dir)
            command = build_command(self.flavor, run_dir, str(executable))
            identity = {"binary": provenance.binary_identity(executable)}
            return run_native(command, log_path, self.timeout_s, progress), command.argv, identity
        # Imported here so that native runs need neither the docker SDK nor an engine.
        from astra_hetero.backends.astrasim.docker import CONTAINER_ROOT, DockerRunner

        runner = DockerRunner(self.docker_image, self.docker_client, self.binary, self.bin_dir)
        executable = runner.executable(self.flavor.binary_name)
        command = build_command(self.flavor, run_dir, executable, CONTAINER_ROOT)
        identity = {"docker": provenance.image_identity(self.docker_image, runner.image_attrs)}
        return runner.run(command, run_dir, log_path, self.timeout_s), command.argv, identity


def approximation_warnings(run_dir: Path, network_file: str) -> tuple[str, ...]:
    """The run directory's note on what `network_file` (and its system file) flattened, if any."""
    path = run_dir / rundir.APPROXIMATIONS
    if not path.is_file():  # a run directory written by another tool, or before this file existed
        return ()
    note = rundir.read_json_object(path, "run `astra-hetero topology` again").get(network_file)
    if note is None:
        return ()
    if not isinstance(note, str):
        raise RunDirError(f"{path}: {network_file!r} should be one line of text")
    return (APPROXIMATION + note,)


def rank_labels(manifest: dict[str, Any], run_dir: Path) -> list[dict[str, Any]]:
    """manifest["ranks"], checked to list ranks 0..N-1 in order with the labels a result needs."""
    path = run_dir / rundir.MANIFEST
    ranks = manifest.get("ranks")
    if not isinstance(ranks, list) or not ranks:
        raise RunDirError(f"{path}: no `ranks` list")
    for index, entry in enumerate(ranks):
        if not isinstance(entry, dict) or entry.get("rank") != index:
            raise RunDirError(f"{path}: ranks[{index}] should describe rank {index}")
        missing = [key for key in ("gpu", "stage", "replica") if key not in entry]
        if missing:
            raise RunDirError(f"{path}: ranks[{index}] lacks {', '.join(missing)}")
    if manifest.get("num_ranks", len(ranks)) != len(ranks):
        raise RunDirError(f"{path}: num_ranks is {manifest['num_ranks']} but {len(ranks)} ranks are listed")
    return ranks


def to_result(
    backend: str,
    parsed: ParsedRun,
    labels: list[dict[str, Any]],
    outcome: ProcessOutcome,
    meta: dict[str, Any],
) -> RunResult:
    """Cycles -> µs. idle = iteration − compute − exposed communication (bubbles, waiting on peers)."""
    iteration_cycles = max(rank.finish for rank in parsed.ranks)
    iteration_us = iteration_cycles / 1000
    ranks = []
    for cycles, label in zip(parsed.ranks, labels, strict=True):
        # Subtract in integer cycles: in float µs a rank that finished last came out at -2e-10 idle.
        idle_cycles = iteration_cycles - cycles.gpu - cycles.exposed_comm
        ranks.append(
            RankResult(
                rank=cycles.rank,
                gpu=str(label["gpu"]),
                stage=optional_int(label["stage"]),
                replica=optional_int(label["replica"]),
                finish_us=cycles.finish / 1000,
                compute_us=cycles.gpu / 1000,
                exposed_comm_us=cycles.exposed_comm / 1000,
                idle_us=idle_cycles / 1000,
                node=label.get("node"),
                tp_index=label.get("tp_index"),
            )
        )
    return RunResult(
        backend=backend,
        iteration_time_us=iteration_us,
        ranks=tuple(ranks),
        warnings=parsed.warnings,
        exit_status=outcome.exit_status,
        wall_time_s=outcome.wall_time_s,
        time_unit_note=CYCLES_NOTE,
        meta=meta,
    )


def _factory(backend: str):
    def create(
        binary: str | None = None,
        bin_dir: str | None = None,
        docker_image: str | None = None,
        timeout_s: float | None = None,
        docker_client: Any = None,
        iterations: int | None = None,
        solo: bool = True,
    ) -> AstraSimBackend:
        return AstraSimBackend(
            FLAVORS[backend], binary, bin_dir, docker_image, timeout_s, docker_client, iterations, solo
        )

    create.__name__ = backend.replace("-", "_")
    create.__doc__ = f"The {backend!r} backend ({FLAVORS[backend].binary_name})."
    return create


analytical_aware = _factory("analytical")
analytical_unaware = _factory("analytical-unaware")
ns3 = _factory("ns3")
