"""Transforms: a point's spec turned into another one when the point runs (in the worker).

`plan` replaces the point's plan by the one the planner picks (planning.py).

`homogenize` builds what a homogeneous simulator would be given for the same cluster and plan. Every
node keeps its place (group names, node counts, GPUs per node, so mappings stay valid) and the network
keeps its shape (topology, nodes per leaf, oversubscription; spines and uplinks follow from the NICs as
for any spec), but every node's GPU, intra-node fabric and NIC become one device:

- `most_common`: the GPU that most GPUs are (first in cluster order on a tie), with the fabric and NIC
  of the largest node group that has it;
- `average`: the GPU-weighted mean device. Its effective compute and memory throughput (peak ×
  efficiency × multiplier) are the means of the GPUs' effective throughputs; its other numbers are
  means; anything that is not a number is the most common device's. The fabric's bandwidth and
  latency are means; it has one NIC per GPU at the mean per-GPU scale-out bandwidth
  (NIC rate × NICs per node / GPUs per node).

The layer and micro-batch splits are pinned to the ones the original spec resolves to (its `auto`
splits included), so that the devices are the only difference between the two predictions.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from astra_hetero.errors import SpecError
from astra_hetero.jobs.load import RunSpec
from astra_hetero.spec import Spec, parse_spec
from astra_hetero.spec.schema import NodeGroupSpec
from astra_hetero.studies.schema import HomogenizeTransform, PlanTransform, Transform


def apply_transform(spec: RunSpec, transform: Transform, workspace: Path | None = None) -> RunSpec:
    """`spec` transformed; `workspace` is where a transform may keep work for other points (plans)."""
    if isinstance(transform, PlanTransform):
        from astra_hetero.studies.planning import planned_spec

        return planned_spec(spec, transform, workspace)
    if not isinstance(spec, Spec):
        raise SpecError("transform", "homogenize takes a spec of one job, not a shared cluster's (`jobs:`)")
    return homogenize(spec, transform)


def homogenize(spec: Spec, transform: HomogenizeTransform) -> Spec:
    groups = spec.cluster.node_groups
    data = spec.model_dump()
    if transform.device == "most_common":
        device = _most_common(groups)
    else:
        device = _average(groups)
    for group in data["cluster"]["node_groups"]:
        group.update(copy.deepcopy(device))
    partition = _resolved_partition(spec)
    data["partition"] = {
        "layers": list(partition.layers_per_stage),
        "micro_batches": list(partition.micro_batches_per_replica),
    }
    data["name"] = f"{spec.name}-homogeneous-{transform.device.replace('_', '-')}"
    return parse_spec(data)


def _resolved_partition(spec: Spec):
    """The whole-model split the spec's plan resolves to (before any `scope` cuts it down)."""
    from astra_hetero.workload.generate import plan_workload

    return plan_workload(spec.model_copy(update={"scope": None})).partition


def _most_common(groups: Sequence[NodeGroupSpec]) -> dict[str, Any]:
    counts: Counter[str] = Counter()
    for group in groups:
        counts[group.gpu.model_dump_json()] += group.num_gpus
    best = max(counts.values())
    winner = next(g.gpu.model_dump_json() for g in groups if counts[g.gpu.model_dump_json()] == best)
    holder = max((g for g in groups if g.gpu.model_dump_json() == winner), key=lambda g: g.num_gpus)
    return {
        "gpu": holder.gpu.model_dump(),
        "intra_node_fabric": holder.intra_node_fabric.model_dump(),
        "nic": holder.nic.model_dump(),
    }


def _average(groups: Sequence[NodeGroupSpec]) -> dict[str, Any]:
    weights = [g.num_gpus for g in groups]
    base = _most_common(groups)
    gpus = [g.gpu for g in groups]
    gpu = _mean_numbers(base["gpu"], [g.model_dump() for g in gpus], weights)
    peak_tflops = _mean([g.bf16_tflops * g.compute_multiplier for g in gpus], weights)
    peak_tbps = _mean([g.hbm_tbps * g.compute_multiplier for g in gpus], weights)
    gpu.update(
        preset=None,
        name="average(" + ", ".join(f"{g.type_key}×{w}" for g, w in zip(gpus, weights, strict=True)) + ")",
        compute_multiplier=1.0,
        power_limit_w=None,  # each GPU's cap is in its effective rate, which the mean below keeps
        bf16_tflops=peak_tflops,
        # the mean sustained matmul rate, at the mean sustained fraction (_mean_numbers above)
        compute_efficiency=_mean([g.effective_flops_per_ns for g in gpus], weights)
        / (peak_tflops * 1e3 * gpu["sustained_fraction"]),
        hbm_tbps=peak_tbps,
        memory_efficiency=_mean([g.effective_bytes_per_ns for g in gpus], weights) / (peak_tbps * 1e3),
    )
    fabric = _mean_numbers(
        base["intra_node_fabric"], [g.intra_node_fabric.model_dump() for g in groups], weights
    )
    fabric.update(preset=None, name="average")
    per_gpu_gbps = [g.nic.gbps * g.nics_per_node / g.gpus_per_node for g in groups]
    nic = _mean_numbers(base["nic"], [g.nic.model_dump() for g in groups], weights)
    nic.update(gbps=_mean(per_gpu_gbps, weights), count=None)
    return {"gpu": gpu, "intra_node_fabric": fabric, "nic": nic}


def _mean_numbers(start: dict[str, Any], records: list[dict[str, Any]], weights: list[int]) -> dict[str, Any]:
    """`start` with every float field replaced by the weighted mean of that field over `records`."""
    out = dict(start)
    for key, value in start.items():
        values = [r.get(key) for r in records]
        if isinstance(value, float) and all(isinstance(v, float) for v in values):
            out[key] = _mean(values, weights)  # type: ignore[arg-type]
    return out


def _mean(values: Sequence[float], weights: Sequence[int]) -> float:
    return sum(v * w for v, w in zip(values, weights, strict=True)) / sum(weights)
