"""The result of a run of several jobs: per rank, means over its own job's iterations; per job its
iterations together and alone (a solo run without the other jobs) and the slowdown; the shared links.

The result's `iteration_time_us` is the whole run's span (the last rank's finish), as the ASTRA-sim
backends report it for such a directory; each job's own iteration time is in `jobs`.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

from astra_hetero import rundir
from astra_hetero.backends.embedded.engine.dynamic import DynamicEngine
from astra_hetero.backends.embedded.engine.records import EngineOutcome
from astra_hetero.backends.embedded.engine.simulated import Simulated
from astra_hetero.backends.embedded.jobs import (
    LinkNames,
    Schedule,
    iteration_records,
    job_ends,
    mean_iteration_us,
    schedule,
    shared_links,
)
from astra_hetero.backends.embedded.output import RankIterations, run_output
from astra_hetero.backends.embedded.rundir.comm_inputs import link_kinds
from astra_hetero.backends.embedded.rundir.reader import SimInput
from astra_hetero.manifest_jobs import job_of_ranks, rank_ranges
from astra_hetero.results.model import RunOutput, SharedSpans

EngineFactory = Callable[[list[int], list[int]], DynamicEngine]


def jobs_output(
    sim: SimInput,
    simulated: Simulated,
    outcome: EngineOutcome,
    together: DynamicEngine,
    plan: Schedule,
    started: float,
    timeline: bool,
    spans: SharedSpans | None,
    solo_engine: EngineFactory | None,
    link_class: dict[int, int] | None,
) -> RunOutput:
    """`solo_engine(counts, starts)`: an engine on the same workload for a solo run (None: no solo
    runs); `link_class`: the folding's bundle -> link class map (None: rank by rank)."""
    ends = [job_ends(together.iteration_ends, plan, j) for j in range(len(sim.jobs))]
    run_ns = max(outcome.finish_ns, default=0)
    job_of = job_of_ranks(sim.jobs, sim.num_ranks)
    rank_iterations = [
        RankIterations(run_ns)
        if j < 0 or not ends[j]
        else RankIterations(ends[j][-1] - sim.jobs[j].start_ns, len(ends[j]), sim.jobs[j].start_ns)
        for j in job_of
    ]
    output = run_output(sim, simulated, outcome, 0.0, timeline, spans=spans, rank_iterations=rank_iterations)
    w = outcome.workload
    solo = None
    if solo_engine is not None:  # one job alone is its own solo run
        solo = ends if len(sim.jobs) == 1 else _solo_ends(sim, w.ranks, solo_engine)
    records = _job_records(sim, ends, solo)
    kinds = sim.comm.link_kinds or link_kinds(sim.root / rundir.NS3_LINK_KINDS, sim.topology) or ()
    names = LinkNames.of(simulated.planner.router, link_class, kinds)
    job_of_node = [plan.job_of_row[row] for row in w.rank_of]
    links = shared_links(outcome.comms, job_of_node, [job.name for job in sim.jobs], names, run_ns)
    result = dataclasses.replace(
        output.result,
        iterations=(),
        jobs=tuple(records),
        shared_links=tuple(links),
        wall_time_s=round(time.perf_counter() - started, 3),
        meta={
            **output.result.meta,
            "jobs": f"{len(sim.jobs)} jobs; iteration_time_us is the run's span, each job's in jobs",
        },
    )
    return RunOutput(result, output.spans)


def _solo_ends(sim: SimInput, rows: list[int], engine: EngineFactory) -> list[list[int]]:
    """Each job's iteration ends when it runs alone on the cluster (its own start, the same events);
    `rows`: the rank each simulated row runs as."""
    job_of = job_of_ranks(sim.jobs, sim.num_ranks)
    out = []
    for j in range(len(sim.jobs)):
        alone = schedule(sim.jobs, job_of, rows, only=j)
        run = engine(alone.counts, alone.starts_ns)
        run.run()
        out.append(job_ends(run.iteration_ends, alone, j))
    return out


def _job_records(sim: SimInput, ends: list[list[int]], solo: list[list[int]] | None) -> list[dict[str, Any]]:
    records = []
    for j, job in enumerate(sim.jobs):
        together = mean_iteration_us(job.start_ns, ends[j])
        record: dict[str, Any] = {
            "name": job.name,
            "ranks": rank_ranges(job.ranks),
            "num_ranks": len(job.ranks),
            "start_us": job.start_ns / 1000,
            "iterations": iteration_records(job.start_ns, ends[j]),
            "iteration_time_us": together,
        }
        if solo is not None:
            alone = mean_iteration_us(job.start_ns, solo[j])
            record["solo_iterations"] = iteration_records(job.start_ns, solo[j])
            record["solo_iteration_time_us"] = alone
            record["slowdown"] = together / alone if alone else None
        records.append(record)
    return records
