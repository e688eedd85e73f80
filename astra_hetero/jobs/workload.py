"""One run directory for every job of a shared cluster.

Each job's workload is planned as a single job on its own GPUs (`specs.place_jobs`), then its ranks,
comm groups and pipeline peers are renamed into the shared cluster's numbering: rank r of the job's
sub-cluster becomes the shared cluster's rank `ranks[r]`, and its comm groups take ids after the
previous jobs' (so every job's groups are disjoint). The traces are the job's own, byte for byte but
for those names; GPUs no job uses get the idle trace. To ASTRA-sim the result is one workload of
ranks with disjoint groups; the manifest says which rank belongs to which job.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from astra_hetero import rundir
from astra_hetero.chakra_io import write_trace
from astra_hetero.comm.measured import copy_tables
from astra_hetero.jobs.specs import PlacedJob, job_errors
from astra_hetero.manifest_jobs import rank_ranges
from astra_hetero.spec.devices import Device, enumerate_devices
from astra_hetero.spec.schema.jobs import SharedClusterSpec
from astra_hetero.workload.encode import RankBinding, idle_trace
from astra_hetero.workload.generate import (
    Progress,
    WorkloadPlan,
    active_traces,
    cluster_fields,
    group_entry,
    plan_fields,
    plan_workload,
    rank_entry,
)


@dataclass(frozen=True)
class JobWorkload:
    placed: PlacedJob
    plan: WorkloadPlan  # in the shared cluster's numbering (`shared_plan`)


def plan_jobs(placed: Sequence[PlacedJob], devices: Sequence[Device]) -> list[JobWorkload]:
    """Every job's workload, planned on its own GPUs and renamed into the shared numbering."""
    out, first_group = [], 0
    for job in placed:
        with job_errors(job):
            plan = plan_workload(job.spec)
        out.append(JobWorkload(job, shared_plan(plan, job.ranks, devices, first_group)))
        first_group += len(plan.groups)
    return out


def shared_plan(
    plan: WorkloadPlan, ranks: Sequence[int], devices: Sequence[Device], first_group: int
) -> WorkloadPlan:
    """`plan` (of a job's sub-cluster) in the shared cluster's numbering: rank r is `ranks[r]`, its
    k-th comm group is numbered first_group + k + 1; the layout covers every GPU of the cluster, those
    of other jobs as not the job's (placement None)."""
    ids = {group.id: str(first_group + k + 1) for k, group in enumerate(plan.groups)}
    groups = [replace(g, id=ids[g.id], ranks=tuple(ranks[r] for r in g.ranks)) for g in plan.groups]
    bindings = [
        RankBinding(
            ranks[b.rank],
            {role: ids[group] for role, group in b.groups.items()},
            {role: ranks[peer] for role, peer in b.peers.items()},
        )
        for b in plan.bindings
    ]
    layout = plan.layout
    placements: list[Any] = [None] * len(devices)
    for place in layout.placements:
        if place is not None:
            placements[ranks[place.rank]] = replace(place, rank=ranks[place.rank])
    cells = tuple(tuple(tuple(ranks[r] for r in cell) for cell in row) for row in layout.cells)
    shared = replace(layout, devices=tuple(devices), placements=tuple(placements), cells=cells)
    return replace(plan, layout=shared, groups=groups, bindings=bindings)


def write_jobs_workload(
    shared: SharedClusterSpec, placed: Sequence[PlacedJob], staging: Path, progress: Progress | None = None
) -> list[JobWorkload]:
    """Write spec.yaml, manifest.json and workload/ of every job into `staging`."""
    devices = enumerate_devices(shared.cluster)
    jobs = plan_jobs(placed, devices)
    (staging / rundir.WORKLOAD_DIR).mkdir(parents=True, exist_ok=True)
    busy: set[int] = set()
    for job in jobs:
        with job_errors(job.placed):
            for rank, data in active_traces(job.plan, progress):
                write_trace(staging / f"{rundir.WORKLOAD_PREFIX}.{rank}.et", [data])
                busy.add(rank)
    idle = idle_trace()
    for device in devices:
        if device.rank not in busy:
            write_trace(staging / f"{rundir.WORKLOAD_PREFIX}.{device.rank}.et", [idle])
            if progress:
                progress(1)
    copy_tables(shared.collectives.nccl_tests, staging)
    groups = {g.id: list(g.ranks) for job in jobs for g in job.plan.groups}
    (staging / rundir.COMM_GROUPS).write_text(json.dumps(groups) + "\n")
    (staging / rundir.MANIFEST).write_text(json.dumps(jobs_manifest(shared, jobs, devices), indent=1) + "\n")
    rundir.write_spec(staging, shared.model_dump(mode="json"))
    return jobs


def jobs_manifest(
    shared: SharedClusterSpec, jobs: Sequence[JobWorkload], devices: Sequence[Device]
) -> dict[str, Any]:
    """The single-job manifest's fields for the cluster, every rank (with its `job`, null when idle)
    and every comm group (with its `job`), and per job what a single-job manifest says of its plan,
    its ranks (as [first, end) ranges), start and iteration count."""
    entries: list[dict[str, Any] | None] = [None] * len(devices)
    groups: dict[str, dict[str, Any]] = {}
    records = []
    for job in jobs:
        plan, placed = job.plan, job.placed
        for rank in placed.ranks:
            place = plan.layout.placements[rank]
            if place is not None:
                entries[rank] = {
                    **rank_entry(plan.spec, devices[rank], place, plan.partition),
                    "job": placed.name,
                }
        for group in plan.groups:
            groups[group.id] = {**group_entry(group), "job": placed.name}
        active = [r for r in placed.ranks if plan.layout.placements[r] is not None]
        records.append(
            {
                "name": placed.name,
                "ranks": rank_ranges(active),
                "num_ranks": len(active),
                "idle_ranks": [r for r in placed.ranks if plan.layout.placements[r] is None],
                "start_ms": placed.job.start_ms,
                "start_ns": round(placed.job.start_ms * 1e6),
                "iterations": placed.job.iterations,
                "comm_groups": [g.id for g in plan.groups],
                **plan_fields(plan),
            }
        )
    any_plan = jobs[0].plan  # an idle GPU's entry reads no plan
    ranks = [
        entry
        if entry is not None
        else {**rank_entry(any_plan.spec, device, None, any_plan.partition), "job": None}
        for device, entry in zip(devices, entries, strict=True)
    ]
    return {
        **cluster_fields(shared, len(devices)),
        "idle_ranks": [r for r, entry in enumerate(entries) if entry is None],
        # each job's iterations are its own (jobs); dynamics.json is written for events only
        "dynamics": {"events": len(shared.dynamics), "iterations": 1},
        # what the workload model approximates, per job (results carry them as warnings)
        "approximations": [f"job {r['name']}: {note}" for r in records for note in r["approximations"]],
        "throughput": {"unavailable": "several jobs share the cluster: each job's figures are in `jobs`"},
        "workload_prefix": rundir.WORKLOAD_PREFIX,
        "jobs": records,
        "comm_groups": groups,
        "ranks": ranks,
    }
