"""Chakra traces as MLCommons' PyTorch converter writes them, made by running that converter.

No GPU (nor PyTorch) is needed: `linked_trace` writes what `chakra_trace_link` hands the converter —
PyTorch's execution-trace nodes (schema 1.1.1-chakra.0.0.4) with the Kineto GPU kernels linked in
(`cat`, `ts`, `exclusive_dur`, `stream`, a collective kernel's `pg_name` and input tensor) — for a
small data-parallel step: a process-group record, per layer a CPU `aten::mm` launching a GEMM kernel,
then the gradient all-reduce (`c10d::allreduce_` → `record_param_comms` → `nccl:all_reduce` → the
NCCL kernel). `convert` runs mlc-chakra's `PyTorchConverter` on it; the result is the converter's
own output: host operators with `is_cpu_op` true, GPU kernels with measured durations, a
COMM_COLL node with `comm_type`, `comm_size` and `pg_name`, the METADATA node holding the groups.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SCHEMA = "1.1.1-chakra.0.0.4"


def _node(node_id: int, name: str, parent: int, **extra: Any) -> dict[str, Any]:
    node = {
        "id": node_id,
        "name": name,
        "ctrl_deps": parent,
        "inputs": {"values": [], "shapes": [], "types": []},
        "outputs": {"values": [], "shapes": [], "types": []},
        "attrs": [
            {"name": "rf_id", "type": "uint64", "value": node_id},
            {"name": "fw_parent", "type": "uint64", "value": 0},
            {"name": "seq_id", "type": "int64", "value": -1},
            {"name": "scope", "type": "uint64", "value": 0},
            {"name": "tid", "type": "uint64", "value": 1},
            {"name": "fw_tid", "type": "uint64", "value": 0},
            {"name": "op_schema", "type": "string", "value": ""},
        ],
    }
    node.update(extra)
    return node


def linked_trace(
    rank: int, num_ranks: int, layers: int, gemm_us: int, elements: int, groups: dict[str, list[int]], pg: str
) -> dict[str, Any]:
    declared = [
        {
            "pg_name": "0",
            "pg_desc": "default_pg",
            "backend_config": "cuda:nccl",
            "pg_size": num_ranks,
            "ranks": [],
        }
    ] + [
        {
            "pg_name": name,
            "pg_desc": "undefined",
            "backend_config": "cuda:nccl",
            "pg_size": len(r),
            "ranks": r,
        }
        for name, r in groups.items()
    ]
    nodes = [
        _node(1, "[pytorch|profiler|execution_trace|thread]", 0),
        _node(
            2,
            "## process_group:init ##",
            1,
            inputs={"values": [json.dumps(declared)], "shapes": [[]], "types": ["String"]},
        ),
    ]
    next_id, ts = 3, 1000
    for layer in range(layers):
        mm = _node(next_id, "aten::mm", 1, exclusive_dur=12 + rank, inclusive_dur=12 + rank, ts=ts)
        kernel = _node(
            next_id + 1,
            f"sm90_xmma_gemm_bf16_layer{layer}",
            next_id,
            cat="kernel",
            exclusive_dur=gemm_us,
            inclusive_dur=gemm_us,
            ts=ts + 5,
            stream=7,
        )
        nodes += [mm, kernel]
        next_id, ts = next_id + 2, ts + gemm_us + 20
    tensor = [90, 91, 0, elements, 4, "cuda:0"]
    nodes += [
        _node(next_id, "c10d::allreduce_", 1, exclusive_dur=8, inclusive_dur=30, ts=ts),
        _node(
            next_id + 1,
            "record_param_comms",
            next_id,
            exclusive_dur=5,
            inclusive_dur=20,
            ts=ts + 2,
            pg_name=pg,
        ),
        _node(next_id + 2, "nccl:all_reduce", next_id + 1, exclusive_dur=3, inclusive_dur=3, ts=ts + 4),
        _node(
            next_id + 3,
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
            next_id + 2,
            cat="kernel",
            exclusive_dur=200,
            inclusive_dur=200,
            ts=ts + 6,
            stream=20,
            pg_name=pg,
            inputs={"values": [tensor], "shapes": [[elements]], "types": ["Tensor(float)"]},
        ),
    ]
    return {
        "schema": SCHEMA,
        "pid": 1000 + rank,
        "time": "2025-01-01 00:00:00",
        "start_ts": 0,
        "finish_ts": ts + 500,
        "nodes": nodes,
    }


def convert(
    root: Path,
    num_ranks: int = 2,
    layers: int = 3,
    gemm_us: int = 150,
    elements: int = 1 << 20,
    groups: dict[str, list[int]] | None = None,
    pg_name: str = "0",
) -> Path:
    """Converted traces `root/pytorch.<rank>.et`; returns the prefix. `groups`: process groups besides
    the default "0"; the all-reduce runs on `pg_name` ("rank": the group holding the rank)."""
    from chakra.src.converter.pytorch_converter import PyTorchConverter

    root.mkdir(parents=True, exist_ok=True)
    groups = groups or {}
    for rank in range(num_ranks):
        pg = next(n for n, r in groups.items() if rank in r) if pg_name == "rank" else pg_name
        linked = root / f"linked.{rank}.json"
        linked.write_text(json.dumps(linked_trace(rank, num_ranks, layers, gemm_us, elements, groups, pg)))
        PyTorchConverter().convert(str(linked), str(root / f"pytorch.{rank}.et"), False)
    return root / "pytorch"


def without_metadata(prefix: Path, num_ranks: int, target: Path) -> Path:
    """The same traces without their METADATA node (its dependants depend on its parent instead):
    what ASTRA-sim 518bd51, which aborts on METADATA nodes, can run."""
    from astra_hetero import chakra_io
    from astra_hetero.chakra_io import pb

    target.mkdir(parents=True, exist_ok=True)
    for rank in range(num_ranks):
        records = list(chakra_io.iter_records(Path(f"{prefix}.{rank}.et").read_bytes()))
        nodes = []
        for record in records[1:]:
            node = pb.Node()
            node.ParseFromString(record)
            nodes.append(node)
        parent = {n.id: list(n.ctrl_deps) for n in nodes if n.type == pb.METADATA_NODE}
        out = [chakra_io.frame_bytes(records[0])]
        for node in nodes:
            if node.id in parent:
                continue
            for deps in (node.data_deps, node.ctrl_deps):
                ids = [p for d in deps for p in (parent.get(d, [d]))]
                del deps[:]
                deps.extend(ids)
            out.append(chakra_io.frame(node))
        chakra_io.write_trace(target / f"pytorch.{rank}.et", out)
    return target / "pytorch"
