"""Operator time on one GPU type: shape-aware analytical models, overridden by measured (calibration)
times where a calibration table has them.

- GEMMs: tile/wave quantization, split-K and a fixed kernel cost over the GPU's achievable matmul rate
  (`gemm.py`), bounded below by their memory traffic.
- Memory-bound kernels: bytes at achievable bandwidth plus the fixed cost per kernel; kernels that draw
  a random number per element (dropout masks, Philox) reach only DROPOUT_BANDWIDTH_FRACTION of it.
  Norms, activations, rotary embeddings, residual adds and embedding lookups take their kind's measured
  bandwidth (its L2 rate for working sets that stay in L2, its DRAM rate above) and fixed cost where the
  kernel catalog has the GPU's architecture, and an operator that names its row length
  (`Op.row_elements`) is never faster than one thread block's walk over a row (`kernels.py`).
- Fused attention: FLOPs at the GPU's fused-attention efficiency for the pass (catalog figures at long
  sequences), reduced at short sequences as s / (s + ATTENTION_HALF_SEQ) (see below), bounded below by
  its memory traffic, plus the fixed cost of its kernels.
`compute_multiplier` scales both throughputs; the fixed per-kernel cost stays.
"""

from __future__ import annotations

from collections.abc import Callable

from astra_hetero.spec.schema import GpuSpec
from astra_hetero.workload.calibration import CalibrationTable, calibrated_time_ns
from astra_hetero.workload.costs import operators
from astra_hetero.workload.gemm import DeviceRates, gemm_time_ns
from astra_hetero.workload.kernels import gemm_kind, kernel_kind
from astra_hetero.workload.ops import Op, Shape

# Fused attention throughput against sequence length: cuDNN causal forward, head dim 128, H100 SXM5
# (FlashAttention-3 paper, Fig. 5): 315, 410, 484, 518, 529, 539 TFLOP/s at 0.5k…16k tokens. The curve
# r(s) = r∞·s/(s + s½) fits it within 5 % with s½ = 385 tokens (r∞ = 552); catalog efficiencies are the
# 16k figures, so r(s) = r16k · s/(s + s½) · (16384 + s½)/16384.
ATTENTION_HALF_SEQ = 385.0
ATTENTION_REFERENCE_SEQ = 16384.0
# GPUs without a fused-attention figure: forward at the A100's FlashAttention-2/MAMF ratio
# (0.73·312/271.2), backward at the backward/forward ratio measured on H100 (516/595).
ATTENTION_FWD_PER_MATMUL, ATTENTION_BWD_PER_FWD = 0.84, 0.87
# PyTorch's dropout generates its mask with Philox inside the kernel and does not stream at the memory
# rate: on an A100, 1e9 elements, torch's dropout reaches 952.7 GB/s where a streaming dropout that
# spreads each 128-bit Philox draw over four elements reaches 1326.9 GB/s (flagos-ai/FlagGems pull
# request 85, "Improve dropout performance by unrolling 4xint random masks", 2024): 0.718. Megatron's
# fused bias-dropout-add draws its mask the same way.
DROPOUT_BANDWIDTH_FRACTION = 952.7 / 1326.9
# `compute.attention_kernel: flash2` (the flash-attn package's FlashAttention-2, TE's backend with
# NVTE_FUSED_ATTN=0) against the catalog's fused-attention figures, by architecture. Hopper: the
# catalog's figures are cuDNN's; FlashAttention-2 has no Hopper (wgmma/TMA) kernel and reaches, on
# H100 SXM5 at head dim 128 (FlashAttention-3 paper, Shah et al. 2024: the causal forward figure
# the curve above comes from, and the backward figure), FlashAttention-2 / cuDNN 335 / 539 TFLOP/s
# forward and 322 / 516 backward at 16k, 319 / 518 and 310 / 499 at 4k: 0.62 throughout. Other
# architectures: the catalog's figure is FlashAttention-2's own (A100) or an estimate, used for both.
FLASH2_FRACTION = {"hopper": 0.62}


def attention_efficiency(gpu: GpuSpec, attention_pass: str, seq_len: int) -> float:
    forward = gpu.attention_fwd_efficiency or gpu.compute_efficiency * ATTENTION_FWD_PER_MATMUL
    long_seq = (
        forward
        if attention_pass == "fwd"
        else gpu.attention_bwd_efficiency or forward * ATTENTION_BWD_PER_FWD
    )
    scale = (
        seq_len
        / (seq_len + ATTENTION_HALF_SEQ)
        * (ATTENTION_REFERENCE_SEQ + ATTENTION_HALF_SEQ)
        / ATTENTION_REFERENCE_SEQ
    )
    return min(1.0, long_seq * scale)


def device_rates(gpu: GpuSpec, fmt: str = "bf16") -> DeviceRates:
    """The GPU's rates with GEMMs in matmul format `fmt` (its catalog peak and achievable fraction)."""
    return DeviceRates(
        gpu.effective_matmul_flops_per_ns(fmt),
        gpu.effective_bytes_per_ns,
        gpu.num_sms,
        gpu.kernel_overhead_us * 1e3,
    )


def gemm_rates(gpu: GpuSpec, fmt: str = "bf16") -> DeviceRates:
    """The rates GEMMs run at: `device_rates`, with the kernel catalog's measured fixed cost and
    streaming rate of GEMMs where it has the GPU's architecture."""
    rates = device_rates(gpu, fmt)
    measured = gemm_kind(gpu.architecture)
    if measured is None:
        return rates
    bytes_per_ns = rates.bytes_per_ns * (measured.bandwidth_fraction or 1.0)
    return DeviceRates(rates.matmul_flops_per_ns, bytes_per_ns, rates.num_sms, measured.fixed_us * 1e3)


class OperatorModel:
    """The analytical time (ns) of any operator on one GPU type."""

    def __init__(self, gpu: GpuSpec) -> None:
        self.gpu = gpu
        self.rates = device_rates(gpu)
        self._by_format: dict[str, DeviceRates] = {}
        sustained = gpu.sustained_compute_fraction * gpu.compute_multiplier
        self._peak_flops_per_ns = gpu.bf16_tflops * 1e3 * sustained

    def rates_for(self, fmt: str) -> DeviceRates:
        """The rates GEMMs in matmul format `fmt` run at (`gemm_rates`)."""
        found = self._by_format.get(fmt)
        if found is None:
            found = self._by_format[fmt] = gemm_rates(self.gpu, fmt)
        return found

    def time_ns(self, op: Op) -> float:
        memory_ns = op.bytes / self.rates.bytes_per_ns
        if op.kind == "gemm":
            return sum(gemm_time_ns(g, self.rates_for(g.fmt)) for g in op.gemms)
        if op.kind == "attention":
            # attention efficiencies are fractions of the BF16 peak; another format scales them by
            # its achievable matmul rate against BF16's
            scale = self.rates_for(op.fmt).matmul_flops_per_ns / self.rates_for("bf16").matmul_flops_per_ns
            efficiency = attention_efficiency(self.gpu, op.attention_pass, op.seq_len)
            if op.attention_kernel == "flash2":
                efficiency *= FLASH2_FRACTION.get(self.gpu.architecture, 1.0)
            rate = self._peak_flops_per_ns * efficiency * scale
            return op.kernels * self.rates.kernel_ns + max(op.flops / rate, memory_ns)
        kernel_ns = self.rates.kernel_ns
        chain_ns = 0.0
        measured = kernel_kind(self.gpu.architecture, op.name, op.kernel)
        if measured is not None:
            kernel_ns = measured.fixed_us * 1e3
            memory_ns = op.bytes / (self.rates.bytes_per_ns * measured.bandwidth_fraction_at(op.bytes))
            chain_ns = measured.row_chain_us(op.row_elements, op.rows, self.gpu.num_sms) * 1e3
        if op.random:
            memory_ns /= DROPOUT_BANDWIDTH_FRACTION
        return op.kernels * kernel_ns + max(memory_ns, chain_ns)


class DeviceCostModel:
    """Operator times (ns) on one GPU type: the analytical model, overridden by calibration rows for
    its label — or, for a GPU derived from a preset, by the preset's rows carried over as a correction
    (see `calibration.py`)."""

    def __init__(self, gpu: GpuSpec, calibration: CalibrationTable | None = None) -> None:
        self.gpu = gpu
        self.model = OperatorModel(gpu)
        self._table = calibration
        self._preset_model: OperatorModel | None = None
        if calibration is not None and gpu.preset is not None and gpu.type_key != gpu.preset:
            self._preset_model = OperatorModel(GpuSpec.model_validate({"preset": gpu.preset}))

    def time_ns(self, op: Op, phase: str, x: Shape) -> float:
        if self._table is not None:
            rows = self._table.rows_for(self.gpu.type_key, op.name, phase)
            if rows:
                return calibrated_time_ns(rows, x, _work_at(op, phase), _model_at(self.model, op, phase, x))
            if self._preset_model is not None and self.gpu.preset is not None:
                rows = self._table.rows_for(self.gpu.preset, op.name, phase)
                if rows:
                    measured = calibrated_time_ns(
                        rows, x, _work_at(op, phase), _model_at(self._preset_model, op, phase, x)
                    )
                    return measured * self.model.time_ns(op) / self._preset_model.time_ns(op)
        return self.model.time_ns(op)


def _op_at(op: Op, phase: str, shape: Shape) -> Op:
    return operators(shape)[phase][op.name]


def _work_at(op: Op, phase: str) -> Callable[[Shape], float]:
    def work(shape: Shape) -> float:
        other = _op_at(op, phase, shape)
        return other.flops if other.flops > 0 else other.bytes

    return work


def _model_at(model: OperatorModel, op: Op, phase: str, x: Shape) -> Callable[[Shape], float]:
    return lambda shape: model.time_ns(op if shape == x else _op_at(op, phase, shape))
