"""Spec → per-rank graphs, comm groups and manifest (in memory), then → files in a staging directory."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from astra_hetero import rundir
from astra_hetero.chakra_io import write_trace
from astra_hetero.spec.schema import Spec
from astra_hetero.workload.blocks import DeviceBlocks, device_blocks
from astra_hetero.workload.costs import (
    BYTES_BF16,
    parameter_counts,
    shape_of,
    stage_parameters,
)
from astra_hetero.workload.encode import ClassEncoder, RankBinding
from astra_hetero.workload.graph import RankContext, RankGraph, build_rank_graph
from astra_hetero.workload.invariants import ClassSummary, check_bound, summarize
from astra_hetero.workload.layout import Layout, build_layout
from astra_hetero.workload.memory import check_memory, max_layers_that_fit
from astra_hetero.workload.partition import Partition, build_partition
from astra_hetero.workload.schedule import schedule_for
from astra_hetero.workload.scope import scoped
from astra_hetero.workload.timing import DeviceCostModel, load_calibration

Progress = Callable[[int], None]


@dataclass(frozen=True)
class CommGroup:
    id: str
    kind: str  # "tp" | "dp" | "embedding"
    ranks: tuple[int, ...]
    stage: int | None = None
    replica: int | None = None
    tp_index: int | None = None


@dataclass
class WorkloadPlan:
    """Everything needed to emit the traces, before any graph is built."""

    spec: Spec
    layout: Layout
    partition: Partition
    groups: list[CommGroup]
    contexts: list[RankContext]  # per rank; equal contexts share one class graph
    bindings: list[RankBinding]


def plan_workload(spec: Spec) -> WorkloadPlan:
    layout = build_layout(spec)
    x = shape_of(spec.model, spec.parallelism)
    calibration = load_calibration(spec.calibration) if spec.calibration else None
    costs: dict[str, DeviceCostModel] = {}
    for device in layout.devices:
        costs.setdefault(device.gpu_type, DeviceCostModel(device.spec.gpu, calibration))
    total_mb = spec.parallelism.global_batch_size // spec.parallelism.micro_batch_size
    most_mb = total_mb - (spec.parallelism.dp - 1)  # a replica's share can be no larger
    blocks = {key: device_blocks(cost, x, spec.parallelism.recompute) for key, cost in costs.items()}
    partition = build_partition(
        spec,
        layout,
        lambda rank: blocks[layout.devices[rank].gpu_type],
        lambda stage: max_layers_that_fit(spec, layout, stage, most_mb),
    )
    check_memory(spec, layout, partition)
    partition = scoped(partition, spec.scope)  # a cut-down iteration, planned for the whole one
    groups = _comm_groups(spec, layout)
    contexts = [_context(spec, layout, partition, groups, blocks, rank) for rank in range(layout.num_ranks)]
    bindings = [_binding(spec, layout, groups, rank) for rank in range(layout.num_ranks)]
    return WorkloadPlan(spec, layout, partition, groups, contexts, bindings)


def _comm_groups(spec: Spec, layout: Layout) -> list[CommGroup]:
    par = spec.parallelism
    groups: list[CommGroup] = []

    def add(kind: str, ranks: list[int], **where: int) -> None:
        if len(ranks) > 1:
            groups.append(CommGroup(str(len(groups) + 1), kind, tuple(ranks), **where))

    for stage in range(par.pp):
        for replica in range(par.dp):
            add("tp", list(layout.cells[stage][replica]), stage=stage, replica=replica)
    for stage in range(par.pp):
        for tp_index in range(par.tp):
            add(
                "dp",
                [layout.rank_of(stage, r, tp_index) for r in range(par.dp)],
                stage=stage,
                tp_index=tp_index,
            )
    if spec.model.tied_embeddings and par.pp > 1:
        for replica in range(par.dp):
            for tp_index in range(par.tp):
                add(
                    "embedding",
                    [layout.rank_of(0, replica, tp_index), layout.rank_of(par.pp - 1, replica, tp_index)],
                    replica=replica,
                    tp_index=tp_index,
                )
    return groups


def _binding(spec: Spec, layout: Layout, groups: list[CommGroup], rank: int) -> RankBinding:
    place = layout.placements[rank]
    peers = {}
    if place.stage > 0:
        peers["prev"] = layout.rank_of(place.stage - 1, place.replica, place.tp_index)
    if place.stage < spec.parallelism.pp - 1:
        peers["next"] = layout.rank_of(place.stage + 1, place.replica, place.tp_index)
    return RankBinding(rank, {g.kind: g.id for g in groups if rank in g.ranks}, peers)


def _context(
    spec: Spec,
    layout: Layout,
    partition: Partition,
    groups: list[CommGroup],
    blocks: dict[str, DeviceBlocks],
    rank: int,
) -> RankContext:
    par, model = spec.parallelism, spec.model
    place = layout.placements[rank]
    stage, replica = place.stage, place.replica
    first, end = partition.layer_range(stage)
    counts = parameter_counts(model)
    grad_width = 4 if par.grad_reduce_in_fp32 else BYTES_BF16
    params, extra_params = stage_parameters(model, par, stage, end - first)
    tokens = par.micro_batch_size * model.seq_len
    roles = {g.kind for g in groups if rank in g.ranks}
    return RankContext(
        stage=stage,
        num_stages=par.pp,
        num_micro_batches=partition.micro_batches_per_replica[replica],
        first_layer=first,
        num_layers=end - first,
        blocks=blocks[layout.devices[rank].gpu_type],
        tp_size=par.tp,
        dp_size=par.dp,
        has_tp_group="tp" in roles,
        has_dp_group="dp" in roles,
        has_embedding_group="embedding" in roles,
        # Megatron splits the boundary tensor across the TP ranks (scatter/gather optimisation).
        activation_bytes=int(BYTES_BF16 * tokens * model.hidden_size / par.tp),
        grad_bucket_bytes=par.dp_bucket_mib * 1024**2,
        layer_grad_bytes=counts.per_layer / par.tp * grad_width,
        extra_grad_bytes=extra_params * grad_width,
        embedding_grad_bytes=int(counts.embedding / par.tp * grad_width),
        params_on_rank=params,
        distributed_optimizer=par.distributed_optimizer,
        optimizer_shards=par.dp if par.distributed_optimizer else 1,
        param_bytes_per_grad_byte=BYTES_BF16 / grad_width,
        full_recompute=par.recompute == "full",
    )


def class_graph(plan: WorkloadPlan, ctx: RankContext) -> RankGraph:
    schedule = schedule_for(plan.spec.parallelism.schedule)
    return build_rank_graph(ctx, schedule(ctx.stage, ctx.num_stages, ctx.num_micro_batches))


def encoded_traces(plan: WorkloadPlan, progress: Progress | None = None) -> Iterator[tuple[int, bytes]]:
    """(rank, trace bytes) for every rank, after checking the whole workload's invariants."""
    classes: dict[RankContext, tuple[ClassEncoder, ClassSummary]] = {}
    for ctx in plan.contexts:
        if ctx not in classes:
            graph = class_graph(plan, ctx)
            classes[ctx] = (ClassEncoder(graph), summarize(graph))
    check_bound(
        [(b, classes[c][1]) for b, c in zip(plan.bindings, plan.contexts, strict=True)],
        {g.id: g.ranks for g in plan.groups},
    )
    for binding, ctx in zip(plan.bindings, plan.contexts, strict=True):
        yield binding.rank, classes[ctx][0].encode(binding)
        if progress:
            progress(1)


def manifest(plan: WorkloadPlan) -> dict[str, Any]:
    spec, layout, partition = plan.spec, plan.layout, plan.partition
    ranks = []
    for device, place in zip(layout.devices, layout.placements, strict=True):
        first, end = partition.layer_range(place.stage)
        ranks.append(
            {
                "rank": device.rank,
                "node": device.node,
                "node_group": device.group_name,
                "gpu": device.gpu_type,
                "local_gpu": device.local_gpu,
                "stage": place.stage,
                "replica": place.replica,
                "tp_index": place.tp_index,
                "layers": [first, end],
                "num_micro_batches": partition.micro_batches_per_replica[place.replica],
                # peak device-memory bandwidth, as ASTRA-sim's local-mem-bw: collectives reduce through it
                "hbm_gbytes_per_s": device.spec.gpu.hbm_tbps * device.spec.gpu.compute_multiplier * 1000,
            }
        )
    groups = {
        g.id: {
            "kind": g.kind,
            "ranks": list(g.ranks),
            **{
                k: v
                for k, v in (("stage", g.stage), ("replica", g.replica), ("tp_index", g.tp_index))
                if v is not None
            },
        }
        for g in plan.groups
    }
    return {
        "format": "astra-hetero/manifest@1",
        "name": spec.name,
        "num_ranks": layout.num_ranks,
        "num_nodes": spec.cluster.num_nodes,
        "collective_algorithm": spec.collectives.algorithm,
        "max_comm_in_flight_per_rank": spec.collectives.max_in_flight_per_rank,
        "link_model": spec.network.link_model,
        "step_down_efficiency": spec.network.step_down_efficiency,
        "model": spec.model.model_dump(mode="json"),
        "parallelism": spec.parallelism.model_dump(mode="json"),
        "layers_per_stage": list(partition.layers_per_stage),
        "micro_batches_per_replica": list(partition.micro_batches_per_replica),
        "scope": spec.scope.model_dump(mode="json") if spec.scope else None,
        "workload_prefix": rundir.WORKLOAD_PREFIX,
        "comm_groups": groups,
        "ranks": ranks,
    }


def write_workload(spec: Spec, staging: Path, progress: Progress | None = None) -> WorkloadPlan:
    """Build, check and write spec.yaml, manifest.json and workload/ into `staging`."""
    plan = plan_workload(spec)
    (staging / rundir.WORKLOAD_DIR).mkdir(parents=True, exist_ok=True)
    for rank, data in encoded_traces(plan, progress):
        write_trace(staging / f"{rundir.WORKLOAD_PREFIX}.{rank}.et", [data])
    (staging / rundir.COMM_GROUPS).write_text(json.dumps({g.id: list(g.ranks) for g in plan.groups}) + "\n")
    (staging / rundir.MANIFEST).write_text(json.dumps(manifest(plan), indent=1) + "\n")
    (staging / rundir.SPEC).write_text(yaml.safe_dump(spec.model_dump(mode="json"), sort_keys=False))
    return plan
