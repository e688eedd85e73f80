"""The communication model a run directory asks for (`sim.comm.model`): ideal (ASTRA-sim's analytical
collectives, on the flow network; or, for an imported study, `collective_algorithm: astrasim`, as
ASTRA-sim's system layer runs them with the study's own system file) or NCCL-like."""

from __future__ import annotations

from astra_hetero.backends.embedded.network.astrasim import AstraSimCommPlanner
from astra_hetero.backends.embedded.network.ideal import IdealCommPlanner
from astra_hetero.backends.embedded.network.nccl import NcclCommPlanner
from astra_hetero.backends.embedded.network.phases import CommPlanner
from astra_hetero.backends.embedded.network.routing import Router
from astra_hetero.backends.embedded.rundir.reader import SimInput
from astra_hetero.errors import RunDirError


def comm_planner(sim: SimInput, router: Router) -> CommPlanner:
    """The planner of the run directory's communication model."""
    if sim.comm.model == "nccl":
        return NcclCommPlanner(router, sim.machines, sim.comm)
    if sim.comm.algorithm == "astrasim":
        study = sim.astrasim
        if study is None:
            raise RunDirError(
                f"{sim.root}/manifest.json: collective_algorithm astrasim needs an imported study's "
                "`astrasim` section (run `astra-hetero import`)"
            )
        return AstraSimCommPlanner(
            router, study.system, study.dims, study.delay(router), study.queues_per_dim
        )
    return IdealCommPlanner(router, sim.machines, sim.algorithm, sim.memory_bytes_per_ns)
