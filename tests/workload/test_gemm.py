"""GEMM time from shape: never faster than the achievable matmul rate, faster per FLOP as it grows,
and the quantization effects the model claims, in closed form."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from astra_hetero.spec.schema import GpuSpec
from astra_hetero.workload.gemm import DeviceRates, gemm_efficiency, gemm_time_ns
from astra_hetero.workload.ops import Gemm
from astra_hetero.workload.timing import OperatorModel, device_rates

GPUS = ["a100-80", "h100-sxm", "mi300x", "l40s"]


def rates(preset: str) -> DeviceRates:
    return device_rates(GpuSpec.model_validate({"preset": preset}))


def random_shapes(count: int, seed: int) -> list[Gemm]:
    rng = np.random.default_rng(seed)
    dims = np.exp(rng.uniform(np.log(1), np.log(65536), size=(count, 3))).astype(int) + 1
    batches = rng.choice([1, 1, 1, 4, 96], size=count)
    return [Gemm(int(m), int(n), int(k), int(b)) for (m, n, k), b in zip(dims, batches, strict=True)]


@pytest.mark.parametrize("preset", GPUS)
def test_efficiency_never_exceeds_the_achievable_peak(preset):
    r = rates(preset)
    for g in random_shapes(400, seed=len(preset)):
        assert 0 < gemm_efficiency(g, r) <= 1.0
        assert gemm_time_ns(g, r) >= r.kernel_ns  # the fixed cost is always paid
        assert gemm_time_ns(g, r) >= g.bytes / r.bytes_per_ns  # and never faster than its memory traffic


@pytest.mark.parametrize("preset", GPUS)
def test_efficiency_rises_with_size(preset):
    r = rates(preset)
    square = [gemm_efficiency(Gemm(n, n, n), r) for n in (2**e for e in range(7, 15))]
    assert square == sorted(square)
    # Training GEMMs grow with the tokens of a micro-batch: (tokens, 3h, h) for h = 4096.
    tokens = [gemm_efficiency(Gemm(m, 3 * 4096, 4096), r) for m in (2**e for e in range(6, 16))]
    assert tokens == sorted(tokens)


@pytest.mark.parametrize("preset", GPUS)
def test_large_aligned_gemms_reach_the_measured_mamf(preset):
    assert gemm_efficiency(Gemm(8192, 8192, 8192), rates(preset)) > 0.95  # 4096 tiles: 31.03 waves on 132 SMs


def test_small_and_skinny_gemms_are_penalised():
    r = rates("a100-80")
    big = gemm_efficiency(Gemm(8192, 8192, 8192), r)
    assert gemm_efficiency(Gemm(512, 512, 512), r) < 0.5 * big  # too few tiles to fill 108 SMs
    assert gemm_efficiency(Gemm(8192, 8192, 64), r) < 0.6 * big  # K = 64: bound by memory traffic
    # M = 16 streams the weights: efficiency is the roofline's intensity × bandwidth / matmul rate.
    skinny = Gemm(16, 8192, 8192)
    expected = skinny.flops / skinny.bytes * r.bytes_per_ns / r.matmul_flops_per_ns
    assert gemm_efficiency(skinny, r) == pytest.approx(expected, rel=0.1)


def test_one_tile_past_a_full_wave_costs_a_second_wave():
    """Wave quantization in closed form: no memory limit, no fixed cost, K too shallow to split."""
    r = DeviceRates(matmul_flops_per_ns=108e3, bytes_per_ns=1e12, num_sms=108, kernel_ns=0.0)
    one_wave = gemm_time_ns(Gemm(128 * 108, 128, 128), r)
    assert one_wave == pytest.approx(2 * 128 * 128 * 128 / 1e3)  # one 128×128×128 tile per SM
    assert gemm_time_ns(Gemm(128 * 109, 128, 128), r) == pytest.approx(2 * one_wave)


def test_tile_quantization_charges_whole_tiles():
    r = DeviceRates(matmul_flops_per_ns=108e3, bytes_per_ns=1e12, num_sms=108, kernel_ns=0.0)
    assert gemm_time_ns(Gemm(129, 128, 128), r) == gemm_time_ns(Gemm(256, 128, 128), r)


def test_split_k_fills_the_gpu_when_tiles_are_few():
    """8 output tiles on 108 SMs: splitting K 13 ways keeps 104 SMs busy instead of 8."""
    r = DeviceRates(matmul_flops_per_ns=108e3, bytes_per_ns=1e12, num_sms=108, kernel_ns=0.0)
    g = Gemm(512, 256, 128 * 13)
    unsplit = 2 * 256 * 128 * g.k / 1e3  # one 256×128 tile per SM, full depth
    assert gemm_time_ns(g, r) == pytest.approx(2 * 128 * 128 * 128 / 1e3)  # 13 splits of depth 128
    assert gemm_time_ns(g, r) < unsplit / 10


def test_every_kernel_pays_the_fixed_cost():
    r = rates("h100-sxm")
    assert gemm_time_ns(Gemm(1, 1, 1), r) >= r.kernel_ns
    assert r.kernel_ns == pytest.approx(1000.0)


def test_without_an_sm_count_the_model_is_a_roofline():
    r = DeviceRates(matmul_flops_per_ns=300e3, bytes_per_ns=2000.0, num_sms=None, kernel_ns=1000.0)
    g = Gemm(1000, 3000, 5000)
    assert gemm_time_ns(g, r) == pytest.approx(1000.0 + max(g.flops / 300e3, g.bytes / 2000.0))


def test_compute_multiplier_scales_the_rate_not_the_fixed_cost():
    fast = device_rates(GpuSpec.model_validate({"preset": "h100-sxm"}))
    slow = device_rates(GpuSpec.model_validate({"preset": "h100-sxm", "compute_multiplier": 0.5}))
    g = Gemm(8192, 8192, 8192)
    assert gemm_time_ns(g, slow) == pytest.approx(2 * gemm_time_ns(g, fast), rel=1e-3)
    assert math.isclose(slow.kernel_ns, fast.kernel_ns)


def test_a_gemm_of_few_rows_runs_short_tiles_instead_of_padding_a_tall_one():
    """M ≤ 64 also has the guide's 64-row tiles: a one-row GEMM pays a 64×64 tile, not a 128×128 one."""
    r = DeviceRates(matmul_flops_per_ns=108e3, bytes_per_ns=1e12, num_sms=108, kernel_ns=0.0)
    assert gemm_time_ns(Gemm(1, 128, 128), r) == pytest.approx(2 * 64 * 64 * 128 / 1e3)  # two 64×64 tiles
    assert gemm_time_ns(Gemm(64, 128, 128), r) == pytest.approx(2 * 64 * 64 * 128 / 1e3)
    assert gemm_time_ns(Gemm(65, 128, 128), r) == pytest.approx(2 * 128 * 128 * 128 / 1e3)  # tall tiles only


@pytest.mark.parametrize("preset", ["a100-80", "h100-sxm"])
def test_a_one_token_gemm_takes_its_fixed_cost_plus_streaming_its_weights(preset):
    r = OperatorModel(GpuSpec.model_validate({"preset": preset})).rates_for("bf16")
    g = Gemm(1, 8192, 8192)  # a 128 MiB weight matrix read once for one token
    weights = g.k * g.n * g.operand_bytes
    assert gemm_time_ns(g, r) >= r.kernel_ns + weights / r.bytes_per_ns
    assert gemm_time_ns(g, r) == pytest.approx(r.kernel_ns + g.bytes / r.bytes_per_ns)


@pytest.mark.parametrize("preset", ["a100-80", "h100-sxm"])
def test_time_never_falls_as_rows_or_columns_grow(preset):
    """Monotone in M and N (in K, split-K's whole-split choices may shave a few percent off K + 1)."""
    r = OperatorModel(GpuSpec.model_validate({"preset": preset})).rates_for("bf16")
    for g in random_shapes(300, seed=7):
        time = gemm_time_ns(g, r)
        assert gemm_time_ns(replace(g, m=g.m + 1), r) >= time
        assert gemm_time_ns(replace(g, n=g.n + 1), r) >= time
    rows = [gemm_time_ns(Gemm(m, 4096, 4096), r) for m in range(1, 300)]
    assert rows == sorted(rows)
