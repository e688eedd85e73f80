"""The whole experiment spec: every section together."""

from __future__ import annotations

from pydantic import Field, PrivateAttr

from astra_hetero.dynamics.events import DynamicEvent
from astra_hetero.spec.schema.base import Strict
from astra_hetero.spec.schema.execution import CollectiveSpec, ComputeSpec, ScopeSpec
from astra_hetero.spec.schema.hardware import ClusterSpec
from astra_hetero.spec.schema.model import ModelSpec
from astra_hetero.spec.schema.network import NetworkSpec
from astra_hetero.spec.schema.parallelism import MappingSpec, ParallelismSpec, PartitionSpec
from astra_hetero.spec.types import (
    Iterations,
)


class Spec(Strict):
    name: str = "experiment"
    model: ModelSpec
    cluster: ClusterSpec
    network: NetworkSpec = NetworkSpec()
    parallelism: ParallelismSpec
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
    # Whether the calibration table lies outside the spec's directory: then its errors quote nothing
    # of it (`calibration:` may name any file). Set when the spec is loaded; private until known.
    _calibration_private: bool = PrivateAttr(True)

    @property
    def calibration_private(self) -> bool:
        return self._calibration_private
