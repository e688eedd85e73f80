"""The embedded backend's `RunOutput` from an engine's outcome: per rank figures, one record per
collective or transfer, the meta block, and (with a timeline) one span per simulated node."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from astra_hetero.backends.embedded.engine.records import Comm, EngineOutcome
from astra_hetero.backends.embedded.engine.simulated import Simulated
from astra_hetero.backends.embedded.folding.fold import Folding
from astra_hetero.backends.embedded.rundir.reader import SimInput
from astra_hetero.backends.embedded.trace.records import KIND_COLL, KIND_COMP, KIND_CPU, KIND_SEND
from astra_hetero.results.model import (
    CollectiveStat,
    RankResult,
    RunOutput,
    RunResult,
    SharedSpans,
    optional_int,
)

BACKEND_NAME = "embedded"
SPAN_KINDS = {KIND_COMP: "compute", KIND_COLL: "comm", KIND_SEND: "send", KIND_CPU: "cpu"}


def run_output(
    sim: SimInput,
    simulated: Simulated,
    outcome: EngineOutcome,
    wall_s: float,
    timeline: bool,
    iteration_ends: list[int] | None = None,
    spans: SharedSpans | None = None,
    rank_iterations: list[RankIterations] | None = None,
) -> RunOutput:
    """`iteration_ends`: when each of several iterations ended (the last one, the run's end);
    rank figures are then means per iteration. `rank_iterations` (per rank, several jobs): the
    iterations each rank's figures are means over. `timeline`: return spans (given, or one per node)."""
    run_ns = max(outcome.finish_ns, default=0)
    ends = iteration_ends or [run_ns]
    iteration_ns = run_ns / len(ends)
    if rank_iterations is None:
        rank_iterations = [RankIterations(run_ns, len(ends))] * sim.num_ranks
    ranks = tuple(
        _rank_result(sim, rank, simulated.row_of[rank], outcome, rank_iterations[rank])
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
    if outcome.network_stats is not None:
        meta["network"] = "DCQCN fluid model (rates, ECN-marking queues, PFC) on ns3/topology.txt"
        meta["dcqcn"] = outcome.network_stats
    if simulated.folding is not None:
        meta["folding"] = _folding_meta(simulated.folding, len(w.kinds))
    result = RunResult(
        backend=BACKEND_NAME,
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
    if not timeline:
        return RunOutput(result, ())
    if spans is None:
        spans = _spans(outcome, simulated.row_of, comm_args(sim, simulated, outcome))
    return RunOutput(result, spans)


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


@dataclass(frozen=True)
class RankIterations:
    """The iterations a rank's figures are means over: the time they took together (from `start_ns`
    to the end of the last), how many there were, when the first began."""

    span_ns: int
    count: int = 1
    start_ns: int = 0


def _rank_result(
    sim: SimInput, rank: int, row: int, outcome: EngineOutcome, its: RankIterations
) -> RankResult:
    """The rank's figures, means per iteration. Idle is the run's rest on the integer-ns clock,
    divided last: a difference of float means could come out at -3e-11 us for a rank never idle."""
    label = sim.labels[rank] if rank < len(sim.labels) else {}
    compute_ns, exposed_ns = outcome.compute_ns[row], outcome.exposed_ns[row]
    idle_ns = its.span_ns - compute_ns - exposed_ns
    return RankResult(
        rank=rank,
        gpu=str(label.get("gpu", "npu")),
        # what the run directory does not say stays unknown (a plain ASTRA-sim directory's ranks)
        stage=optional_int(label.get("stage")),
        replica=optional_int(label.get("replica")),
        finish_us=(outcome.finish_ns[row] - its.start_ns) / its.count / 1000,
        compute_us=compute_ns / its.count / 1000,
        exposed_comm_us=exposed_ns / its.count / 1000,
        idle_us=idle_ns / its.count / 1000,
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


def _spans(outcome: EngineOutcome, row_of: list[int], args: dict[int, dict[str, Any]]) -> SharedSpans:
    w = outcome.workload
    starts, ends, kinds = outcome.start_ns, outcome.end_ns, w.kinds
    rows = []
    for trace, base in zip(w.traces, w.offsets, strict=True):
        rows.append(
            [
                (SPAN_KINDS.get(kinds[g], "recv"), name, starts[g], ends[g], args.get(g))
                for g, name in enumerate(trace.all_names(), base)  # names decoded a rank at a time
                if starts[g] >= 0
            ]
        )
    return SharedSpans(rows, row_of)


def comm_args(sim: SimInput, simulated: Simulated, outcome: EngineOutcome) -> dict[int, dict[str, Any]]:
    """Per simulated communication node, what a trace viewer shows with its span: the collective's
    (or transfer's) bytes and ranks, and the algorithm and protocol the model chose for it. One dict
    per collective, shared by its members' spans — and, folded, by every rank of their classes, so
    nothing in it names one group or rank."""
    by_node: dict[int, dict[str, Any]] = {}
    planner = simulated.planner
    for c in outcome.comms:
        if c.kind == "send_recv":
            src, dst = (int(r) for r in c.group.split("->"))
            members: tuple[int, ...] = (src, dst)
            choice = planner.choice(members, "p2p", c.size)
        else:
            members = tuple(sim.groups.get(c.group, ()))
            choice = planner.choice(members, c.kind, c.size)
        args: dict[str, Any] = {"bytes": c.size, "ranks": len(members)}
        if choice is not None:
            args["algorithm"] = choice[0]
            if choice[1]:
                args["protocol"] = choice[1]
        for node in (*c.nodes, c.recv):
            if node >= 0:
                by_node[node] = args
    return by_node
