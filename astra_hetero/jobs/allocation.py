"""Which GPUs each job owns: its `nodes:` as written, else whole free nodes in cluster order.

Ownership is checked per GPU: a GPU named by two jobs' `nodes:` is an error naming both jobs and
fields. Jobs without `nodes:` then take, in job order, whole nodes that no job holds any GPU of — as
many of each node group as the cells their mapping puts there need (cluster order for the default
mapping). GPUs no job owns stay idle.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from astra_hetero.errors import SpecError
from astra_hetero.spec.devices import Device, enumerate_devices
from astra_hetero.spec.schema.hardware import ClusterSpec
from astra_hetero.spec.schema.jobs import JobSpec, NodeSlice, SharedClusterSpec
from astra_hetero.spec.schema.parallelism import ParallelismSpec


@dataclass(frozen=True)
class JobPool:
    """The GPUs one job owns, in rank order; `field` is where they were named (`jobs[i].nodes`) or ''
    for free nodes taken for it."""

    index: int
    name: str
    devices: tuple[Device, ...]
    field: str

    @property
    def num_gpus(self) -> int:
        return len(self.devices)


def allocate(shared: SharedClusterSpec) -> list[JobPool]:
    """Every job's GPUs (SpecError naming the job and field when they overlap or run out)."""
    cluster = shared.cluster
    devices = enumerate_devices(cluster)
    by_place = {(d.group_name, d.node_in_group, d.local_gpu): d for d in devices}
    owner: dict[int, tuple[int, str]] = {}  # rank -> (job index, field that named it)
    pools: dict[int, JobPool] = {}
    for i, job in enumerate(shared.jobs):
        if job.nodes is not None:
            chosen = _named_gpus(cluster, by_place, i, job)
            for rank, field in chosen:
                if rank in owner:
                    j, other = owner[rank]
                    d = devices[rank]
                    raise SpecError(
                        field,
                        f"job {job.name!r}: GPU {d.local_gpu} of node {d.node_in_group} of node group "
                        f"{d.group_name!r} already belongs to job {shared.jobs[j].name!r} ({other}); no "
                        "GPU may be in two jobs",
                    )
                owner[rank] = (i, field)
            ranks = sorted(rank for rank, _ in chosen)
            pools[i] = JobPool(i, job.name, tuple(devices[r] for r in ranks), f"jobs[{i}].nodes")
    for i, job in enumerate(shared.jobs):
        if job.nodes is None:
            ranks = _free_nodes(cluster, devices, owner, shared, i)
            for rank in ranks:
                owner[rank] = (i, f"jobs[{i}]")
            pools[i] = JobPool(i, job.name, tuple(devices[r] for r in ranks), "")
    return [pools[i] for i in range(len(shared.jobs))]


def _named_gpus(
    cluster: ClusterSpec, by_place: dict[tuple[str, int, int], Device], i: int, job: JobSpec
) -> list[tuple[int, str]]:
    """(rank, field) of every GPU the job's `nodes:` names."""
    assert job.nodes is not None
    names = cluster.group_names
    chosen: list[tuple[int, str]] = []
    for group_name, selectors in job.nodes.items():
        where = f"jobs[{i}].nodes.{group_name}"
        if group_name not in names:
            raise SpecError(where, f"job {job.name!r}: unknown node group; known: {', '.join(names)}")
        group = cluster.node_groups[names.index(group_name)]
        seen: set[int] = set()
        for k, selector in enumerate(selectors):
            field = f"{where}[{k}]"
            node = selector.node if isinstance(selector, NodeSlice) else selector
            gpus = selector.gpus if isinstance(selector, NodeSlice) else range(group.gpus_per_node)
            if node >= group.count:
                raise SpecError(
                    field,
                    f"job {job.name!r}: node {node} outside node group {group_name!r}'s 0..{group.count - 1}",
                )
            if node in seen:
                raise SpecError(field, f"job {job.name!r}: node {node} is listed twice")
            seen.add(node)
            for gpu in gpus:
                if gpu >= group.gpus_per_node:
                    raise SpecError(
                        f"{field}.gpus",
                        f"job {job.name!r}: GPU {gpu} outside the node's 0..{group.gpus_per_node - 1}",
                    )
                chosen.append((by_place[(group_name, node, gpu)].rank, field))
    return chosen


def _free_nodes(
    cluster: ClusterSpec,
    devices: Sequence[Device],
    owner: dict[int, tuple[int, str]],
    shared: SharedClusterSpec,
    i: int,
) -> list[int]:
    """Ranks of the whole free nodes job `i` needs: per node group its cells name, or in cluster order."""
    job = shared.jobs[i]
    par = job.parallelism
    nodes: dict[int, list[int]] = {}  # global node -> its ranks, cluster order
    for d in devices:
        nodes.setdefault(d.node, []).append(d.rank)
    free = [n for n, ranks in nodes.items() if not any(r in owner for r in ranks)]
    held = sorted({shared.jobs[j].name for j, _ in owner.values()})
    others = ""
    if held:
        others = (
            f" (job {held[0]!r} holds the rest)"
            if len(held) == 1
            else f" (jobs {', '.join(map(repr, held))} hold the rest)"
        )
    cells = _cells_per_group(cluster, i, job)
    if cells is None:  # cluster order: whole free nodes until the plan's GPUs are covered
        need, taken = world_size(par), []
        for n in free:
            if sum(len(nodes[m]) for m in taken) >= need:
                break
            taken.append(n)
        have = sum(len(nodes[m]) for m in taken)
        if have < need:
            raise SpecError(
                f"jobs[{i}].parallelism",
                f"job {job.name!r} needs {world_text(par)} GPUs but the free nodes hold {have}{others}",
            )
        return [r for n in taken for r in nodes[n]]
    taken = []
    for name, count in cells.items():
        group = cluster.node_groups[cluster.group_names.index(name)]
        want = math.ceil(count * par.model_parallel_cell / group.gpus_per_node)
        group_free = [n for n in free if devices[nodes[n][0]].group_name == name]
        if len(group_free) < want:
            raise SpecError(
                f"jobs[{i}].mapping",
                f"job {job.name!r} puts {count} cells of {par.model_parallel_cell} GPUs on node group "
                f"{name!r}: {want} nodes, "
                f"but {len(group_free)} of its nodes are free{others}",
            )
        taken += group_free[:want]
    return sorted(r for n in taken for r in nodes[n])


def _cells_per_group(cluster: ClusterSpec, i: int, job: JobSpec) -> dict[str, int] | None:
    """Cells per node group as the job's mapping names them (None: the default, cluster-order mapping)."""
    mapping, par = job.mapping, job.parallelism
    named: list[tuple[str, str]] = []
    if mapping.grid is not None:
        named = [(f"grid[{s}][{r}]", n) for s, row in enumerate(mapping.grid) for r, n in enumerate(row)]
    elif mapping.stages is not None:
        named = [(f"stages[{s}]", n) for s, n in enumerate(mapping.stages) for _ in range(par.dp)]
    elif mapping.replicas is not None:
        named = [(f"replicas[{r}]", n) for r, n in enumerate(mapping.replicas) for _ in range(par.pp)]
    else:
        return None
    cells: dict[str, int] = {}
    for where, name in named:
        if name not in cluster.group_names:
            raise SpecError(
                f"jobs[{i}].mapping.{where}",
                f"job {job.name!r}: unknown node group {name!r}; known: {', '.join(cluster.group_names)}",
            )
        cells[name] = cells.get(name, 0) + 1
    return cells


def world_size(par: ParallelismSpec) -> int:
    """The GPUs a plan takes: tp · cp · pp · dp."""
    return par.model_parallel_cell * par.pp * par.dp


def world_text(par: ParallelismSpec) -> str:
    """`tp·pp·dp = 4·1·2 = 8` (with cp where it is more than 1), as the spec's own checks write it."""
    if par.cp > 1:
        return f"tp·cp·pp·dp = {par.tp}·{par.cp}·{par.pp}·{par.dp} = {world_size(par)}"
    return f"tp·pp·dp = {par.tp}·{par.pp}·{par.dp} = {world_size(par)}"
