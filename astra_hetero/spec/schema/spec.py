"""The whole experiment spec: every section together."""

from __future__ import annotations

from typing import Any

from pydantic import Field, PrivateAttr

from astra_hetero.dynamics.events import DynamicEvent
from astra_hetero.errors import SpecError
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
    # Whether the calibration table lies outside the spec's directory: then its errors quote nothing
    # of it (`calibration:` may name any file). Set when the spec is loaded; private until known.
    _calibration_private: bool = PrivateAttr(True)

    @property
    def calibration_private(self) -> bool:
        return self._calibration_private

    def with_(self, **sections: Any) -> Spec:
        """This spec with some fields changed, validated again like a spec file (field checks and
        the checks across sections): `spec.with_(parallelism={"tp": 4, "pp": 2})`. A mapping merges
        into the section it names, key by key; any other value (a list, a number) replaces it."""
        from astra_hetero.spec.load import parse_spec  # the loader imports this module

        unknown = sorted(set(sections) - set(type(self).model_fields))
        if unknown:
            raise SpecError(unknown[0], f"no such section; sections: {', '.join(type(self).model_fields)}")
        data = _merged(self.model_dump(mode="json"), sections)
        changed = parse_spec(data)
        if changed.calibration == self.calibration:  # the same file: as private as it was found
            changed._calibration_private = self._calibration_private
        return changed


def _merged(data: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    out = dict(data)
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merged(out[key], value)
        else:
            out[key] = value
    return out
