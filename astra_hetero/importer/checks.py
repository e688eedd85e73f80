"""What the importer checks in a study's traces beyond its files, and what it reads off them: comm
groups the traces use, sends and recvs that pair up, compute nodes that carry time; each rank's stage,
replica and device name."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from astra_hetero.backends.embedded.folding.shapes import TraceShapes
from astra_hetero.backends.embedded.rundir.compute_times import check_compute_times
from astra_hetero.backends.embedded.trace.records import KIND_COLL, KIND_SEND
from astra_hetero.errors import RunDirError
from astra_hetero.importer import ranks as rank_info
from astra_hetero.importer.study import Study, check_trace_groups


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
