"""Each job of a shared cluster as an ordinary single-job spec on the GPUs it owns.

A job's spec is the job's sections on a *sub-cluster*: the node groups of the shared cluster cut
down to the job's nodes (and GPUs, where it takes part of a node), named as in the shared cluster so
that its mapping's names still hold. Every single-job check (TP inside a node, mapping capacity,
partition, memory) and the whole workload planner then run unchanged on it; `ranks` maps the
sub-cluster's ranks back to the shared cluster's. Errors found there name the job and its field
(`jobs[1].parallelism.tp`), or the shared cluster's own node group.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from astra_hetero.errors import FieldError, SpecError
from astra_hetero.jobs.allocation import JobPool, allocate
from astra_hetero.spec.schema import ClusterSpec, NodeGroupSpec, ScaleUpDomainSpec, Spec
from astra_hetero.spec.schema.jobs import JobSpec, SharedClusterSpec

# fields of a job's node group that are its share of the cluster's group (set by its `nodes:`)
_SHARE_FIELDS = (".gpus_per_node", ".count", ".scale_up_domain.gpus")


@dataclass(frozen=True)
class PlacedJob:
    index: int
    job: JobSpec
    spec: Spec  # the job alone on its sub-cluster
    ranks: tuple[int, ...]  # sub-cluster rank -> the shared cluster's rank
    group_index: tuple[int, ...]  # sub-cluster node group -> the shared cluster's

    @property
    def name(self) -> str:
        return self.job.name

    @property
    def where(self) -> str:
        return f"jobs[{self.index}]"

    def field(self, field: str) -> str:
        """A field of the job's spec as a field of the shared spec: its nodes' size and count are the
        job's share (`jobs[i].nodes.<group>` where it names them), the rest of a node group the
        cluster's."""
        prefix = "cluster.node_groups["
        if field.startswith(prefix):
            inside, _, rest = field[len(prefix) :].partition("]")
            if inside.isdigit() and int(inside) < len(self.group_index):
                name = self.spec.cluster.group_names[int(inside)]
                if rest in _SHARE_FIELDS and self.job.nodes is not None and name in self.job.nodes:
                    return f"{self.where}.nodes.{name}"
                return f"{prefix}{self.group_index[int(inside)]}]{rest}"
        return f"{self.where}.{field}" if field else self.where


@contextmanager
def job_errors(placed: PlacedJob) -> Iterator[None]:
    """Errors about the job's spec, re-raised naming the job and the shared spec's field."""
    try:
        yield
    except FieldError as exc:
        reason = exc.reason if exc.reason.startswith("job ") else f"job {placed.name!r}: {exc.reason}"
        raise type(exc)(placed.field(exc.field), reason) from None


def place_jobs(shared: SharedClusterSpec) -> list[PlacedJob]:
    """Every job on its own GPUs, as a single-job spec (its cross-section checks not yet run)."""
    return [place_job(shared, pool) for pool in allocate(shared)]


def place_job(shared: SharedClusterSpec, pool: JobPool) -> PlacedJob:
    """One job as a single-job spec on the GPUs of `pool`."""
    job = shared.jobs[pool.index]
    cluster, group_index = sub_cluster(shared.cluster, pool)
    mapping = job.mapping
    if job.nodes is None:  # whole nodes were taken for it: what its plan leaves of them idles
        mapping = mapping.model_copy(update={"allow_idle_gpus": True})
    spec = Spec(
        name=job.name,
        model=job.model,
        cluster=cluster,
        network=shared.network,
        parallelism=job.parallelism,
        precision=job.precision,
        mapping=mapping,
        partition=job.partition,
        collectives=shared.collectives,
        compute=shared.compute,
        calibration=shared.calibration,
        scope=job.scope,
        iterations=job.iterations,
    )
    return PlacedJob(pool.index, job, spec, tuple(d.rank for d in pool.devices), group_index)


def sub_cluster(cluster: ClusterSpec, pool: JobPool) -> tuple[ClusterSpec, tuple[int, ...]]:
    """The shared cluster's node groups cut down to the pool's nodes (in cluster order), and the
    shared index of each group kept."""
    by_group: dict[int, dict[int, int]] = {}  # group index -> node in group -> GPUs the job has there
    for d in pool.devices:
        nodes = by_group.setdefault(d.group_index, {})
        nodes[d.node_in_group] = nodes.get(d.node_in_group, 0) + 1
    names = cluster.group_names
    groups = []
    for g, nodes in sorted(by_group.items()):
        group = cluster.node_groups[g]
        counts = sorted(set(nodes.values()))
        if len(counts) > 1:
            raise SpecError(
                f"jobs[{pool.index}].nodes.{names[g]}",
                f"job {pool.name!r} takes {' and '.join(map(str, counts))} GPUs of different nodes of node "
                f"group {names[g]!r}; each of a job's nodes in one group must give it as many GPUs",
            )
        gpus = counts[0]
        nic = group.nic
        if gpus != group.gpus_per_node and nic.count == group.gpus_per_node:
            nic = nic.model_copy(update={"count": gpus})  # one NIC per GPU stays one per GPU
        update = {
            "name": names[g],
            "count": len(nodes),
            "gpus_per_node": gpus,
            "nic": nic,
            "scale_up_domain": _domain(group, list(nodes), gpus),
        }
        groups.append(group.model_copy(update=update))
    return cluster.model_copy(update={"node_groups": groups}), tuple(sorted(by_group))


def _domain(group: NodeGroupSpec, nodes: list[int], gpus: int) -> ScaleUpDomainSpec | None:
    """The job's share of a group's scale-up domains: each domain it touches must give it the same
    number of whole nodes, which then form its own domains; otherwise each node is its own domain
    (TP groups stay inside nodes)."""
    if group.scale_up_domain is None or gpus != group.gpus_per_node:
        return None
    per_domain = Counter(node // group.nodes_per_domain for node in nodes)
    sizes = set(per_domain.values())
    if len(sizes) != 1 or (size := sizes.pop()) == 1:
        return None
    return ScaleUpDomainSpec(gpus=size * gpus)
