"""The cluster's GPUs in rank order.

Rank r is the r-th GPU when node groups are listed in spec order, nodes in order within a group and
GPUs in order within a node. The workload generator and every topology renderer number GPUs this
way, so ASTRA-sim's NPU ids (the first N nodes of the ns-3 topology) are the trace ranks.
"""

from __future__ import annotations

from dataclasses import dataclass

from astra_hetero.spec.schema import ClusterSpec, NodeGroupSpec


@dataclass(frozen=True)
class Device:
    rank: int
    node: int  # global node index
    group_index: int
    group_name: str
    local_gpu: int  # index inside its node
    spec: NodeGroupSpec

    @property
    def gpu_type(self) -> str:
        return self.spec.gpu.type_key


def enumerate_devices(cluster: ClusterSpec) -> list[Device]:
    devices: list[Device] = []
    node = 0
    for group_index, (group, name) in enumerate(zip(cluster.node_groups, cluster.group_names, strict=True)):
        for _ in range(group.count):
            for local in range(group.gpus_per_node):
                devices.append(Device(len(devices), node, group_index, name, local, group))
            node += 1
    return devices


def too_few_gpus(owner: str, num_gpus: int, num_cells: int, tp: int) -> str:
    """The reason a mapping gives when `owner` (a node group, or the cluster) cannot hold its cells."""
    return (
        f"{owner} has {num_gpus} GPUs, too few for the {num_cells} cells mapped to it "
        f"({tp} GPUs each, {num_cells * tp} in all)"
    )
