"""GEMM time from its shape on one GPU type.

The GPU computes a GEMM as output tiles, one thread block per tile, in waves of `num_sms` blocks
(NVIDIA, "Matrix Multiplication Background User's Guide", sections "Tile quantization" and "Wave
quantization"). Each SM runs at 1/num_sms of the GPU's *achievable* matmul rate (its measured MAMF),
so a GEMM that fills whole waves of whole tiles reaches that rate and anything else reaches less:
  - tile quantization: a dimension that is not a multiple of the tile still costs whole tiles;
  - wave quantization: the last wave may leave SMs idle (a GEMM of few tiles uses few SMs);
  - small or skinny shapes: too few tiles fill the GPU only by splitting K over several blocks
    (split-K), whose FP32 partial sums are written out and summed by a second kernel after the first;
    a GEMM whose operands are large next to its FLOPs (small K, or tiny M) is bound by memory bandwidth;
  - every kernel pays a fixed launch/latency cost.
The library is assumed to pick the fastest of these options for each shape, as cuBLAS's heuristics aim
to. The tiles are the large ones the guide lists as the most efficient (256×128, 128×256, 128×128);
smaller tiles trade efficiency per SM for fewer idle SMs, which split-K stands in for here — except
for a GEMM of at most SMALL_M rows (few tokens: decoding, a small micro-batch, a lightly loaded
expert), where a 128- or 256-row tile would spend all but M of its rows on padding: such a GEMM also
has the guide's 64-row tiles (64×128, 64×64), as cuBLAS runs skinny problems with short tiles. Without
them a one-token GEMM of a small weight matrix (Llama-2-7B's 4096×512 output projection at TP 8)
was charged a 256-row tile's compute, 11.6 µs where it measures 6-7 µs on an A100 (Vidur's tables,
benchmarks/operators.py); with them it is bound, as measured, by streaming its weights.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from astra_hetero.workload.ops import BYTES_FP32, Gemm

TILES = ((256, 128), (128, 256), (128, 128))
SMALL_M = 64  # the guide's smallest tile height
SMALL_M_TILES = ((64, 128), (64, 64))
MAX_SPLIT_K = 16
MIN_K_PER_SPLIT = 128  # two 64-deep main-loop stages; shallower splits are all prologue and epilogue


@dataclass(frozen=True)
class DeviceRates:
    """What the timing of one GPU type needs, in units of one nanosecond."""

    matmul_flops_per_ns: float  # achievable (MAMF) matmul rate of the whole GPU
    bytes_per_ns: float  # achievable device-memory bandwidth
    num_sms: int | None  # None: no quantization (a GPU described without its SM count)
    kernel_ns: float  # fixed cost per kernel


def gemm_time_ns(g: Gemm, rates: DeviceRates) -> float:
    """Fastest (tile, split-K) choice: fixed costs plus the larger of compute and memory time."""
    if rates.num_sms is None:
        return rates.kernel_ns + max(g.flops / rates.matmul_flops_per_ns, g.bytes / rates.bytes_per_ns)
    per_sm = rates.matmul_flops_per_ns / rates.num_sms
    best = math.inf
    for tile_m, tile_n in TILES + (SMALL_M_TILES if g.m <= SMALL_M else ()):
        tiles = math.ceil(g.m / tile_m) * math.ceil(g.n / tile_n) * g.batch
        for split in range(1, MAX_SPLIT_K + 1):
            depth = math.ceil(g.k / split)
            if split > 1 and depth < MIN_K_PER_SPLIT:
                break
            waves = math.ceil(tiles * split / rates.num_sms)
            compute = waves * 2.0 * tile_m * tile_n * depth / per_sm
            if split == 1:
                time = rates.kernel_ns + max(compute, g.bytes / rates.bytes_per_ns)
            else:  # FP32 partial sums written by the GEMM, then summed into C by a second kernel
                partials = split * g.m * g.n * g.batch * BYTES_FP32
                operands = g.bytes - g.m * g.n * g.batch * g.c_bytes
                time = 2 * rates.kernel_ns + max(compute, (operands + partials) / rates.bytes_per_ns)
                time += (partials + g.m * g.n * g.batch * (g.c_bytes + g.c_read_bytes)) / rates.bytes_per_ns
            best = min(best, time)
    return best


def gemm_efficiency(g: Gemm, rates: DeviceRates) -> float:
    """Achieved fraction of the achievable matmul rate (≤ 1 by construction)."""
    return g.flops / gemm_time_ns(g, rates) / rates.matmul_flops_per_ns
