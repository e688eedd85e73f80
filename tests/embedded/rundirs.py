"""Small run directories written in code: Chakra traces through chakra_io and hand-written topologies."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from astra_hetero import chakra_io
from astra_hetero.chakra_io import pb


def _node(
    node_id: int, name: str, kind: int, deps: tuple[int, ...], attrs: dict[str, Any], duration_us: int = 0
) -> pb.Node:
    node = pb.Node(id=node_id, name=name, type=kind, duration_micros=duration_us)
    node.data_deps.extend(deps)
    for key, value in {**attrs, "is_cpu_op": False}.items():
        if isinstance(value, bool):
            node.attr.add(name=key, bool_val=value)
        elif isinstance(value, str):
            node.attr.add(name=key, string_val=value)
        else:
            node.attr.add(name=key, int64_val=value)
    return node


def comp(node_id: int, duration_us: int, deps: tuple[int, ...] = (), name: str = "") -> pb.Node:
    return _node(node_id, name or f"comp{node_id}", pb.COMP_NODE, deps, {}, duration_us)


def coll(
    node_id: int, kind: str, size: int, pg: str = "", deps: tuple[int, ...] = (), name: str = ""
) -> pb.Node:
    attrs = {"comm_type": chakra_io.collective_type(kind), "comm_size": size}
    if pg:
        attrs["pg_name"] = pg
    return _node(node_id, name or f"{kind}{node_id}", pb.COMM_COLL_NODE, deps, attrs)


def send(node_id: int, src: int, dst: int, tag: int, size: int, deps: tuple[int, ...] = ()) -> pb.Node:
    attrs = {"comm_src": src, "comm_dst": dst, "comm_tag": tag, "comm_size": size}
    return _node(node_id, f"send{node_id}", pb.COMM_SEND_NODE, deps, attrs)


def recv(node_id: int, src: int, dst: int, tag: int, size: int, deps: tuple[int, ...] = ()) -> pb.Node:
    attrs = {"comm_src": src, "comm_dst": dst, "comm_tag": tag, "comm_size": size}
    return _node(node_id, f"recv{node_id}", pb.COMM_RECV_NODE, deps, attrs)


def single_switch(num_gpus: int, gbps: float = 400, delay: str = "0.0005ms") -> str:
    links = [f"{gpu} {num_gpus} {gbps}Gbps {delay} 0" for gpu in range(num_gpus)]
    return f"{num_gpus + 1} 1 {num_gpus}\n{num_gpus}\n" + "\n".join(links) + "\n"


def machines(
    nic_gbps: list[float],
    gpus_per_machine: int,
    nvlink_gbps: float = 3600,
    nvlink_delay: str = "0.00025ms",
    nic_delay: str = "0.0005ms",
) -> str:
    """One NVSwitch per machine; each GPU has a NIC (a switch node, so that intra-machine traffic's
    shortest path is the NVSwitch) linked at the machine's rate to one top switch."""
    num_gpus, num_machines = len(nic_gbps) * gpus_per_machine, len(nic_gbps)
    nic0, top = num_gpus + num_machines, 2 * num_gpus + num_machines
    links = []
    for gpu in range(num_gpus):
        machine = gpu // gpus_per_machine
        links.append(f"{gpu} {num_gpus + machine} {nvlink_gbps}Gbps {nvlink_delay} 0")
        links.append(f"{gpu} {nic0 + gpu} {nic_gbps[machine]}Gbps {nic_delay} 0")
        links.append(f"{nic0 + gpu} {top} {nic_gbps[machine]}Gbps 0ms 0")
    switches = " ".join(str(s) for s in range(num_gpus, top + 1))
    return f"{top + 1} {top + 1 - num_gpus} {len(links)}\n{switches}\n" + "\n".join(links) + "\n"


def write_run_dir(
    root: Path,
    traces: dict[int, list[pb.Node]],
    topology: str,
    groups: dict[str, list[int]] | None = None,
    manifest: dict[str, Any] | None = None,
    prefix: str = "workload",
) -> Path:
    (root / "workload").mkdir(parents=True, exist_ok=True)
    (root / "ns3").mkdir(exist_ok=True)
    for rank, nodes in traces.items():
        records = [chakra_io.metadata_record()] + [chakra_io.frame(node) for node in nodes]
        chakra_io.write_trace(root / f"workload/{prefix}.{rank}.et", records)
    if groups is not None:
        (root / "workload/comm_groups.json").write_text(json.dumps(groups))
    if manifest is not None:
        (root / "manifest.json").write_text(json.dumps({"num_ranks": len(traces), **manifest}))
    (root / "ns3/topology.txt").write_text(topology)
    return root
