"""Spec → per-rank graphs, comm groups and manifest (in memory), then → files in a staging directory."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from astra_hetero import rundir
from astra_hetero.chakra_io import write_trace
from astra_hetero.comm.measured import copy_tables, table_records
from astra_hetero.errors import InfeasiblePlan
from astra_hetero.rank_classes import (
    CLASS_DIR,
    RankClassMap,
    class_trace_name,
    rank_traces,
    write_class_map,
)
from astra_hetero.spec.catalog import gpu_catalog
from astra_hetero.spec.devices import Device
from astra_hetero.spec.schema import Spec
from astra_hetero.workload.approximations import workload_approximations
from astra_hetero.workload.blocks import DeviceBlocks, device_blocks
from astra_hetero.workload.calibration import load_calibration
from astra_hetero.workload.classes import bound_values, graph_roles
from astra_hetero.workload.comm_groups import CommGroup, comm_groups
from astra_hetero.workload.costs import (
    expert_parameters_on_rank,
    parameter_counts,
    shape_of,
    stage_parameters,
)
from astra_hetero.workload.encode import ClassEncoder, RankBinding, idle_trace
from astra_hetero.workload.expert_placement import ExpertPlacement, block_key, expert_placement
from astra_hetero.workload.graph import build_rank_graph
from astra_hetero.workload.host import host_costs
from astra_hetero.workload.invariants import ClassSummary, check_bound, summarize
from astra_hetero.workload.layout import Layout, Placement, build_layout
from astra_hetero.workload.memory import check_memory, max_layers_that_fit, peak_by_gpu
from astra_hetero.workload.model_flops import throughput_record
from astra_hetero.workload.ops import Shape
from astra_hetero.workload.partition import Partition, build_partition, micro_batch_group
from astra_hetero.workload.precision import Dtypes
from astra_hetero.workload.program import RankContext, RankGraph
from astra_hetero.workload.schedule import stage_steps
from astra_hetero.workload.scope import scoped
from astra_hetero.workload.timing import DeviceCostModel

Progress = Callable[[int], None]


@dataclass
class WorkloadPlan:
    """Everything needed to emit the traces, before any graph is built."""

    spec: Spec
    layout: Layout
    partition: Partition
    groups: list[CommGroup]
    contexts: list[RankContext]  # per active rank; equal contexts share one class graph
    bindings: list[RankBinding]  # per active rank, in rank order (idle GPUs have neither)
    memory: dict[str, dict[str, float | int]]  # per GPU type, the whole iteration's peak (peak_by_gpu)


def plan_workload(spec: Spec) -> WorkloadPlan:
    layout = build_layout(spec)
    total_mb = spec.parallelism.global_batch_size // spec.parallelism.micro_batch_size
    # a replica's share can be no larger (the others get at least one group each)
    most_mb = total_mb - (spec.parallelism.dp - 1) * micro_batch_group(spec.parallelism)
    placement = expert_placement(spec, layout)
    blocks = timed_blocks(spec, layout.devices, placement)

    def hosts_of(rank: int) -> tuple[int, bool]:
        return (placement.hosts, placement.holds(rank)) if placement is not None else (0, True)

    partition = build_partition(
        spec,
        layout,
        lambda rank: blocks[block_key(layout.devices[rank], placement)],
        lambda stage: max_layers_that_fit(spec, layout, stage, most_mb, hosts_of),
    )
    check_memory(spec, layout, partition, hosts_of)
    memory = peak_by_gpu(spec, layout, partition, hosts_of)  # of the whole iteration, as the job needs it
    partition = scoped(partition, spec.scope)  # a cut-down iteration, planned for the whole one
    groups = comm_groups(spec, layout)
    of_rank: list[list[CommGroup]] = [[] for _ in range(layout.num_ranks)]
    for group in groups:  # each rank's groups, found once rather than by scanning every group per rank
        for rank in group.ranks:
            of_rank[rank].append(group)
    active = layout.active_ranks
    contexts = _contexts(spec, layout, partition, of_rank, blocks, active, placement)
    bindings = [_binding(spec, layout, of_rank[r], r) for r in active]
    return WorkloadPlan(spec, layout, partition, groups, contexts, bindings, memory)


def timed_blocks(
    spec: Spec, devices: Iterable[Device], placement: ExpertPlacement | None = None
) -> dict[str, DeviceBlocks]:
    """Every block a rank may run, timed once per GPU type among `devices` (and, under
    mapping.experts, whether it holds experts: `block_key`); the planner's estimates use the same
    blocks as the traces."""
    dtypes = Dtypes.from_spec(spec)
    kernel = spec.compute.attention_kernel
    framework = spec.compute.framework
    x = shape_of(
        spec.model,
        spec.parallelism,
        spec.compute.attention,
        dtypes,
        attention_kernel=kernel,
        framework=framework,
    )
    calibration = (
        load_calibration(spec.calibration, private=spec.calibration_private) if spec.calibration else None
    )
    if calibration is not None:
        calibration.check_gpus([*gpu_catalog(), *(g.gpu.type_key for g in spec.cluster.node_groups)])
    # One cost model per GPU label; the spec guarantees that a label names one set of numbers.
    costs: dict[str, tuple[DeviceCostModel, Shape]] = {}
    for device in devices:
        key = block_key(device, placement)
        if key not in costs:
            shape = x
            if placement is not None:
                hosts = (placement.hosts, placement.holds(device.rank))
                shape = shape_of(
                    spec.model, spec.parallelism, spec.compute.attention, dtypes, hosts, kernel, framework
                )
            costs[key] = (DeviceCostModel(device.spec.gpu, calibration), shape)
    windows = tuple(spec.model.window_of(i) for i in range(spec.model.num_layers))
    alike = len(set(windows)) == 1  # every layer alike: one kind, carried by the shape
    recompute = spec.parallelism.recompute
    return {
        key: device_blocks(
            cost,
            replace(shape, window=windows[0]) if alike else shape,
            recompute,
            () if alike else windows,
            host_costs(spec.compute.framework),
        )
        for key, (cost, shape) in costs.items()
    }


def _contexts(
    spec: Spec,
    layout: Layout,
    partition: Partition,
    of_rank: list[list[CommGroup]],
    blocks: dict[str, DeviceBlocks],
    active: Iterable[int],
    placement: ExpertPlacement | None,
) -> list[RankContext]:
    """Each active rank's context; equal contexts are one object (hashing a context hashes its timed
    blocks, so classes are found by identity). A context depends on the rank only through what the
    memo key holds: its stage, its replica's micro-batches, its blocks and its groups' kinds and sizes."""
    memo: dict[tuple, RankContext] = {}
    canonical: dict[RankContext, RankContext] = {}
    out = []
    for rank in active:
        place = layout.placement(rank)
        key = (
            place.stage,
            partition.micro_batches_per_replica[place.replica],
            block_key(layout.devices[rank], placement),
            (placement.hosts, placement.holds(rank)) if placement is not None else None,
            tuple((g.kind, len(g.ranks)) for g in of_rank[rank]),
        )
        ctx = memo.get(key)
        if ctx is None:
            ctx = _context(spec, layout, partition, of_rank[rank], blocks, rank, placement)
            ctx = memo[key] = canonical.setdefault(ctx, ctx)
        out.append(ctx)
    return out


def _binding(spec: Spec, layout: Layout, groups: list[CommGroup], rank: int) -> RankBinding:
    """`groups`: the comm groups holding `rank`."""
    place = layout.placement(rank)
    pp, cp = spec.parallelism.pp, spec.parallelism.cp
    # with virtual stages the pipeline is a ring: the last stage feeds stage 0's next chunk
    ring = spec.parallelism.virtual_stages > 1
    peers = {}
    if place.stage > 0 or ring:
        peers["prev"] = layout.rank_of((place.stage - 1) % pp, place.replica, place.tp_index, place.cp_index)
    if place.stage < pp - 1 or ring:
        peers["next"] = layout.rank_of((place.stage + 1) % pp, place.replica, place.tp_index, place.cp_index)
    if cp > 1:  # the context-parallel ring
        for role, step in (("cp_next", 1), ("cp_prev", -1)):
            peers[role] = layout.rank_of(
                place.stage, place.replica, place.tp_index, (place.cp_index + step) % cp
            )
    return RankBinding(rank, {g.kind: g.id for g in groups}, peers)


def _context(
    spec: Spec,
    layout: Layout,
    partition: Partition,
    groups: list[CommGroup],
    blocks: dict[str, DeviceBlocks],
    rank: int,
    placement: ExpertPlacement | None = None,
) -> RankContext:
    par, model = spec.parallelism, spec.model
    place = layout.placement(rank)
    stage, replica = place.stage, place.replica
    counts = parameter_counts(model)
    dt = Dtypes.from_spec(spec)
    grad_width = dt.grad_bytes
    num_layers = partition.layers_per_stage[stage]
    hosts = (placement.hosts, placement.holds(rank)) if placement is not None else (0, True)
    params, extra_params = stage_parameters(model, par, stage, num_layers, hosts)
    experts = expert_parameters_on_rank(model, par, hosts)
    embedding_params = counts.embedding / par.tp if stage == 0 else 0.0
    tokens = par.micro_batch_size * model.seq_len // par.cp
    sizes = {g.kind: len(g.ranks) for g in groups}
    dp_size, edp_size = sizes.get("dp", 1), sizes.get("edp", 1)
    updated = params
    if par.distributed_optimizer:  # each data-parallel rank updates its shard of each buffer
        updated = (params - experts * num_layers) / dp_size + experts * num_layers / edp_size
    return RankContext(
        stage=stage,
        num_stages=par.pp,
        num_micro_batches=partition.micro_batches_per_replica[replica],
        chunks=partition.chunk_ranges(stage),
        blocks=blocks[block_key(layout.devices[rank], placement)],
        tp_size=par.tp,
        dp_size=dp_size,
        has_tp_group="tp" in sizes,
        has_dp_group="dp" in sizes,
        has_embedding_group="embedding" in sizes,
        # Megatron splits the boundary tensor across the TP ranks (scatter/gather optimisation).
        activation_bytes=int(dt.activation_bytes * tokens * model.hidden_size / par.tp),
        grad_bucket_bytes=par.dp_bucket_mib * 1024**2,
        layer_grad_bytes=counts.per_layer / par.tp * grad_width,
        embedding_stage_grad_bytes=embedding_params * grad_width,
        head_grad_bytes=(extra_params - embedding_params) * grad_width,
        embedding_grad_bytes=int(counts.embedding / par.tp * grad_width),
        params_on_rank=params,
        distributed_optimizer=par.distributed_optimizer,
        updated_params=updated,
        param_bytes_per_grad_byte=dt.param_bytes / grad_width,
        full_recompute=par.recompute == "full",
        overlap_grad_reduce=par.overlap_grad_reduce,
        overlap_param_gather=par.overlap_param_gather,
        group_sizes=tuple(sorted((k, v) for k, v in sizes.items() if k in LAYER_ROLES)),
        expert_layer_grad_bytes=experts * grad_width,
        edp_size=edp_size,
        sharding_stage=par.sharding_stage,
        overlap_p2p_comm=par.overlap_p2p_comm,
    )


# comm-group roles the layers' own collectives run on (the data-parallel ones are gradsync's)
LAYER_ROLES = frozenset({"tp", "cp", "ep", "etp", "moe"})


def class_graph(plan: WorkloadPlan, ctx: RankContext) -> RankGraph:
    steps = stage_steps(
        plan.spec.parallelism.schedule, ctx.stage, ctx.num_stages, ctx.num_micro_batches, ctx.num_chunks
    )
    return build_rank_graph(ctx, steps)


def encoded_traces(plan: WorkloadPlan, progress: Progress | None = None) -> Iterator[tuple[int, bytes]]:
    """(rank, trace bytes) for every rank, after checking the whole workload's invariants; idle GPUs
    get `idle_trace()`."""
    yield from active_traces(plan, progress)
    idle = idle_trace()
    for rank in plan.layout.idle_ranks:
        yield rank, idle
        if progress:
            progress(1)


def active_traces(plan: WorkloadPlan, progress: Progress | None = None) -> Iterator[tuple[int, bytes]]:
    """(rank, trace bytes) for every rank that serves a cell (`plan.bindings`), after checking the
    workload's invariants."""
    classes = _class_graphs(plan)
    for binding, ctx in zip(plan.bindings, plan.contexts, strict=True):
        yield binding.rank, classes[id(ctx)][0].encode(binding)
        if progress:
            progress(1)


def _class_graphs(plan: WorkloadPlan) -> dict[int, tuple[ClassEncoder, ClassSummary]]:
    """Each distinct context's encoder and summary (by the context's id: equal contexts are one object,
    `_contexts`), after checking the whole workload's invariants."""
    classes: dict[int, tuple[ClassEncoder, ClassSummary]] = {}
    for binding, ctx in zip(plan.bindings, plan.contexts, strict=True):
        if id(ctx) not in classes:
            graph = class_graph(plan, ctx)
            rank = binding.rank
            check_magnitudes(graph, plan.layout.devices[rank].group_index, rank)
            classes[id(ctx)] = (ClassEncoder(graph), summarize(graph))
    check_bound(
        [(b, classes[id(c)][1]) for b, c in zip(plan.bindings, plan.contexts, strict=True)],
        {g.id: g.ranks for g in plan.groups},
    )
    return classes


def class_traces(plan: WorkloadPlan) -> tuple[RankClassMap, list[bytes]]:
    """The workload as traces by class (`rank_classes`): the map and each class's trace, after
    checking the whole workload's invariants; idle GPUs form a class of `idle_trace()`."""
    encoders = _class_graphs(plan)
    roles = {key: graph_roles(enc.graph) for key, (enc, _) in encoders.items()}
    num_ranks = plan.layout.num_ranks
    class_of = [-1] * num_ranks
    groups: list[tuple[str, ...]] = [()] * num_ranks
    peers: list[tuple[int, ...]] = [()] * num_ranks
    index: dict[tuple[int, tuple], int] = {}
    reps: list[int] = []
    data: list[bytes] = []
    for binding, ctx in zip(plan.bindings, plan.contexts, strict=True):
        rank = binding.rank
        groups[rank], peers[rank], pattern = bound_values(roles[id(ctx)], binding)
        key = (id(ctx), pattern)  # a class: one context, its role values coinciding alike
        k = index.get(key)
        if k is None:
            k = index[key] = len(reps)
            reps.append(rank)
            data.append(encoders[id(ctx)][0].encode(binding))
        class_of[rank] = k
    if plan.layout.idle_ranks:
        k = len(reps)
        reps.append(plan.layout.idle_ranks[0])
        data.append(idle_trace())
        for rank in plan.layout.idle_ranks:
            class_of[rank] = k
    # classes numbered by their first rank, so that the map reads in rank order
    order = sorted(range(len(reps)), key=lambda c: reps[c])
    renumber = {old: new for new, old in enumerate(order)}
    classes = RankClassMap(
        tuple(class_trace_name(k) for k in range(len(reps))),
        tuple(reps[c] for c in order),
        tuple(renumber[c] for c in class_of),
        tuple(groups),
        tuple(peers),
    )
    return classes, [data[c] for c in order]


# One rank computing for longer than this per iteration (about 116 days) means a GPU described far
# too slow; Chakra's integer fields (int64) bound sizes and FLOP counts.
MAX_RANK_COMPUTE_NS = 10**16
MAX_FIELD = 2**62


def check_magnitudes(graph: RankGraph, group_index: int, rank: int) -> None:
    """InfeasiblePlan if the traces would carry times or sizes that are not finite or do not fit."""
    total_ns = 0.0
    for node in graph.nodes:
        total_ns += node.time_ns
        fits = 0 <= node.time_ns < math.inf and 0 <= node.flops < MAX_FIELD and 0 <= node.bytes < MAX_FIELD
        if not fits:
            raise InfeasiblePlan(
                f"cluster.node_groups[{group_index}].gpu",
                f"node {node.name!r} of rank {rank} gets time {node.time_ns} ns, {node.flops} FLOPs, "
                f"{node.bytes} bytes: out of range for a trace (check the GPU's numbers and the model)",
            )
    if total_ns > MAX_RANK_COMPUTE_NS:
        raise InfeasiblePlan(
            f"cluster.node_groups[{group_index}].gpu",
            f"rank {rank} would compute for {total_ns / 1e9 / 86400:.3g} days per iteration; the GPU's "
            "numbers (bf16_tflops, hbm_tbps, efficiencies, compute_multiplier) are far too small",
        )


MANIFEST_FORMAT = "astra-hetero/manifest@1"


def manifest(plan: WorkloadPlan) -> dict[str, Any]:
    spec, layout, partition = plan.spec, plan.layout, plan.partition
    chunks = [partition.chunk_ranges(stage) for stage in range(partition.num_stages)]
    ranks = [
        rank_entry(spec, device, place, partition, chunks[place.stage] if place is not None else None)
        for device, place in zip(layout.devices, layout.placements, strict=True)
    ]
    groups = {g.id: group_entry(g) for g in plan.groups}
    return {
        **cluster_fields(spec, layout.num_ranks),
        **plan_fields(plan),
        "idle_ranks": list(layout.idle_ranks),
        # what dynamics.json must hold: a directory that lost it fails instead of running static
        "dynamics": {"events": len(spec.dynamics), "iterations": spec.iterations},
        "workload_prefix": rundir.WORKLOAD_PREFIX,
        "comm_groups": groups,
        "ranks": ranks,
    }


def cluster_fields(spec: Any, num_ranks: int) -> dict[str, Any]:
    """The manifest's head: the run's name and size and how communication and compute are priced
    (`spec`: a `Spec`, or a shared cluster's spec, whose sections of these names are the cluster's)."""
    return {
        "format": MANIFEST_FORMAT,
        "name": spec.name,
        "num_ranks": num_ranks,
        "num_nodes": spec.cluster.num_nodes,
        "collective_model": spec.collectives.model,
        "collective_algorithm": spec.collectives.resolved_algorithm,
        "collective_protocol": spec.collectives.protocol,
        "nccl_tests": table_records(spec.collectives.nccl_tests),
        "max_comm_in_flight_per_rank": spec.collectives.max_in_flight_per_rank,
        "comm_overlap_slowdown": spec.compute.comm_overlap_slowdown,
        "link_model": spec.network.link_model,
        "step_down_efficiency": spec.network.step_down_efficiency,
    }


def group_entry(group: CommGroup) -> dict[str, Any]:
    where = (
        ("stage", group.stage),
        ("replica", group.replica),
        ("tp_index", group.tp_index),
        ("cp_index", group.cp_index),
    )
    return {"kind": group.kind, "ranks": list(group.ranks), **{k: v for k, v in where if v is not None}}


def plan_fields(plan: WorkloadPlan) -> dict[str, Any]:
    """What the manifest records of one job's plan: model, parallelism, partition, memory, scope and
    the throughput record (model FLOPs, tokens, its GPUs' peaks)."""
    spec, partition = plan.spec, plan.partition
    return {
        "model": spec.model.model_dump(mode="json"),
        "parallelism": spec.parallelism.model_dump(mode="json"),
        "layers_per_stage": list(partition.layers_per_stage),
        "virtual_stages": partition.num_chunks,
        "layers_per_virtual_stage": list(partition.layers_per_virtual_stage),
        "micro_batches_per_replica": list(partition.micro_batches_per_replica),
        # the generator's memory estimate of each GPU type's fullest device, GiB (workload/memory.py)
        "memory": plan.memory,
        "scope": spec.scope.model_dump(mode="json") if spec.scope else None,
        "throughput": throughput_record(spec),
        "approximations": workload_approximations(spec),
        "framework": framework_record(spec.compute.framework),
    }


def framework_record(framework: str) -> dict[str, Any]:
    """The training framework's host costs as the traces charge them (workload/host.py): the compute
    nodes "framework.micro_batch" and "framework.step", and segments marked "(launch-bound)"."""
    host = host_costs(framework)
    return {
        "name": framework,
        "launch_us": host.launch_ns / 1e3,
        "micro_batch_us": host.micro_batch_ns / 1e3,
        "step_us": host.step_ns / 1e3,
    }


def rank_entry(
    spec: Spec,
    device: Device,
    place: Placement | None,
    partition: Partition,
    chunk_ranges: tuple[tuple[int, int], ...] | None = None,
) -> dict[str, Any]:
    """A rank's manifest entry; an idle GPU has `idle: true` and null stage, replica and TP index.
    `chunk_ranges`: `partition.chunk_ranges(place.stage)`, if the caller has it."""
    entry: dict[str, Any] = {
        "rank": device.rank,
        "node": device.node,
        # GPUs on one scale-up fabric (a node, or an NVL72's 18 trays): one "node" to NCCL
        "scale_up_domain": device.domain,
        "node_group": device.group_name,
        "gpu": device.gpu_type,
        "local_gpu": device.local_gpu,
        "stage": None,
        "replica": None,
        "tp_index": None,
        "cp_index": None,
        "layers": [0, 0],
        "num_micro_batches": 0,
        # peak device-memory bandwidth, as ASTRA-sim's local-mem-bw: collectives reduce through it
        "hbm_gbytes_per_s": device.spec.gpu.hbm_tbps * device.spec.gpu.compute_multiplier * 1000,
        "architecture": device.spec.gpu.architecture,  # NCCL tunes a communicator by it
        "chunks": [],
        "idle": place is None,
    }
    if place is not None:
        ranges = chunk_ranges if chunk_ranges is not None else partition.chunk_ranges(place.stage)
        entry.update(
            stage=place.stage,
            replica=place.replica,
            tp_index=place.tp_index,
            cp_index=place.cp_index,
            layers=[ranges[0][0], ranges[-1][1]],  # partition.layer_range
            # model chunks (virtual pipeline stages) of this rank: [first layer, one past the last]
            chunks=[
                {"chunk": c, "virtual_stage": c * spec.parallelism.pp + place.stage, "layers": list(r)}
                for c, r in enumerate(ranges)
            ],
            num_micro_batches=partition.micro_batches_per_replica[place.replica],
        )
    return entry


def write_workload(
    spec: Spec, staging: Path, progress: Progress | None = None, per_rank: bool = False
) -> WorkloadPlan:
    """Build, check and write spec.yaml, manifest.json and workload/ into `staging`: the traces by
    class (`rank_classes`), and with `per_rank` also every rank's `workload.<rank>.et` from them."""
    plan = plan_workload(spec)
    classes, data = class_traces(plan)
    (staging / CLASS_DIR).mkdir(parents=True, exist_ok=True)
    for name, trace in zip(classes.traces, data, strict=True):
        write_trace(staging / name, [trace])
    write_class_map(staging, classes)
    if per_rank:
        for rank, trace in rank_traces(staging, classes):
            write_trace(staging / f"{rundir.WORKLOAD_PREFIX}.{rank}.et", [trace])
            if progress:
                progress(1)
    elif progress:
        progress(plan.layout.num_ranks)
    copy_tables(spec.collectives.nccl_tests, staging)
    (staging / rundir.COMM_GROUPS).write_text(json.dumps({g.id: list(g.ranks) for g in plan.groups}) + "\n")
    (staging / rundir.MANIFEST).write_text(manifest_text(manifest(plan)))
    rundir.write_spec(staging, spec.model_dump(mode="json"))
    return plan


# Past this many ranks the manifest is written compactly: indented JSON goes through the json module's
# pure-Python encoder, seconds for 100,000 ranks; compact JSON through its C encoder.
READABLE_MANIFEST_RANKS = 4096


def manifest_text(document: dict[str, Any]) -> str:
    if len(document.get("ranks", ())) <= READABLE_MANIFEST_RANKS:
        return json.dumps(document, indent=1) + "\n"
    return json.dumps(document, separators=(",", ":")) + "\n"
