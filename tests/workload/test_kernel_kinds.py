"""Memory-bound kernels of a measured kind (spec/catalog/kernels.yaml): the fixed cost is always paid,
a working set within L2 runs at the kind's L2 rate and a larger one at its DRAM rate, and a kernel of
few rows is bound by one thread block's serial walk over its row — each in closed form."""

from __future__ import annotations

import math

import pytest

from astra_hetero.spec.schema import GpuSpec
from astra_hetero.workload.kernels import KINDS, ROW_STEP_ELEMENTS, kernel_catalog, kernel_kind
from astra_hetero.workload.ops import memory_op
from astra_hetero.workload.timing import OperatorModel

PRESETS = ["a100-80", "h100-sxm"]
DATASHEET_L2_MIB = {"ampere": 40, "hopper": 50}  # NVIDIA A100 / H100 white papers


def model(preset: str) -> OperatorModel:
    return OperatorModel(GpuSpec.model_validate({"preset": preset}))


def test_the_catalog_holds_positive_rates_and_an_l2_size_within_the_datasheets():
    for architecture, kinds in kernel_catalog().items():
        assert set(kinds) <= set(KINDS)
        for kind in kinds.values():
            assert kind.fixed_us > 0
            assert kind.bandwidth_fraction_at(1.0) > 0 and kind.bandwidth_fraction_at(1e12) > 0
            assert 0 < kind.l2_resident_mib <= DATASHEET_L2_MIB.get(architecture, math.inf)


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("name", ["norm_attn", "swiglu", "rope", "residual_mlp", "embedding"])
def test_a_tiny_kernel_takes_at_least_its_kinds_fixed_cost(preset, name):
    m = model(preset)
    kind = kernel_kind(m.gpu.architecture, name)
    tiny = memory_op(name, 64, 4)
    assert m.time_ns(tiny) >= kind.fixed_us * 1e3
    assert m.time_ns(tiny) < kind.fixed_us * 1e3 + 1e3  # and little more: 256 bytes


@pytest.mark.parametrize("preset", PRESETS)
def test_working_sets_within_l2_run_at_the_l2_rate_and_larger_ones_at_the_dram_rate(preset):
    m = model(preset)
    kind = kernel_kind(m.gpu.architecture, "norm_attn")
    stream = m.gpu.effective_bytes_per_ns
    edge = kind.l2_resident_mib * 2**20
    for nbytes, fraction in ((edge, kind.l2_bandwidth_fraction), (4 * edge, kind.bandwidth_fraction)):
        op = memory_op("norm_attn", nbytes / 4, 4)
        assert m.time_ns(op) == pytest.approx(kind.fixed_us * 1e3 + nbytes / (stream * fraction))


@pytest.mark.parametrize("preset", PRESETS)
def test_a_one_row_kernel_is_bound_by_its_blocks_walk_over_the_row(preset):
    """One token's SwiGLU over a 28672-wide FFN: 28 steps of one block, not 172 KB at full bandwidth."""
    m = model(preset)
    kind = kernel_kind(m.gpu.architecture, "swiglu")
    row = 28672
    op = memory_op("swiglu", row, 6, row_elements=row)
    chain = math.ceil(row / ROW_STEP_ELEMENTS) * kind.row_us * 1e3
    assert m.time_ns(op) == pytest.approx(kind.fixed_us * 1e3 + chain)
    assert m.time_ns(op) > 3 * m.time_ns(memory_op("swiglu", row, 6))  # the same bytes without a row


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("name", ["norm_attn", "swiglu", "rope"])
def test_time_never_falls_as_tokens_or_the_row_grow(preset, name):
    m = model(preset)
    for row in (512, 4096, 14336):
        times = [
            m.time_ns(memory_op(name, t * row, 4, row_elements=row)) for t in (1, 8, 32, 128, 1024, 8192)
        ]
        assert times == sorted(times)
    rows = [m.time_ns(memory_op(name, 4 * row, 4, row_elements=row)) for row in range(256, 65536, 256)]
    assert rows == sorted(rows)


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("name", ["norm_attn", "swiglu", "rope", "residual_mlp", "embedding"])
def test_leaving_l2_never_makes_a_kernel_faster(preset, name):
    m = model(preset)
    edge = kernel_kind(m.gpu.architecture, name).l2_resident_mib * 2**20
    assert m.time_ns(memory_op(name, edge + 64, 1)) >= m.time_ns(memory_op(name, edge, 1))


@pytest.mark.parametrize("preset", PRESETS)
def test_rows_past_what_the_sms_hold_at_once_take_a_second_wave(preset):
    """Blocks of 1024 threads: two per SM (2048 resident threads), so 2 × num_sms + 1 rows take two waves."""
    m = model(preset)
    kind = kernel_kind(m.gpu.architecture, "norm_attn")
    row = 4096  # four 1024-element steps per row
    one_wave = 2 * m.gpu.num_sms
    full = memory_op("norm_attn", one_wave * row, 4, row_elements=row)
    spill = memory_op("norm_attn", (one_wave + 1) * row, 4, row_elements=row)
    chain_us = 4 * kind.row_us
    assert spill.bytes / (m.gpu.effective_bytes_per_ns * kind.l2_bandwidth_fraction) < 2 * chain_us * 1e3
    assert m.time_ns(spill) == pytest.approx((kind.fixed_us + 2 * chain_us) * 1e3)
    assert m.time_ns(full) < m.time_ns(spill)


def test_megatrons_own_layer_normalises_with_apex_where_it_was_measured_and_the_norm_kind_elsewhere():
    from dataclasses import replace

    from astra_hetero.workload.costs import layer_backward, layer_forward
    from astra_hetero.workload.ops import Op, Shape

    x = Shape(b=2, s=2048, h=4096, a=32, kv=32, f=16384, v=51200, t=1, sp=False, swiglu=False)
    own, te = replace(x, fused_attention=False), x
    for shape, kernel in ((own, "apex_norm"), (te, "")):
        steps = [*layer_forward(shape), *layer_backward(shape, "none")]
        norms = [s for s in steps if isinstance(s, Op) and s.name in ("norm_attn", "norm_mlp")]
        assert len(norms) == 4 and {n.kernel for n in norms} == {kernel}
    apex = kernel_kind("ampere", "norm_attn", "apex_norm")
    assert apex is kernel_catalog()["ampere"]["apex_norm"] and apex.bandwidth_fraction == pytest.approx(0.50)
    assert kernel_kind("hopper", "norm_attn", "apex_norm") is kernel_kind("hopper", "norm_attn")  # unmeasured
    a100 = model("a100-80")
    norm = next(s for s in layer_forward(own) if isinstance(s, Op) and s.name == "norm_attn")
    rate = a100.gpu.effective_bytes_per_ns * 0.50
    assert a100.time_ns(norm) == pytest.approx(apex.fixed_us * 1e3 + norm.bytes / rate)


@pytest.mark.parametrize("preset", PRESETS)
def test_no_kind_streams_from_dram_faster_than_the_datasheet(preset):
    gpu = model(preset).gpu
    for kind in kernel_catalog()[gpu.architecture].values():
        assert kind.bandwidth_fraction_at(1e12) * gpu.effective_bytes_per_ns <= gpu.hbm_tbps * 1e3 * 1.0001


def test_a_catalog_whose_l2_rate_is_below_its_dram_rate_or_that_names_an_unknown_kind_is_refused():
    from astra_hetero.workload.kernels import parse_kernel_catalog

    slow_l2 = (
        "ampere:\n  l2_resident_mib: 24\n"
        "  norm: {bandwidth_fraction: 0.5, l2_bandwidth_fraction: 0.4, fixed_us: 1}\n"
    )
    with pytest.raises(ValueError, match=r"ampere\.norm: l2_bandwidth_fraction below bandwidth_fraction"):
        parse_kernel_catalog(slow_l2)
    with pytest.raises(ValueError, match=r"unknown kinds \['norms'\]"):
        parse_kernel_catalog("ampere:\n  norms: {fixed_us: 1}\n")
    good = parse_kernel_catalog(slow_l2.replace("0.4", "0.6"))
    assert good["ampere"]["norm"].bandwidth_fraction_at(2**20) == 0.6  # within 24 MiB: the L2 rate
    assert good["ampere"]["norm"].bandwidth_fraction_at(25 * 2**20) == 0.5
