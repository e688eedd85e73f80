"""The embedded backend: simulate a run directory in-process and return a `RunOutput`.

By default ranks that the run directory shows to be interchangeable are folded (see `folding`): one
representative per class is simulated and its times are every class member's. `fold=False`
simulates rank by rank — the reference the folded simulation is tested against.
"""

from __future__ import annotations

import gc
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from astra_hetero.backends.embedded.commmodel import FoldedComm, PlainComm
from astra_hetero.backends.embedded.dynamics_input import read_dynamics
from astra_hetero.backends.embedded.engine import Engine
from astra_hetero.backends.embedded.folding import Folding, fold
from astra_hetero.backends.embedded.plans import CommPlanner, comm_planner
from astra_hetero.backends.embedded.records import Comm, EngineOutcome
from astra_hetero.backends.embedded.routing import Router
from astra_hetero.backends.embedded.rundir_reader import SimInput, read_run_dir, read_traces
from astra_hetero.backends.embedded.tracefile import KIND_COLL, KIND_COMP, KIND_SEND
from astra_hetero.backends.embedded.workload import FlatWorkload, flatten
from astra_hetero.results.model import (
    CollectiveStat,
    RankResult,
    RunOutput,
    RunResult,
    SharedSpans,
    optional_int,
)

if TYPE_CHECKING:
    from astra_hetero.backends.embedded.nccl_plans import NcclCommPlanner

SPAN_KINDS = {KIND_COMP: "compute", KIND_COLL: "comm", KIND_SEND: "send"}


@dataclass(frozen=True)
class Simulated:
    """Which simulated rank stands for each rank, and how many ranks each simulated rank stands for."""

    row_of: list[int]
    class_sizes: list[int]
    folding: Folding | None
    planner: CommPlanner | NcclCommPlanner  # the plans' source, for the NCCL choices in `meta`


class EmbeddedBackend:
    """Options: `timeline` (default True) returns one span per node for trace.json; `fold` (default
    True) simulates one rank per class of interchangeable ranks; `workers` sets the processes that
    read traces (default: up to 2). Options meant for other backends (binary, timeout_s, ...) are
    accepted and ignored so that callers can pass one option set to any backend."""

    name = "embedded"

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
                workload, comm, simulated = self.setup(sim, folding)
                outcome = Engine(workload, comm, sim.max_comm_in_flight).run()
                output = self.output(sim, simulated, outcome, time.perf_counter() - started)
            else:
                from astra_hetero.backends.embedded.dynamic_run import run_dynamic

                output = run_dynamic(self, sim, dynamics, iterations, started)
        finally:
            if gc_was_enabled:
                gc.enable()
        return output

    def setup(
        self, sim: SimInput, folding: Folding | None
    ) -> tuple[FlatWorkload, PlainComm | FoldedComm, Simulated]:
        """The workload and communication model the engine runs: every rank, or one per class."""
        if folding is None:
            ranks = list(range(sim.num_ranks))
            workload = flatten(ranks, read_traces(sim, ranks, self.workers), sim.groups)
            planner = comm_planner(sim, Router(sim.topology))
            comm = PlainComm(planner, workload.group_members)
            return workload, comm, Simulated(ranks, [1] * len(ranks), None, planner)
        classes = folding.classes
        workload = flatten(classes.reps, folding.traces, sim.groups, check_transfers=False)
        sizes = [len(members) for members in classes.members]
        return workload, folding.comm, Simulated(classes.class_of, sizes, folding, folding.planner)

    def output(
        self,
        sim: SimInput,
        simulated: Simulated,
        outcome: EngineOutcome,
        wall_s: float,
        iteration_ends: list[int] | None = None,
        spans: SharedSpans | None = None,
    ) -> RunOutput:
        """`iteration_ends`: when each of several iterations ended (the last one, the run's end);
        rank figures are then means per iteration."""
        run_ns = max(outcome.finish_ns, default=0)
        ends = iteration_ends or [run_ns]
        iteration_ns = run_ns / len(ends)
        ranks = tuple(
            _rank_result(sim, rank, simulated.row_of[rank], outcome, iteration_ns, len(ends))
            for rank in range(sim.num_ranks)
        )
        w = outcome.workload
        names = [name for trace in w.traces for name in trace.all_names()]  # decoded a rank at a time
        group_sizes = {name: len(members) for name, members in sim.groups.items()}
        order = sorted((c.start_ns, c.nodes[0], i) for i, c in enumerate(outcome.comms))
        stats = tuple(
            _collective_stat(c, names[c.nodes[0]], group_sizes, simulated.class_sizes[w.rank_of[c.nodes[0]]])
            for c in (outcome.comms[i] for _, _, i in order)
        )
        meta: dict[str, Any] = {
            "collective_model": sim.comm.model,
            "collective_algorithm": sim.comm.algorithm,
            **(
                {"collective_protocol": sim.comm.protocol, "nccl_choices": simulated.planner.summary()}
                if sim.comm.model == "nccl"
                else {}
            ),
            "num_nodes": len(w.kinds),
            "num_events": outcome.num_events,
            "num_rate_recomputes": outcome.num_recomputes,
            "network": "max-min fair flows on ns3/topology.txt",
            "link_model": sim.link_model,
        }
        if simulated.folding is not None:
            meta["folding"] = _folding_meta(simulated.folding, len(w.kinds))
        result = RunResult(
            backend=self.name,
            iteration_time_us=iteration_ns / 1000,
            ranks=ranks,
            collectives=stats,
            wall_time_s=round(wall_s, 3),
            warnings=sim.comm.warnings,
            meta=meta,
            iterations=tuple(
                {"index": i, "time_us": (end - start) / 1000}
                for i, (start, end) in enumerate(zip([0, *ends[:-1]], ends, strict=True))
            ),
        )
        if not self.timeline:
            return RunOutput(result, ())
        return RunOutput(result, spans if spans is not None else _spans(outcome, simulated.row_of))


def _folding_meta(folding: Folding, num_nodes: int) -> dict[str, Any]:
    classes = folding.classes
    return {
        "rank_classes": classes.num_classes,
        "largest_class": max(len(m) for m in classes.members),
        "simulated_ranks": classes.reps if classes.num_classes <= 64 else f"{classes.num_classes} ranks",
        "simulated_nodes": num_nodes,
        "link_classes": len(folding.comm.capacities),
        "collectives": "one record per class of identical collectives or transfers; `instances` counts them",
    }


def _rank_result(
    sim: SimInput, rank: int, row: int, outcome: EngineOutcome, iteration_ns: float, iterations: int = 1
) -> RankResult:
    label = sim.labels[rank] if rank < len(sim.labels) else {}
    compute, exposed = outcome.compute_ns[row] / iterations, outcome.exposed_ns[row] / iterations
    return RankResult(
        rank=rank,
        gpu=str(label.get("gpu", "npu")),
        stage=optional_int(label.get("stage", 0)),
        replica=optional_int(label.get("replica", 0)),
        finish_us=outcome.finish_ns[row] / iterations / 1000,
        compute_us=compute / 1000,
        exposed_comm_us=exposed / 1000,
        idle_us=(iteration_ns - compute - exposed) / 1000,
        node=int(label.get("node", sim.machines[rank])),
        tp_index=label.get("tp_index"),
    )


def _collective_stat(
    c: Comm, name: str, group_sizes: dict[str, int], sender_class_size: int
) -> CollectiveStat:
    transfer = c.kind == "send_recv"
    return CollectiveStat(
        c.group,
        c.kind,
        c.size,
        c.start_ns / 1000,
        c.end_ns / 1000,
        name,
        2 if transfer else group_sizes[c.group],
        sender_class_size if transfer else c.instances,
    )


def _spans(outcome: EngineOutcome, row_of: list[int]) -> SharedSpans:
    w = outcome.workload
    starts, ends, kinds = outcome.start_ns, outcome.end_ns, w.kinds
    rows = []
    for trace, base in zip(w.traces, w.offsets, strict=True):
        rows.append(
            [
                (SPAN_KINDS.get(kinds[g], "recv"), name, starts[g], ends[g])
                for g, name in enumerate(trace.all_names(), base)  # names decoded a rank at a time
                if starts[g] >= 0
            ]
        )
    return SharedSpans(rows, row_of)
