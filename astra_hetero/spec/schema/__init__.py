"""The experiment spec: strict, typed, with units in field names.

Unknown keys are rejected everywhere. Sections that accept a preset name (`model`, `gpu`,
`intra_node_fabric`) merge the preset's values under any field the user gives, so a user can start
from a preset and override any single number. One module per section; this face re-exports them.
"""

from astra_hetero.spec.schema.base import Strict
from astra_hetero.spec.schema.execution import (
    CollectiveSpec,
    ComputeSpec,
    NcclScope,
    NcclTestsTable,
    ScopeSpec,
)
from astra_hetero.spec.schema.hardware import (
    ClusterSpec,
    FabricSpec,
    GpuSpec,
    NicSpec,
    NodeGroupSpec,
    ScaleUpDomainSpec,
)
from astra_hetero.spec.schema.model import ModelSpec
from astra_hetero.spec.schema.network import DcqcnSpec, EcnThreshold, NetworkSpec, Ns3Spec
from astra_hetero.spec.schema.parallelism import (
    LayerSplit,
    MappingSpec,
    ParallelismSpec,
    PartitionSpec,
    Split,
)
from astra_hetero.spec.schema.precision import PrecisionSpec
from astra_hetero.spec.schema.spec import Spec

__all__ = [
    "ClusterSpec",
    "CollectiveSpec",
    "ComputeSpec",
    "DcqcnSpec",
    "EcnThreshold",
    "FabricSpec",
    "GpuSpec",
    "LayerSplit",
    "MappingSpec",
    "ModelSpec",
    "NcclScope",
    "NcclTestsTable",
    "NetworkSpec",
    "NicSpec",
    "NodeGroupSpec",
    "Ns3Spec",
    "ParallelismSpec",
    "PartitionSpec",
    "PrecisionSpec",
    "ScaleUpDomainSpec",
    "ScopeSpec",
    "Spec",
    "Split",
    "Strict",
]
