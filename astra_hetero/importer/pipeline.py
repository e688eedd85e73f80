"""Import a study as a library call: read and check it, label its ranks, publish the run directory
in one step (outputs.publish_output: a failure leaves the target as it was)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from astra_hetero.backends.embedded.folding.shapes import TraceShapes, read_shapes
from astra_hetero.backends.embedded.rundir.compute_times import check_compute_times
from astra_hetero.backends.embedded.trace.records import KIND_COLL, KIND_SEND
from astra_hetero.errors import RunDirError
from astra_hetero.importer import ranks as rank_info
from astra_hetero.importer.study import Study, StudyFiles, check_trace_groups, read_study
from astra_hetero.importer.write import (
    IMPORT_RECORD,
    import_record,
    inputs_digest,
    write_network,
    write_workload,
)
from astra_hetero.pipeline import run_dir_staging
from astra_hetero.rundir import write_json_atomic


def import_study(files: StudyFiles, out: Path, *, force: bool = False, workers: int | None = None) -> Study:
    """Write the study named by `files` as the run directory `out`."""
    study = read_study(files)
    shapes = read_shapes(list(study.trace_paths), study.num_ranks, workers, study.system.roofline)
    check_traces(study, shapes)
    labels = rank_labels(study, shapes)
    digest = inputs_digest(study)
    with run_dir_staging(Path(out), force) as run:
        run.write("workload", digest, lambda path: _write_workload(study, path, labels, Path(out).name))
        run.write("topology", digest, lambda path: write_network(study, path))
    return study


def _write_workload(study: Study, path: Path, labels: list[dict[str, Any]], name: str) -> None:
    write_workload(study, path, labels, name)
    write_json_atomic(path / IMPORT_RECORD, import_record(study, path))


def check_traces(study: Study, shapes: TraceShapes) -> None:
    """What ASTRA-sim would trip over in the traces: unknown comm groups, sends without their recv (it
    would wait forever), roofline nodes the system file cannot time, compute nodes without any time."""
    check_trace_groups(study, dict(enumerate(shapes.groups)))
    check_transfers(study, shapes)
    for rank in range(study.num_ranks):
        trace = shapes.shapes[shapes.shape_of[rank]].trace
        check_compute_times(trace, study.trace_paths[rank], False, study.files.system)


def check_transfers(study: Study, shapes: TraceShapes) -> None:
    """Every send of rank A to B has a recv on B from A with the same tag and size, and the reverse."""
    sent: Counter[tuple[int, int, int, int]] = Counter()
    received: Counter[tuple[int, int, int, int]] = Counter()
    for rank in range(study.num_ranks):
        shape = shapes.shapes[shapes.shape_of[rank]]
        trace = shape.trace
        p2p = np.flatnonzero(trace.kinds > KIND_COLL)
        peers = [shapes.peers[rank][i] for i in shape.peer_pattern]
        for node, peer in zip(p2p.tolist(), peers, strict=True):
            tag, size = int(trace.tags[node]), int(trace.sizes[node])
            if trace.kinds[node] == KIND_SEND:
                sent[(rank, peer, tag, size)] += 1
            else:
                received[(peer, rank, tag, size)] += 1
    for key in sorted((sent - received) + (received - sent)):
        src, dst, tag, size = key
        if sent[key] > received[key]:
            where, what = study.trace_paths[src], f"sends {size} bytes to rank {dst} (tag {tag})"
        else:
            where, what = study.trace_paths[dst], f"receives {size} bytes from rank {src} (tag {tag})"
        raise RunDirError(
            f"{where}: {what} {abs(sent[key] - received[key])} time(s) more than its peer's trace matches; "
            "ASTRA-sim would wait for it forever"
        )


def rank_labels(study: Study, shapes: TraceShapes) -> list[dict[str, Any]]:
    stages = rank_info.rank_stages(shapes, study.num_ranks)
    used = rank_info.collective_groups(shapes, study.num_ranks)
    replicas = rank_info.rank_replicas(stages, used, study.groups or {})
    gpu = device_name(study)
    return [
        {"rank": r, "gpu": gpu, "stage": stages[r], "replica": replicas[r], "tp_index": None}
        for r in range(study.num_ranks)
    ]


def device_name(study: Study) -> str:
    """What the system file says the NPU is: its roofline figures, if it has them."""
    roofline = study.system.roofline
    if roofline is None:
        return "npu"
    return f"npu ({roofline.peak_flops_per_s / 1e12:g} TFLOP/s, {roofline.mem_bytes_per_s / 1e9:g} GB/s)"
