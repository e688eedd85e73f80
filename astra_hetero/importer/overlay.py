"""A heterogeneity overlay applied to a study: per-rank compute times written into the traces, per-NPU
link rates into the network files, timed events into `dynamics.json`.

Compute (`npu_groups`). ASTRA-sim has one system file for every NPU, so per-NPU speeds can only live in
the traces' `duration_micros`; the overlay writes them there, and the real ASTRA-sim backends run the
heterogeneous study too. A GPU compute node's time is, in order:
- its base time: on roofline traces (the system file enables roofline) the study's roofline
  (`astrasim_inputs.system.Roofline`), otherwise its `duration_micros`;
- with `gpu:` on roofline traces, the roofline of that catalog GPU (its BF16 peak and HBM bandwidth);
  on measured traces the base time × that GPU's roofline time / `source_gpu`'s (both from the node's
  `num_ops` and `tensor_size`, which it must carry);
- divided by `compute_factor`.
Times are written as whole microseconds whose running sum tracks the exact running sum (a rank's total
is within half a microsecond). Roofline traces are converted for every rank and the run directory's
system file then has roofline off (its `roofline-enabled` set to 0, nothing else changed).

Links (`links:`, analytical networks). Each NPU's links in a dimension get a factor
(`bandwidth_factor` in every dimension, or `gbps` in one, against the file's figure read as GB/s);
later entries override earlier ones. ASTRA-sim's network file takes one bandwidth per dimension, so it
gets each dimension's bottleneck and `analytical/approximations.json` says so; the embedded engine
reads the same file with each NPU's factor relative to it (`analytical/npu_link_scales.json`) and
prices each message at the slower of the NPUs whose links it uses; the cluster graph
(`ns3/topology.txt`) carries each link's own rate.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from astra_hetero import chakra_io, rundir
from astra_hetero.astrasim_inputs.analytical import AnalyticalNetwork
from astra_hetero.astrasim_inputs.system import Roofline
from astra_hetero.chakra_io import pb
from astra_hetero.errors import RunDirError, SpecError
from astra_hetero.importer.cluster_graph import topology_text
from astra_hetero.importer.overlay_schema import Overlay
from astra_hetero.importer.study import Study
from astra_hetero.spec.catalog import gpu_catalog

NPU_LINK_SCALES = "analytical/npu_link_scales.json"
OVERLAY_COPY = "overlay.yaml"


@dataclass(frozen=True)
class NpuSpeed:
    gpu: str | None = None
    source_gpu: str | None = None
    factor: float = 1.0
    field: str = ""  # the overlay field that set it, for errors


def npu_speeds(overlay: Overlay, num_npus: int) -> list[NpuSpeed]:
    speeds = [NpuSpeed()] * num_npus
    for i, group in enumerate(overlay.npu_groups):
        speed = NpuSpeed(group.gpu, group.source_gpu, group.compute_factor or 1.0, f"npu_groups[{i}]")
        for npu in group.npus:
            speeds[npu] = speed
    return speeds


def gpu_roofline(key: str) -> Roofline:
    record = gpu_catalog()[key]
    return Roofline(record.bf16_tflops * 1e12, record.hbm_tbps * 1e12, key)


def traces_to_rewrite(study: Study, speeds: list[NpuSpeed]) -> list[int]:
    """Ranks whose traces change: all of them on roofline traces (they all need durations then),
    else those the overlay touches."""
    if study.system.roofline is not None and any(s != NpuSpeed() for s in speeds):
        return list(range(study.num_ranks))
    return [r for r, s in enumerate(speeds) if s != NpuSpeed()]


def rewrite_trace(study: Study, rank: int, speed: NpuSpeed, target: Path, overlay_path: Path) -> None:
    """Write rank `rank`'s trace with its overlaid durations to `target`."""
    data = study.trace_paths[rank].read_bytes()
    records = list(chakra_io.iter_records(data, str(study.trace_paths[rank])))
    out = [chakra_io.frame_bytes(records[0])]
    exact_ns, written_us = 0.0, 0
    for record in records[1:]:
        node = pb.Node()
        node.ParseFromString(record)
        if node.type == pb.COMP_NODE:
            exact_ns += _node_ns(study, rank, node, speed, overlay_path)
            total_us = round(exact_ns / 1000)
            node.duration_micros = total_us - written_us
            written_us = total_us
            out.append(chakra_io.frame(node))
        else:
            out.append(chakra_io.frame_bytes(record))
    chakra_io.write_trace(target, out)


def _node_ns(study: Study, rank: int, node: Any, speed: NpuSpeed, overlay_path: Path) -> float:
    attrs = {a.name: getattr(a, a.WhichOneof("value")) for a in node.attr if a.WhichOneof("value")}
    if bool(attrs.get("is_cpu_op", False)):
        return node.duration_micros * 1000.0  # host work: no GPU's speed applies
    roofline = study.system.roofline
    num_ops, tensor_size = attrs.get("num_ops"), attrs.get("tensor_size")
    has_work = isinstance(num_ops, int) and isinstance(tensor_size, int)
    where = f"{study.trace_paths[rank]}: node {node.id} ({node.name!r})"
    if roofline is not None and not has_work:
        raise RunDirError(f"{where} lacks num_ops or tensor_size, which roofline mode needs")
    base = float(
        roofline.time_ns(num_ops, tensor_size) if roofline is not None else node.duration_micros * 1000
    )
    if speed.gpu is not None:
        if roofline is not None:
            base = float(gpu_roofline(speed.gpu).time_ns(num_ops, tensor_size))
        else:
            if speed.source_gpu is None:
                raise SpecError(
                    f"{overlay_path}: {speed.field}.source_gpu",
                    "the traces carry measured durations; say which GPU measured them (source_gpu) to "
                    f"scale them to {speed.gpu}",
                )
            if not has_work:
                raise RunDirError(
                    f"{where} carries no num_ops and tensor_size, so its measured time cannot be scaled "
                    f"from {speed.source_gpu} to {speed.gpu} ({overlay_path}: {speed.field}.gpu)"
                )
            source = gpu_roofline(speed.source_gpu).time_ns(num_ops, tensor_size)
            if source > 0:
                base *= gpu_roofline(speed.gpu).time_ns(num_ops, tensor_size) / source
    return base / speed.factor


def link_scales(overlay: Overlay, network: AnalyticalNetwork) -> tuple[tuple[float, ...], ...] | None:
    if not overlay.links:
        return None
    scales = [[1.0] * len(network.dims) for _ in range(network.num_npus)]
    for group in overlay.links:
        for npu in group.npus:
            if group.bandwidth_factor is not None:
                scales[npu] = [group.bandwidth_factor] * len(network.dims)
            else:
                d = group.dimension
                assert d is not None and group.gbps is not None
                scales[npu][d] = group.gbps / 8 / network.dims[d].bandwidth
    return tuple(tuple(row) for row in scales)


def write_network_overlay(study: Study, root: Path, scales: tuple[tuple[float, ...], ...]) -> str:
    """The scaled cluster graph, the per-NPU factors, and ASTRA-sim's network file at each dimension's
    bottleneck; returns the approximation line for it."""
    network = study.analytical
    assert network is not None
    (root / rundir.NS3_TOPOLOGY).write_text(topology_text(network, scales))
    worst = [min(row[d] for row in scales) for d in range(len(network.dims))]
    # the factors are relative to the network file beside them, which now holds the bottleneck
    relative = [[row[d] / worst[d] for d in range(len(network.dims))] for row in scales]
    rundir.write_json_atomic(root / NPU_LINK_SCALES, {"scales": relative})
    bandwidths = [dim.bandwidth * w for dim, w in zip(network.dims, worst, strict=True)]
    (root / rundir.ANALYTICAL_NETWORK).write_text(_network_yaml(network, bandwidths))
    changed = [
        f"dimension {d}: {bandwidths[d]:g} GB/s for every NPU (its slowest NPU's; file: {dim.bandwidth:g})"
        for d, dim in enumerate(network.dims)
        if worst[d] != 1.0
    ]
    note = (
        "ASTRA-sim's analytical network takes one bandwidth per dimension, so the overlay's link rates "
        f"are given to it as each dimension's bottleneck: {'; '.join(changed) or 'no dimension slower'}. "
        "The embedded backend models each NPU's links."
    )
    rundir.write_json_atomic(root / rundir.APPROXIMATIONS, {rundir.ANALYTICAL_NETWORK: note})
    return note


def _network_yaml(network: AnalyticalNetwork, bandwidths: list[float]) -> str:
    def row(values: list[Any]) -> str:
        return "[ " + ", ".join(str(v) for v in values) + " ]"

    return (
        "# The study's network with an astra-hetero overlay: each dimension at its slowest NPU's bandwidth\n"
        f"topology: {row([d.block for d in network.dims])}\n"
        f"npus_count: {row([d.npus for d in network.dims])}\n"
        f"bandwidth: {row([round(b, 9) for b in bandwidths])}\n"
        f"latency: {row([d.latency_ns for d in network.dims])}\n"
    )


def roofline_off(system_text: str) -> str:
    """The study's system file with roofline off (the traces now carry every NPU's durations)."""
    data = json.loads(system_text)
    data["roofline-enabled"] = 0
    return json.dumps(data, indent=4) + "\n"


def dynamics_document(overlay: Overlay, num_npus: int) -> dict[str, Any] | None:
    if not overlay.dynamics and overlay.iterations == 1:
        return None
    events = []
    for i, event in enumerate(overlay.dynamics):
        record: dict[str, Any] = {
            "index": i,
            "event": event.event,
            "start_ns": round(event.start_ms * 1e6),
            "end_ns": None if event.end_ms is None else round(event.end_ms * 1e6),
        }
        if event.event == "device_slowdown":
            record.update(factor=event.factor, ranks=list(event.npus))
        else:
            record.update(
                distribution=event.distribution,
                sigma=event.sigma,
                seed=event.seed,
                ranks=list(range(num_npus)),
            )
        events.append(record)
    return {"format": 1, "iterations": overlay.iterations, "events": events}


def device_label(base: str, speed: NpuSpeed) -> str:
    name = gpu_catalog()[speed.gpu].key if speed.gpu else base
    return name if speed.factor == 1.0 else f"{name} x{speed.factor:g} speed"


def check_links_supported(study: Study, overlay: Overlay, path: Path) -> None:
    if overlay.links and study.analytical is None:
        raise SpecError(
            f"{path}: links",
            "per-NPU link rates apply to analytical networks; an ns-3 study's rates are its topology "
            "file's lines",
        )


def overlay_digest(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()
