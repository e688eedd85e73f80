"""Several jobs in one run directory (manifest `jobs`): when each simulated row starts and how many
iterations it runs, each job's iteration ends, and which links the jobs shared and how busy they were.

Every row of a folded simulation belongs to one job (folding keys each rank by its job), so a job's
schedule is its rows'. A solo run is the same simulation with every other job's rows left out
(0 iterations): the same cluster, the same events, no neighbours.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from astra_hetero.backends.embedded.engine.records import Comm
from astra_hetero.manifest_jobs import RunJob

MAX_SHARED_LINKS = 64  # link records in result.json (the busiest); each lists at most MAX_LINES lines
MAX_LINES = 16


@dataclass(frozen=True)
class Schedule:
    """Per simulated row: its job (-1: an idle GPU), iterations (0: left out) and start time."""

    job_of_row: list[int]
    counts: list[int]
    starts_ns: list[int]

    def rows_of(self, job: int) -> list[int]:
        return [row for row, j in enumerate(self.job_of_row) if j == job]


def schedule(
    jobs: Sequence[RunJob],
    job_of_rank: Sequence[int],
    row_ranks: Sequence[int],
    iterations: int | None = None,
    only: int | None = None,
) -> Schedule:
    """`row_ranks`: the rank each row runs as; `iterations` overrides every job's count (`run
    --iterations`); `only`: the job of a solo run (the others' rows get 0 iterations)."""
    job_of_row = [job_of_rank[rank] for rank in row_ranks]
    counts, starts = [], []
    for j in job_of_row:
        if j < 0:  # an idle GPU: its one empty node, at once
            counts.append(1)
            starts.append(0)
            continue
        counts.append(0 if only is not None and j != only else iterations or jobs[j].iterations)
        starts.append(jobs[j].start_ns)
    return Schedule(job_of_row, counts, starts)


def job_ends(iteration_ends: Sequence[Sequence[int]], plan: Schedule, job: int) -> list[int]:
    """When each iteration of `job` ended: the last of its rows to finish it."""
    rows = [iteration_ends[row] for row in plan.rows_of(job) if iteration_ends[row]]
    count = min((len(ends) for ends in rows), default=0)
    return [max(ends[i] for ends in rows) for i in range(count)]


def iteration_records(start_ns: int, ends: Sequence[int]) -> list[dict[str, Any]]:
    return [
        {"index": i, "time_us": (end - begin) / 1000}
        for i, (begin, end) in enumerate(zip([start_ns, *ends[:-1]], ends, strict=True))
    ]


def mean_iteration_us(start_ns: int, ends: Sequence[int]) -> float:
    return (ends[-1] - start_ns) / len(ends) / 1000 if ends else 0.0


@dataclass(frozen=True)
class LinkNames:
    """What the engine's links are on the topology: per engine link its bundles (one rank by rank; a
    link class's bundles when folded), per bundle its directed links of topology.txt and capacity, per
    topology line (directed link // 2) its kind ('' if unknown)."""

    bundles: list[list[int]]
    members: list[list[int]]
    bundle_bytes_per_ns: Sequence[float]
    kinds: Sequence[str]

    @staticmethod
    def of(router: Any, link_class: dict[int, int] | None, kinds: Sequence[str]) -> LinkNames:
        """From the engine's router and, when folded, its bundle -> link class map."""
        num_bundles = len(router.bundle_bytes_per_ns)
        if link_class is None:
            link_class = {b: b for b in range(num_bundles)}
        bundles: list[list[int]] = [[] for _ in range(max(link_class.values(), default=-1) + 1)]
        for bundle, link in sorted(link_class.items()):
            bundles[link].append(bundle)
        members: list[list[int]] = [[] for _ in range(num_bundles)]
        for link, bundle in enumerate(router.bundle_of):
            members[bundle].append(link)
        return LinkNames(bundles, members, router.bundle_bytes_per_ns, kinds)


def shared_links(
    comms: Sequence[Comm],
    job_of_node: Sequence[int],
    names: Sequence[str],
    links: LinkNames,
    span_ns: int,
) -> list[dict[str, Any]]:
    """The links two or more jobs loaded, busiest first, as groups of topology lines: bundles of one
    kind and rate that carried the same bytes of each job form one record, the same whether the run
    was folded (a link class loads each of its bundles alike) or rank by rank. `busy` is the bytes
    over capacity × the run's span. Bytes are what the flow model moves: NCCL's unachieved bandwidth
    and protocol overhead count, as they occupy the link."""
    load: dict[int, dict[int, float]] = {}
    for comm in comms:
        job = job_of_node[comm.nodes[0]]
        for phase in comm.plan:
            moved = comm.size * phase.bytes_fraction
            if moved <= 0:
                continue
            for link, weight in phase.links:
                per_job = load.setdefault(link, {})
                per_job[job] = per_job.get(job, 0.0) + moved * weight
    groups: dict[tuple[Any, ...], dict[str, Any]] = {}
    for link, per_job in load.items():
        if sum(1 for j in per_job if j >= 0) < 2 or link >= len(links.bundles):
            continue  # one job's link, or a background flow's own
        for bundle in links.bundles[link]:
            directed = links.members[bundle]
            capacity = links.bundle_bytes_per_ns[bundle]
            kind = links.kinds[directed[0] // 2] if directed[0] // 2 < len(links.kinds) else ""
            gbps = round(capacity * 8 / len(directed), 3)
            key = (kind, gbps, round(capacity, 6), tuple((j, round(b)) for j, b in sorted(per_job.items())))
            group = groups.setdefault(
                key,
                {
                    "kind": kind,
                    "gbps": gbps,
                    "lines": set(),
                    "busy": round(sum(per_job.values()) / (capacity * span_ns), 6) if span_ns else 0.0,
                    "bytes": {names[j]: round(b) for j, b in sorted(per_job.items()) if j >= 0},
                },
            )
            group["lines"].update(d // 2 for d in directed)
    records = []
    for group in groups.values():
        lines = sorted(group.pop("lines"))
        records.append({**group, "lines": lines[:MAX_LINES], "num_lines": len(lines)})
    records.sort(key=lambda r: (-r["busy"], r["kind"], r["lines"]))
    return records[:MAX_SHARED_LINKS]
