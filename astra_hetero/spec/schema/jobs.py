"""A cluster shared by several training jobs: `jobs:`, each a spec without the cluster and network.

A job names its model, parallel plan, mapping and partition like a single-job spec, when it starts
(`start_ms`) and how many iterations it runs, and optionally which nodes it may use (`nodes:`, node
group name -> node indices in that group, or `{node, gpus}` for part of a node). The cluster, the
network and how communication and compute are priced are the cluster's, shared by every job. A spec
without `jobs:` is a single-job `Spec`, unchanged.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from astra_hetero.dynamics.events import DynamicEvent
from astra_hetero.spec.schema.base import Strict
from astra_hetero.spec.schema.execution import CollectiveSpec, ComputeSpec, ScopeSpec
from astra_hetero.spec.schema.hardware import ClusterSpec
from astra_hetero.spec.schema.model import ModelSpec
from astra_hetero.spec.schema.network import NetworkSpec
from astra_hetero.spec.schema.parallelism import MappingSpec, ParallelismSpec, PartitionSpec
from astra_hetero.spec.schema.precision import PrecisionSpec
from astra_hetero.spec.types import Iterations, real, whole

StartMs = real(0.0, 1e9)  # as the dynamics events' times: up to 1e9 ms
NodeIndex = whole(0, 1_000_000)
GpuIndex = whole(0, 100_000)


class NodeSlice(Strict):
    """Part of one node: `{node: 0, gpus: [0, 1, 2, 3]}` (GPU indices inside the node)."""

    node: NodeIndex
    gpus: list[GpuIndex] = Field(min_length=1, description="GPU indices inside the node")

    @field_validator("gpus")
    @classmethod
    def _distinct(cls, gpus: list[int]) -> list[int]:
        if len(set(gpus)) != len(gpus):
            raise ValueError(f"lists a GPU twice: {gpus}")
        return sorted(gpus)


NodeSelector = NodeIndex | NodeSlice


class JobSpec(Strict):
    name: str = Field(min_length=1, max_length=64, description="the job's name in results and reports")
    model: ModelSpec
    parallelism: ParallelismSpec
    precision: PrecisionSpec = PrecisionSpec()
    mapping: MappingSpec = MappingSpec()
    partition: PartitionSpec = PartitionSpec()
    scope: ScopeSpec | None = Field(None, description="simulate a cut-down iteration (layers, micro-batches)")
    start_ms: StartMs = Field(
        0.0, description="when the job's first iteration starts, ms from the run's start"
    )
    iterations: Iterations = Field(1, description="back-to-back training iterations of this job")
    nodes: dict[str, list[NodeSelector]] | None = Field(
        None,
        description="node group name -> nodes of that group the job may use (indices, or {node, gpus} "
        "for part of a node); default: whole nodes no other job holds, in cluster order",
    )

    @field_validator("name")
    @classmethod
    def _printable(cls, name: str) -> str:
        if name != name.strip() or not name.isprintable() or "/" in name:
            raise ValueError(f"{name!r}: use printable characters without '/' or surrounding spaces")
        return name

    @field_validator("nodes")
    @classmethod
    def _nonempty(cls, nodes: dict[str, list[Any]] | None) -> dict[str, list[Any]] | None:
        if nodes is not None and not any(nodes.values()):
            raise ValueError("names no node; leave `nodes` out to take free nodes")
        return nodes


class SharedClusterSpec(Strict):
    """One cluster, one network, several jobs (`jobs:`): what `astra-hetero run` simulates together."""

    name: str = "shared-cluster"
    cluster: ClusterSpec
    network: NetworkSpec = NetworkSpec()
    collectives: CollectiveSpec = CollectiveSpec()
    compute: ComputeSpec = ComputeSpec()
    calibration: str | None = Field(None, description="CSV of measured operator times, relative to the spec")
    dynamics: list[DynamicEvent] = Field(
        default_factory=list, description="timed events on the shared cluster: link rates, slow GPUs, ..."
    )
    jobs: list[JobSpec] = Field(min_length=1, description="the training jobs sharing the cluster")

    @property
    def job_names(self) -> list[str]:
        return [job.name for job in self.jobs]

    @property
    def iterations(self) -> int:
        """The most iterations any job runs (the run directory's dynamics document)."""
        return max(job.iterations for job in self.jobs)
