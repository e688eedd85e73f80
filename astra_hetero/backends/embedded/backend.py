"""The embedded backend: simulate a run directory in-process and return a `RunOutput`.

By default ranks that the run directory shows to be interchangeable are folded (see `folding`): one
representative per class is simulated and its times are every class member's. `fold=False`
simulates rank by rank — the reference the folded simulation is tested against. A directory without
dynamics, for one iteration, runs on the static engine (`engine.static`); any other on the dynamic one
(`dynamic_run`).
"""

from __future__ import annotations

import gc
import logging
import time
from pathlib import Path
from typing import Any

from astra_hetero.backends.embedded.dynamic_run import run_dynamic
from astra_hetero.backends.embedded.engine.simulated import setup
from astra_hetero.backends.embedded.engine.static import Engine
from astra_hetero.backends.embedded.folding.fold import fold
from astra_hetero.backends.embedded.network.fluid_links import fluid_link_keys, fluid_network
from astra_hetero.backends.embedded.network.routing import Router
from astra_hetero.backends.embedded.output import BACKEND_NAME, run_output
from astra_hetero.backends.embedded.rundir.dynamics import read_dynamics
from astra_hetero.backends.embedded.rundir.reader import read_run_dir
from astra_hetero.results.model import RunOutput

logger = logging.getLogger(__name__)


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
        solo: bool = True,
        collective_model: str | None = None,
        **_ignored: Any,
    ) -> None:
        self.timeline = timeline
        self.workers = workers
        self.fold = fold
        self.iterations = iterations  # overrides dynamics.json's count (`run --iterations`), every job's
        self.solo = solo  # several jobs: also simulate each alone, for the slowdown its neighbours cause
        self.collective_model = collective_model  # overrides the manifest's (`run --collective-model`)

    def run(self, run_dir: Path) -> RunOutput:
        started = time.perf_counter()
        # The engine allocates millions of long-lived small objects; generational collection of them
        # would rescan all of them over and over and finds no cycles worth the cost.
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            sim = read_run_dir(Path(run_dir), self.collective_model)
            dynamics = read_dynamics(Path(run_dir), sim.num_ranks, sim.topology.num_links // 2)
            iterations = self.iterations or dynamics.iterations
            static = (
                not dynamics.events and iterations == 1 and not sim.comm_overlap_slowdown and not sim.jobs
            )
            logger.info(
                "embedded engine: %d ranks, %d links, %s collectives, %d iteration(s), %d event(s)%s",
                sim.num_ranks,
                sim.topology.num_links,
                sim.comm.model,
                iterations,
                len(dynamics.events),
                "" if self.fold else ", every rank simulated (--no-fold)",
            )
            if static:  # the static engine, with its inlined hot paths
                folding = None
                if self.fold:
                    router = Router(sim.topology)
                    keys = fluid_link_keys(sim.dcqcn, router) if sim.dcqcn is not None else None
                    folding = fold(sim, self.workers, link_keys=keys, router=router)
                workload, comm, simulated = setup(sim, folding, self.workers)
                network = None
                if sim.dcqcn is not None:
                    link_class = folding.comm.network.link_class if folding is not None else None
                    network = fluid_network(sim.dcqcn, comm.capacities, simulated.planner.router, link_class)
                outcome = Engine(workload, comm, sim.max_comm_in_flight, sim.issue_by_id, network).run()
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
                    job_iterations=self.iterations,
                    solo=self.solo,
                )
        finally:
            if gc_was_enabled:
                gc.enable()
        folding = output.result.meta.get("folding")
        if folding:
            logger.info(
                "folded %d ranks into %d classes (%d trace nodes simulated)",
                output.result.num_ranks,
                folding["rank_classes"],
                folding["simulated_nodes"],
            )
        logger.info(
            "simulated %s events in %.2f s",
            output.result.meta.get("num_events"),
            time.perf_counter() - started,
        )
        return output
