"""The embedded backend: simulate a run directory in-process and return a `RunOutput`.

By default ranks that the run directory shows to be interchangeable are folded (see `folding`): one
representative per class is simulated and its times are every class member's. `fold=False`
simulates rank by rank — the reference the folded simulation is tested against. A directory without
dynamics, for one iteration, runs on the static engine (`engine.static`); any other on the dynamic one
(`dynamic_run`).
"""

from __future__ import annotations

import gc
import time
from pathlib import Path
from typing import Any

from astra_hetero.backends.embedded.dynamic_run import run_dynamic
from astra_hetero.backends.embedded.engine.simulated import setup
from astra_hetero.backends.embedded.engine.static import Engine
from astra_hetero.backends.embedded.folding.fold import fold
from astra_hetero.backends.embedded.output import BACKEND_NAME, run_output
from astra_hetero.backends.embedded.rundir.dynamics import read_dynamics
from astra_hetero.backends.embedded.rundir.reader import read_run_dir
from astra_hetero.results.model import RunOutput


class EmbeddedBackend:
    """Options: `timeline` (default True) returns one span per node for trace.json; `fold` (default
    True) simulates one rank per class of interchangeable ranks; `workers` sets the processes that
    read traces (default: up to 2). Options meant for other backends (binary, timeout_s, ...) are
    accepted and ignored so that callers can pass one option set to any backend."""

    name = BACKEND_NAME

    def __init__(
        self,
        timeline: bool = True,
        workers: int | None = None,
        fold: bool = True,
        iterations: int | None = None,
        **_ignored: Any,
    ) -> None:
        self.timeline = timeline
        self.workers = workers
        self.fold = fold
        self.iterations = iterations  # overrides dynamics.json's count (`run --iterations`)

    def run(self, run_dir: Path) -> RunOutput:
        started = time.perf_counter()
        # The engine allocates millions of long-lived small objects; generational collection of them
        # would rescan all of them over and over and finds no cycles worth the cost.
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            sim = read_run_dir(Path(run_dir))
            dynamics = read_dynamics(Path(run_dir), sim.num_ranks, sim.topology.num_links // 2)
            iterations = self.iterations or dynamics.iterations
            static = not dynamics.events and iterations == 1 and not sim.comm_overlap_slowdown
            if static:  # the static engine, with its inlined hot paths
                folding = fold(sim, self.workers) if self.fold else None
                workload, comm, simulated = setup(sim, folding, self.workers)
                outcome = Engine(workload, comm, sim.max_comm_in_flight).run()
                output = run_output(sim, simulated, outcome, time.perf_counter() - started, self.timeline)
            else:
                output = run_dynamic(
                    sim,
                    dynamics,
                    iterations,
                    started,
                    fold_ranks=self.fold,
                    workers=self.workers,
                    timeline=self.timeline,
                )
        finally:
            if gc_was_enabled:
                gc.enable()
        return output
