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
    domain: int = 0  # global scale-up domain index (a node outside any domain is a domain itself)
    node_in_group: int = 0

    @property
    def domain_local(self) -> int:
        """Index inside its scale-up domain."""
        return (self.node_in_group % self.spec.nodes_per_domain) * self.spec.gpus_per_node + self.local_gpu

    @property
    def gpu_type(self) -> str:
        return self.spec.gpu.type_key


def enumerate_devices(cluster: ClusterSpec) -> list[Device]:
    """Every GPU in rank order. Scale-up domains are numbered like nodes: in spec order, a group's
    domains taking `nodes_per_domain` consecutive nodes each."""
    devices: list[Device] = []
    node = domain = 0
    for group_index, (group, name) in enumerate(zip(cluster.node_groups, cluster.group_names, strict=True)):
        for index in range(group.count):
            for local in range(group.gpus_per_node):
                devices.append(Device(len(devices), node, group_index, name, local, group, domain, index))
            node += 1
            domain += int((index + 1) % group.nodes_per_domain == 0)
    return devices


def too_few_gpus(owner: str, num_gpus: int, num_cells: int, tp: int) -> str:
    """The reason a mapping gives when `owner` (a node group, or the cluster) cannot hold its cells."""
    return (
        f"{owner} has {num_gpus} GPUs, too few for the {num_cells} cells mapped to it "
        f"({tp} GPUs each, {num_cells * tp} in all)"
    )
