"""Profile a spec's operators with a timer and write the calibration table the generator reads.

Rows name the GPU label the spec (or `--gpu`) gives the profiled device, each operator with its pass,
and the shape it was timed at (tp, micro_batch_size, seq_len); optimizer-phase rows are per million
parameters and carry no shape. The `note` column records the device and how the time was taken.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from astra_hetero.errors import SpecError
from astra_hetero.profiling.plan import ProfilePoint, profile_points
from astra_hetero.profiling.timer import OperatorTimer
from astra_hetero.rundir import write_text_atomic
from astra_hetero.spec.catalog import gpu_catalog, normalize_key
from astra_hetero.spec.schema import Spec
from astra_hetero.workload.calibration import COLUMNS, MAX_TIME_US


@dataclass(frozen=True)
class ProfiledRow:
    gpu: str
    op: str  # "<operator>.<pass>"
    time_us: float
    tp: int | None
    micro_batch_size: int | None
    seq_len: int | None
    note: str


def gpu_label(spec: Spec, requested: str | None) -> str:
    """The label the rows carry: `requested` (a GPU of the spec or a catalog preset), or the spec's
    only GPU label."""
    labels = sorted({g.gpu.type_key for g in spec.cluster.node_groups})
    if requested is None:
        if len(labels) > 1:
            raise SpecError(
                "--gpu", f"the spec has several GPU types ({', '.join(labels)}); name the one profiled"
            )
        return labels[0]
    label = normalize_key(requested)
    if label not in {*labels, *gpu_catalog()}:
        raise SpecError("--gpu", f"unknown GPU {requested!r}; the spec has {', '.join(labels)}")
    return label


def profile(
    spec: Spec,
    timer: OperatorTimer,
    label: str,
    seq_lens: Sequence[int] = (),
    micro_batch_sizes: Sequence[int] = (),
    progress: Callable[[ProfilePoint], None] | None = None,
) -> list[ProfiledRow]:
    rows = []
    note = f"profiled on {timer.device_name}"
    for point in profile_points(spec, seq_lens, micro_batch_sizes):
        if progress:
            progress(point)
        time_us = timer.time_ns(point.op, point.phase, point.shape) / 1e3
        if not 0 < time_us <= MAX_TIME_US:
            raise ValueError(f"the timer returned {time_us} µs for {point.op.name}.{point.phase}")
        shaped = point.phase != "step"
        rows.append(
            ProfiledRow(
                label,
                f"{point.op.name}.{point.phase}",
                time_us,
                point.shape.t if shaped else None,
                point.shape.b if shaped else None,
                point.shape.s if shaped else None,
                note + ("" if shaped else ", per million parameters"),
            )
        )
    return rows


def calibration_csv(rows: Sequence[ProfiledRow]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    for r in rows:
        writer.writerow(
            [
                r.gpu,
                r.op,
                f"{r.time_us:.6g}",
                *("" if v is None else v for v in (r.tp, r.micro_batch_size, r.seq_len)),
                r.note,
            ]
        )
    return out.getvalue()


def write_calibration(path: Path, rows: Sequence[ProfiledRow]) -> None:
    if path.is_dir():
        raise SpecError("-o", f"{path} is a directory; name the CSV file to write")
    write_text_atomic(path, calibration_csv(rows))
