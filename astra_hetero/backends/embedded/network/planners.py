"""The communication model a run directory asks for: ideal (ASTRA-sim's analytical collectives) or
NCCL-like (`sim.comm.model`)."""

from __future__ import annotations

from astra_hetero.backends.embedded.network.ideal import IdealCommPlanner
from astra_hetero.backends.embedded.network.nccl import NcclCommPlanner
from astra_hetero.backends.embedded.network.routing import Router
from astra_hetero.backends.embedded.rundir.reader import SimInput


def comm_planner(sim: SimInput, router: Router) -> IdealCommPlanner | NcclCommPlanner:
    """The planner of the run directory's communication model (`sim.comm.model`)."""
    if sim.comm.model == "nccl":
        return NcclCommPlanner(router, sim.machines, sim.comm)
    return IdealCommPlanner(router, sim.machines, sim.algorithm, sim.memory_bytes_per_ns)
