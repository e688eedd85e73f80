"""Planning one job of a shared cluster beside the others (`search.job: NAME`).

The planned job is searched as a single-job problem on the GPUs it may use: its `nodes:` as written,
else every GPU the other jobs do not hold (they are placed first, as without it). Every candidate is
simulated on the whole cluster with the other jobs as written — their plans, placements, starts and
iterations fixed — and ranked by the planned job's own mean iteration time there. The search's lower
bounds ignore the neighbours and stay lower bounds; its estimates ignore them too and may be
optimistic, which the search's correction by simulated/estimated ratios absorbs.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from astra_hetero.errors import SpecError
from astra_hetero.jobs.allocation import JobPool, allocate
from astra_hetero.jobs.load import check_job, job_named, validate_shared_sections
from astra_hetero.jobs.specs import place_job
from astra_hetero.spec.devices import enumerate_devices
from astra_hetero.spec.schema import Spec
from astra_hetero.spec.schema.jobs import SharedClusterSpec

_JOB_SECTIONS = ("model", "parallelism", "precision", "mapping", "partition", "scope")


@dataclass(frozen=True)
class Neighbours:
    """The shared cluster around the planned job: `data` is the shared spec as plain data (files
    resolved), `index` and `name` the planned job, `nodes` its GPUs as an explicit `nodes:` value."""

    data: dict[str, Any]
    index: int
    name: str
    nodes: dict[str, list[Any]]
    simulate: bool = True  # candidates simulated beside the others (False: alone on the same GPUs)

    @property
    def where(self) -> str:
        """The planned job's place in the shared spec, for error fields."""
        return f"jobs[{self.index}]"

    @property
    def others(self) -> list[str]:
        return [job["name"] for i, job in enumerate(self.data["jobs"]) if i != self.index]

    @property
    def dynamic(self) -> bool:
        """Events on the shared cluster: a faster link could beat a static bound."""
        return bool(self.data.get("dynamics"))

    def embed(self, candidate: Spec) -> dict[str, Any]:
        """The shared spec with the planned job's sections taken from `candidate` (a plan of it)."""
        data = copy.deepcopy(self.data)
        job = data["jobs"][self.index]
        plan = candidate.model_dump(mode="json")
        for section in _JOB_SECTIONS:
            job[section] = plan[section]
        job["nodes"] = copy.deepcopy(self.nodes)
        data["jobs"][self.index] = job
        return data

    def candidate(self, plan: Spec) -> dict[str, Any]:
        """What a candidate plan is simulated as: beside the others, or (`simulate` off) alone on the
        same GPUs of the same cluster."""
        data = self.embed(plan)
        if not self.simulate:
            data["jobs"] = [data["jobs"][self.index]]
        return data


def job_problem(
    data: dict[str, Any], job_name: str | None, source: Path | None, simulate: bool = True
) -> tuple[Spec, Neighbours]:
    """The planned job as a single-job spec on its GPUs (its sections as written, not yet checked
    across sections: the search replaces its plan) and its neighbours; the others are checked."""
    shared = validate_shared_sections(data, source)
    if job_name is None:
        raise SpecError(
            "search.job",
            f"a spec of several jobs plans one of them beside the others: name it "
            f"(jobs: {', '.join(repr(n) for n in shared.job_names)})",
        )
    index, job = job_named(shared, job_name, "search.job")
    pool, pools = _pools(shared, index)
    for other in pools:
        check_job(place_job(shared, other))
    spec = place_job(shared, pool).spec
    if job.nodes is None:  # the GPUs left are its to use or leave idle, as the search's settings say
        spec = spec.model_copy(update={"mapping": job.mapping})
    data = shared.model_dump(mode="json")
    return spec, Neighbours(data, index, job.name, _nodes(shared, pool), simulate)


def _pools(shared: SharedClusterSpec, index: int) -> tuple[JobPool, list[JobPool]]:
    """The planned job's GPUs and the others': the others placed as written (without it when it takes
    free nodes, which then are every GPU left)."""
    job = shared.jobs[index]
    if job.nodes is not None:
        pools = allocate(shared)
        return pools[index], [p for p in pools if p.index != index]
    others = shared.model_copy(update={"jobs": [j for i, j in enumerate(shared.jobs) if i != index]})
    pools = [JobPool(p.index + (p.index >= index), p.name, p.devices, p.field) for p in allocate(others)]
    held = {d.rank for p in pools for d in p.devices}
    free = tuple(d for d in enumerate_devices(shared.cluster) if d.rank not in held)
    if not free:
        raise SpecError(f"jobs[{index}]", f"job {job.name!r}: the other jobs hold every GPU; give it nodes")
    return JobPool(index, job.name, free, ""), pools


def _nodes(shared: SharedClusterSpec, pool: JobPool) -> dict[str, list[Any]]:
    """The pool as a `nodes:` value: whole nodes by index, parts of nodes as {node, gpus}."""
    per_node: dict[tuple[str, int], list[int]] = {}
    for d in pool.devices:
        per_node.setdefault((d.group_name, d.node_in_group), []).append(d.local_gpu)
    sizes = dict(
        zip(shared.cluster.group_names, (g.gpus_per_node for g in shared.cluster.node_groups), strict=True)
    )
    nodes: dict[str, list[Any]] = {}
    for (group, node), gpus in per_node.items():
        entry = node if len(gpus) == sizes[group] else {"node": node, "gpus": sorted(gpus)}
        nodes.setdefault(group, []).append(entry)
    return nodes
