"""How a trace's compute nodes are timed (see `decode_rank_trace`), and which are host operators.

Roofline on (the run directory's system file enables it): a GPU compute node takes
`roofline.time_ns(num_ops, tensor_size)` and must carry both. Otherwise, and for host operators, a
node replays its `duration_micros` x 1000 ns; a 0 takes 1 ns (`Workload::issue_replay`): in a trace
that has durations, 0 means a kernel shorter than the microsecond Chakra records. A trace none of whose
compute nodes carries a time is flagged (`untimed`) for `rundir.compute_times` to judge.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from astra_hetero.astrasim_inputs.system import Roofline
from astra_hetero.backends.embedded.trace.attributes import attribute, label, require
from astra_hetero.backends.embedded.trace.records import KIND_COMP
from astra_hetero.chakra_io import pb
from astra_hetero.errors import RunDirError

# Beyond this a duration is corrupt rather than long: 2^40 µs is 12.7 days (int64 ns overflow soon after).
MAX_DURATION_US = 1 << 40


def compute_times(
    path: Path, nodes: list[Any], kinds: np.ndarray, roofline: Roofline | None
) -> tuple[np.ndarray, int, bool]:
    """Compute times in ns (0 for other nodes), as ASTRA-sim times them, and the untimed node (see
    RankTrace.untimed).

    Roofline on: a GPU compute node (`is_cpu_op` false or absent) takes `roofline.time_ns(num_ops,
    tensor_size)`; both attributes are required. Otherwise, and for CPU nodes, a node replays its
    `duration_micros` × 1000 ns, and a duration of 0 takes 1 ns (`Workload::issue_replay`): in a trace
    that has durations, 0 means a kernel shorter than the microsecond Chakra records.
    """
    micros = np.array([node.duration_micros for node in nodes], dtype=np.uint64)
    compute = kinds <= KIND_COMP  # GPU and host operators
    micros[~compute] = 0
    too_long = np.flatnonzero(micros > MAX_DURATION_US)
    if len(too_long):
        node = nodes[int(too_long[0])]
        raise RunDirError(
            f"{path}: {label(node)} duration_micros={node.duration_micros} exceeds the "
            f"{MAX_DURATION_US} µs a node may take"
        )
    times = micros.astype(np.int64) * 1000
    times[compute & (micros == 0)] = 1
    times[np.array([node.type == pb.METADATA_NODE for node in nodes], dtype=bool)] = 0
    where = np.flatnonzero(compute).tolist()
    if roofline is not None:  # GPU nodes timed by the roofline; host operators replay their durations
        where = np.flatnonzero(kinds == KIND_COMP).tolist()
        cache: dict[tuple[bytes, ...], tuple[bool, int, int] | None] = {}
        for i in where:
            node = nodes[i]
            raw = tuple(node.attr)
            fields = cache.get(raw, ())
            if fields == ():
                fields = cache[raw] = _roofline_fields(raw, path, node)
            if fields is None:
                raise RunDirError(
                    f"{path}: {label(node)} lacks num_ops or tensor_size, which roofline mode needs "
                    f"({roofline.source or 'the system file'} sets roofline-enabled)"
                )
            is_cpu, num_ops, tensor_size = fields
            if not is_cpu:
                times[i] = roofline.time_ns(num_ops, tensor_size)
        return times, -1, False
    if where and not micros[compute].any():  # no compute node carries a time: an idle rank's
        node = nodes[where[0]]  # placeholder (no work, no time) or an error (rundir.compute_times)
        times[compute] = 0
        return times, where[0], _roofline_fields(tuple(node.attr), path, node) is not None
    return times, -1, False


_ROOFLINE_NAMES = (b"is_cpu_op", b"num_ops", b"tensor_size")


def _roofline_fields(raw: tuple[bytes, ...], path: Path, node: Any) -> tuple[bool, int, int] | None:
    """(is_cpu_op, num_ops, tensor_size) of a compute node, or None without num_ops or tensor_size.
    Only these attributes are parsed: the converter's and STG's others (inputs, outputs, op_schema)
    would cost more than the rest of the node."""
    values: dict[str, Any] = {}
    for blob in raw:
        # AttributeProto.name is field 1: tag 0x0a, then a one-byte length for every name we read
        if len(blob) > 2 and blob[0] == 0x0A and blob[2 : 2 + blob[1]] in _ROOFLINE_NAMES:
            item = attribute(blob, path, node)
            if item is not None:
                values[item[0]] = item[1]
    if "num_ops" not in values or "tensor_size" not in values:
        return None
    is_cpu = bool(values.get("is_cpu_op", False))
    num_ops = require(values, "num_ops", path, node)
    tensor_size = require(values, "tensor_size", path, node)
    return is_cpu, num_ops, tensor_size


# `is_cpu_op` true as the converter (bool_val, field 27) and STG (int32_val, field 7) write it, or as
# int64 (field 9): AttributeProto name field then the value's tag and 1
_CPU_OP_NAME = b"\x0a\x09is_cpu_op"
_CPU_OP_VALUES = (b"\xd8\x01\x01", b"\x38\x01", b"\x48\x01")
CPU_OP_TRUE = tuple(_CPU_OP_NAME + value for value in _CPU_OP_VALUES)


def is_cpu_op_true(blob: bytes) -> bool:
    return blob.startswith(_CPU_OP_NAME) and blob[len(_CPU_OP_NAME) :] in _CPU_OP_VALUES
