"""What the engine runs for a run directory: every rank's trace with the plain communication model, or
one representative per folded class with the folded one (`folding.fold`)."""

from __future__ import annotations

from dataclasses import dataclass

from astra_hetero.backends.embedded.engine.comm import PlainComm
from astra_hetero.backends.embedded.engine.workload import FlatWorkload, flatten
from astra_hetero.backends.embedded.folding.comm import FoldedComm
from astra_hetero.backends.embedded.folding.fold import Folding
from astra_hetero.backends.embedded.network.ideal import IdealCommPlanner
from astra_hetero.backends.embedded.network.nccl import NcclCommPlanner
from astra_hetero.backends.embedded.network.planners import comm_planner
from astra_hetero.backends.embedded.network.routing import Router
from astra_hetero.backends.embedded.rundir.reader import SimInput, read_traces


@dataclass(frozen=True)
class Simulated:
    """Which simulated rank stands for each rank, and how many ranks each simulated rank stands for."""

    row_of: list[int]
    class_sizes: list[int]
    folding: Folding | None
    planner: IdealCommPlanner | NcclCommPlanner  # the plans' source, for the NCCL choices in `meta`


def setup(
    sim: SimInput, folding: Folding | None, workers: int | None = None
) -> tuple[FlatWorkload, PlainComm | FoldedComm, Simulated]:
    """The workload and communication model the engine runs: every rank, or one per class; `workers`:
    the processes that read traces."""
    if folding is None:
        ranks = list(range(sim.num_ranks))
        workload = flatten(ranks, read_traces(sim, ranks, workers), sim.groups)
        planner = comm_planner(sim, Router(sim.topology))
        comm = PlainComm(planner, workload.group_members)
        return workload, comm, Simulated(ranks, [1] * len(ranks), None, planner)
    classes = folding.classes
    workload = flatten(classes.reps, folding.traces, sim.groups, check_transfers=False)
    sizes = [len(members) for members in classes.members]
    return workload, folding.comm, Simulated(classes.class_of, sizes, folding, folding.planner)
