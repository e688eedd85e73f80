"""The embedded backend on a directory with dynamics or several iterations (see `engine.dynamic`).

Folding stays exact only where every member of a class sees the same events: a device slowdown
separates the ranks it touches (a key per rank for `fold`), a link event or a background flow the
bundles it changes or loads (a key per bundle), and refinement splits the flow and rank classes that
depend on them; jitter (a draw per rank and kernel) makes the simulation rank by rank.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Hashable
from typing import Any

from astra_hetero.backends.embedded.engine.dynamic import DynamicEngine, engine_class
from astra_hetero.backends.embedded.engine.simulated import setup
from astra_hetero.backends.embedded.engine.timed import (
    background_flows,
    bundle_members,
    link_changes,
    link_keys,
)
from astra_hetero.backends.embedded.folding.fold import Folding, fold
from astra_hetero.backends.embedded.jobs import schedule
from astra_hetero.backends.embedded.jobs_output import jobs_output
from astra_hetero.backends.embedded.network.dcqcn import DcqcnNetwork
from astra_hetero.backends.embedded.network.fluid_links import fluid_link_keys, fluid_network
from astra_hetero.backends.embedded.network.routing import Router
from astra_hetero.backends.embedded.output import SPAN_KINDS, comm_args, run_output
from astra_hetero.backends.embedded.rundir.dynamics import Dynamics
from astra_hetero.backends.embedded.rundir.reader import SimInput
from astra_hetero.manifest_jobs import job_of_ranks
from astra_hetero.results.model import RunOutput, SharedSpans


def run_dynamic(
    sim: SimInput,
    dynamics: Dynamics,
    iterations: int,
    started: float,
    *,
    fold_ranks: bool = True,
    workers: int | None = None,
    timeline: bool = True,
    job_iterations: int | None = None,
    solo: bool = True,
) -> RunOutput:
    """The backend's options: `fold_ranks` (its `fold`), `workers`, `timeline`; `started`: when the
    run began (`time.perf_counter`), for the result's wall time. With several jobs (`sim.jobs`), each
    runs its own iterations from its own start (`job_iterations` overrides every job's count) and,
    with `solo`, once more alone for the slowdown its neighbours cause."""
    unfold = bool(dynamics.of_kind("jitter"))
    job_of = job_of_ranks(sim.jobs, sim.num_ranks) if sim.jobs else None
    folding = None
    if fold_ranks and not unfold:
        folding = fold_for_events(sim, dynamics, workers, job_of)
    workload, comm, simulated = setup(sim, folding, workers)
    link_class = folding.comm.network.link_class if folding is not None else None

    fluid = None
    if sim.dcqcn is not None:
        inputs, router = sim.dcqcn, simulated.planner.router

        def fluid(capacities: list[float], link_of: dict[int, int]) -> DcqcnNetwork | None:
            return fluid_network(inputs, capacities, router, link_of)

    def engine(
        counts: int | list[int], starts: list[int] | None = None, history: bool = False
    ) -> DynamicEngine:
        return engine_class(dynamics, sim.comm_overlap_slowdown)(
            workload,
            comm,
            dynamics,
            counts,
            simulated.planner.router,
            sim.max_comm_in_flight,
            keep_history=history,
            link_class=link_class,
            comm_slowdown=sim.comm_overlap_slowdown,
            lowest_first=sim.issue_by_id,
            starts_ns=starts,
            fluid=fluid,
        )

    if sim.jobs:
        plan = schedule(sim.jobs, job_of or [], workload.ranks, job_iterations)
        together = engine(plan.counts, plan.starts_ns, timeline)
    else:
        together = engine(iterations, history=timeline)
    outcome = together.run()
    spans = None
    if timeline:
        args = comm_args(sim, simulated, outcome)
        spans = _spans(together, outcome.start_ns, outcome.end_ns, simulated.row_of, args)
    if sim.jobs:
        solo_engine = engine if solo else None
        output = jobs_output(
            sim, simulated, outcome, together, plan, started, timeline, spans, solo_engine, link_class
        )
    else:
        ends = _iteration_ends(together.iteration_ends, iterations)
        output = run_output(sim, simulated, outcome, time.perf_counter() - started, timeline, ends, spans)
    meta = {**output.result.meta, "iterations": job_iterations if sim.jobs else iterations}
    if sim.comm_overlap_slowdown:
        meta["comm_overlap_slowdown"] = sim.comm_overlap_slowdown
    if unfold and fold_ranks:
        meta["folding_off"] = "jitter (a draw per rank and kernel): simulated rank by rank"
    result = dataclasses.replace(output.result, events=_event_records(together, dynamics), meta=meta)
    return RunOutput(result, output.spans)


def fold_for_events(
    sim: SimInput, dynamics: Dynamics, workers: int | None = None, job_of: list[int] | None = None
) -> Folding | None:
    """Folding that keeps apart what the events treat apart: the ranks a device slowdown touches, and
    the links an event changes or a background flow loads (with the flows and ranks that use them);
    with several jobs (`job_of`: each rank's), every class stays inside one job."""
    rank_keys: list[Hashable] = [
        tuple(e.index for e in dynamics.events if r in e.ranks) for r in range(sim.num_ranks)
    ]
    if job_of is not None:
        rank_keys = [(key, job) for key, job in zip(rank_keys, job_of, strict=True)]
    router = Router(sim.topology)
    members = bundle_members(router)
    keys: dict[int, Hashable] = dict(
        link_keys(link_changes(dynamics, router, members), background_flows(dynamics, router, members))
    )
    if sim.dcqcn is not None:  # the fluid model tells a host's link from a switch's queue
        fluid = fluid_link_keys(sim.dcqcn, router)
        keys = {b: (keys.get(b), fluid.get(b)) for b in keys.keys() | fluid.keys()}
    return fold(sim, workers, rank_keys=rank_keys, link_keys=keys, router=router)


def _iteration_ends(per_rank: list[list[int]], iterations: int) -> list[int]:
    """When each iteration ended: the last rank to finish it (ranks without work are left out)."""
    done = [ends for ends in per_rank if ends]
    if not done:
        return [0] * iterations
    return [max(ends[i] for ends in done) for i in range(iterations)]


def _spans(
    engine: DynamicEngine,
    starts: list[int],
    ends: list[int],
    row_of: list[int],
    args: dict[int, dict[str, Any]],
) -> SharedSpans:
    w = engine.w
    kinds = w.kinds
    rows: list[list[tuple[Any, ...]]] = []
    past: dict[int, list[tuple[list[int], list[int]]]] = {}
    for row, s, e in engine.history:
        past.setdefault(row, []).append((s, e))
    for row, (trace, base) in enumerate(zip(w.traces, w.offsets, strict=True)):
        names = trace.all_names()
        n = len(names)
        runs = [*past.get(row, []), (starts[base : base + n], ends[base : base + n])]
        rows.append(
            [
                (SPAN_KINDS.get(kinds[base + i], "recv"), name, s[i], e[i], args.get(base + i))
                for s, e in runs
                for i, name in enumerate(names)
                if s[i] >= 0
            ]
        )
    return SharedSpans(rows, row_of)


def _event_records(engine: DynamicEngine, dynamics: Dynamics) -> tuple[dict[str, Any], ...]:
    backgrounds = {b.event.index: b for b in engine.backgrounds}
    records = []
    for e in dynamics.events:
        links = backgrounds[e.index].lines if e.index in backgrounds else e.links
        records.append(
            {
                "index": e.index,
                "event": e.event,
                "start_us": e.start_ns / 1000,
                "end_us": None if e.end_ns is None else e.end_ns / 1000,
                "ranks": list(e.ranks),
                "links": list(links),
            }
        )
    return tuple(records)
