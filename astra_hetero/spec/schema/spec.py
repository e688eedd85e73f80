"""The whole experiment spec: every section together."""

from __future__ import annotations

from pydantic import Field

from astra_hetero.dynamics.events import DynamicEvent
from astra_hetero.spec.schema.base import Strict
from astra_hetero.spec.schema.execution import CollectiveSpec, ComputeSpec, ScopeSpec
from astra_hetero.spec.schema.hardware import ClusterSpec
from astra_hetero.spec.schema.model import ModelSpec
from astra_hetero.spec.schema.network import NetworkSpec
from astra_hetero.spec.schema.parallelism import MappingSpec, ParallelismSpec, PartitionSpec
from astra_hetero.spec.schema.precision import PrecisionSpec
from astra_hetero.spec.types import (
    Iterations,
)


class Spec(Strict):
    name: str = "experiment"
    model: ModelSpec
    cluster: ClusterSpec
    network: NetworkSpec = NetworkSpec()
    parallelism: ParallelismSpec
    precision: PrecisionSpec = PrecisionSpec()
    mapping: MappingSpec = MappingSpec()
    partition: PartitionSpec = PartitionSpec()
    collectives: CollectiveSpec = CollectiveSpec()
    compute: ComputeSpec = ComputeSpec()
    calibration: str | None = Field(None, description="CSV of measured operator times, relative to the spec")
    scope: ScopeSpec | None = Field(None, description="simulate a cut-down iteration (layers, micro-batches)")
    dynamics: list[DynamicEvent] = Field(
        default_factory=list, description="timed events: link rates, slow GPUs, background traffic, jitter"
    )
    iterations: Iterations = Field(1, description="back-to-back training iterations to simulate")
