"""A power-capped GPU (`gpu.power_limit_w` below the catalog's `tdp_w`) keeps the share of its clock
that the DVFS cube law leaves, (cap / TDP)^(1/3), on every compute rate and none of its memory rate;
no cap, or a cap at the TDP, changes nothing; a cap it cannot have is refused naming the field."""

from __future__ import annotations

import pytest

from astra_hetero.errors import SpecError
from astra_hetero.spec import parse_spec
from astra_hetero.spec.catalog import gpu_catalog
from astra_hetero.spec.schema import GpuSpec
from astra_hetero.workload.gemm import gemm_time_ns
from astra_hetero.workload.ops import Gemm, memory_op
from astra_hetero.workload.timing import OperatorModel
from tests.conftest import make_spec_data


def capped(watts: float | None, preset: str = "h100-sxm") -> GpuSpec:
    return GpuSpec.model_validate({"preset": preset, "power_limit_w": watts})


@pytest.mark.parametrize("preset", sorted(gpu_catalog()))
def test_every_catalog_gpu_names_its_board_power(preset):
    gpu = GpuSpec.model_validate({"preset": preset})
    assert gpu.tdp_w is not None and 100 <= gpu.tdp_w <= 2000
    assert gpu.power_clock_fraction == 1.0


@pytest.mark.parametrize("watts", [350.0, 500.0, 650.0])
def test_compute_rates_scale_by_the_cube_root_of_the_power_share(watts):
    full, cap = capped(None), capped(watts)
    share = (watts / 700.0) ** (1 / 3)
    assert cap.power_clock_fraction == pytest.approx(share)
    for fmt in ("bf16", "fp8", "tf32"):
        expected = share * full.effective_matmul_flops_per_ns(fmt)
        assert cap.effective_matmul_flops_per_ns(fmt) == pytest.approx(expected)
    assert cap.effective_bytes_per_ns == full.effective_bytes_per_ns


def test_a_compute_bound_gemm_slows_by_the_clock_and_a_streaming_kernel_not_at_all():
    full, cap = OperatorModel(capped(None)), OperatorModel(capped(500.0))
    gemm = Gemm(8192, 8192, 8192)
    slow = gemm_time_ns(gemm, cap.rates_for("bf16")) / gemm_time_ns(gemm, full.rates_for("bf16"))
    assert slow == pytest.approx((700 / 500) ** (1 / 3), rel=0.01)  # fixed costs are < 1 % of it
    stream = memory_op("residual", 1 << 28, 6)
    assert cap.time_ns(stream) == full.time_ns(stream)


def test_a_cap_at_the_tdp_is_the_uncapped_gpu():
    assert capped(700.0).effective_flops_per_ns == capped(None).effective_flops_per_ns


@pytest.mark.parametrize(
    "gpu, reason",
    [
        ({"preset": "h100-sxm", "power_limit_w": 800}, "above tdp_w"),
        ({"preset": "h100-sxm", "tdp_w": None, "power_limit_w": 500}, "needs tdp_w"),
        ({"preset": "h100-sxm", "power_limit_w": 0}, ""),
        ({"preset": "h100-sxm", "power_limit_w": float("nan")}, ""),
    ],
)
def test_a_cap_the_gpu_cannot_have_is_refused_naming_the_field(gpu, reason):
    data = make_spec_data()
    data["cluster"]["node_groups"][0]["gpu"] = gpu
    with pytest.raises(SpecError) as error:
        parse_spec(data)
    assert error.value.field == "cluster.node_groups[0].gpu.power_limit_w"
    assert reason in str(error.value)
