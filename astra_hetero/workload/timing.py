"""Operator time on one GPU type: a roofline, overridden by measured (calibration) times where given.

Roofline: max(FLOPs / effective peak, bytes / effective HBM bandwidth), with the device's achievable
efficiencies and compute multiplier applied to both peaks.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from astra_hetero.errors import SpecError
from astra_hetero.spec.schema import GpuSpec
from astra_hetero.workload.costs import Op, Shape


@dataclass(frozen=True)
class CalibrationRow:
    gpu: str
    op: str
    time_ns: float
    tp: int | None
    micro_batch_size: int | None
    seq_len: int | None

    def matches(self, gpu: str, op: str, x: Shape) -> bool:
        return (
            self.gpu == gpu
            and self.op == op
            and self.tp in (None, x.t)
            and self.micro_batch_size in (None, x.b)
            and self.seq_len in (None, x.s)
        )

    @property
    def specificity(self) -> int:
        return sum(v is not None for v in (self.tp, self.micro_batch_size, self.seq_len))


def load_calibration(path: str | Path) -> list[CalibrationRow]:
    """CSV with columns gpu, op, time_us and optional tp, micro_batch_size, seq_len (blank = any).

    `op` is an operator name with its pass, e.g. `qkv_proj.fwd`, `mlp_down.bwd`.
    """
    path = Path(path)
    rows: list[CalibrationRow] = []
    with open(path, newline="") as handle:
        reader = csv.DictReader(handle)
        missing = {"gpu", "op", "time_us"} - set(reader.fieldnames or [])
        if missing:
            raise SpecError("calibration", f"{path}: missing column(s) {', '.join(sorted(missing))}")
        for line, raw in enumerate(reader, start=2):
            try:
                time_us = float(raw["time_us"])
                if time_us < 0:
                    raise ValueError("negative time")
                optional = {
                    k: int(raw[k]) if raw.get(k) not in (None, "") else None
                    for k in ("tp", "micro_batch_size", "seq_len")
                }
            except ValueError as exc:
                raise SpecError("calibration", f"{path}:{line}: {exc}") from None
            rows.append(CalibrationRow(raw["gpu"].strip(), raw["op"].strip(), time_us * 1e3, **optional))
    return rows


class DeviceCostModel:
    """Operator times (ns) on one GPU type: roofline, overridden by calibration rows where given."""

    def __init__(self, gpu: GpuSpec, calibration: list[CalibrationRow] | None = None) -> None:
        self.gpu = gpu
        self._flops_per_ns = gpu.effective_flops_per_ns
        self._bytes_per_ns = gpu.effective_bytes_per_ns
        self._calibration = [r for r in calibration or [] if r.gpu == gpu.type_key]

    def time_ns(self, op: Op, phase: str, x: Shape) -> float:
        if self._calibration:
            key = f"{op.name}.{phase}"
            hits = [r for r in self._calibration if r.matches(self.gpu.type_key, key, x)]
            if hits:
                return max(hits, key=lambda r: r.specificity).time_ns
        return max(op.flops / self._flops_per_ns, op.bytes / self._bytes_per_ns)
