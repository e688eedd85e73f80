"""A shared cluster's spec into the workload half of a run directory, as `pipeline` asks for it: the
work limits, then every job's traces, the comm groups, the manifest and (with events) dynamics.json.
The network half is the cluster's, written as for one job (`topology`)."""

from __future__ import annotations

from pathlib import Path

from astra_hetero import rundir
from astra_hetero.bounds import WorkLimits, WorkTooLarge, check_network, check_work
from astra_hetero.jobs.load import check_shared
from astra_hetero.jobs.specs import job_errors
from astra_hetero.jobs.workload import write_jobs_workload
from astra_hetero.spec.schema.jobs import SharedClusterSpec
from astra_hetero.workload.generate import Progress


def check_shared_work(
    shared: SharedClusterSpec, limits: WorkLimits, *, workload: bool = True, topology: bool = True
) -> None:
    """Each job's traces within the limits as its own spec's, their sum too; the network once."""
    if workload:
        total = 0
        for job in check_shared(shared):
            with job_errors(job):
                total += check_work(job.spec, limits, topology=False, per_rank=True).trace_nodes
        if total > limits.max_nodes:
            raise WorkTooLarge(
                "jobs",
                f"the jobs' traces would hold about {total:,} nodes together, more than --max-nodes "
                f"{limits.max_nodes:,}; make the jobs smaller or raise the limit",
            )
    if workload or topology:
        check_network(shared, limits)


def write_shared_workload(shared: SharedClusterSpec, staging: Path, progress: Progress | None = None) -> None:
    write_jobs_workload(shared, check_shared(shared), staging, progress)
    if shared.dynamics:
        from astra_hetero.dynamics.selection import FORMAT, resolve_events
        from astra_hetero.topology import checked_graph

        document = {
            "format": FORMAT,
            "iterations": shared.iterations,  # each job's own count is in the manifest
            "events": resolve_events(shared, checked_graph(shared)),  # type: ignore[arg-type]
        }
        rundir.write_json_atomic(staging / rundir.DYNAMICS, document)
