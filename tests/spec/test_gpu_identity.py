"""A GPU is what its numbers say: groups built from one preset with different overrides compute
differently and carry their own labels; one label never names two sets of numbers. The catalog's
numbers are consistent with each other and carry their sources."""

from __future__ import annotations

import json
import math
import re
from importlib import resources

import pytest

from astra_hetero.errors import SpecError
from astra_hetero.pipeline import build_run_dir
from astra_hetero.spec import parse_spec
from astra_hetero.spec.catalog import gpu_catalog
from tests.conftest import make_spec_data, node_group
from tests.workload.traces import pb, read_with_chakra


def two_h100_groups(second_gpu) -> dict:
    data = make_spec_data()
    data["cluster"]["node_groups"] = [
        node_group("fast", "h100-sxm", count=2),
        node_group("slow", second_gpu, count=2),
    ]
    data["parallelism"] = {**data["parallelism"], "pp": 1, "dp": 8, "global_batch_size": 8}
    return data


def compute_us_by_label(tmp_path, data) -> dict[str, float]:
    run = build_run_dir(parse_spec(data), tmp_path / "run", topology=False, per_rank=True)
    manifest = json.loads((run.root / "manifest.json").read_text())
    totals: dict[str, list[float]] = {}
    for rank in manifest["ranks"]:
        _, nodes = read_with_chakra(run.root / f"workload/workload.{rank['rank']}.et")
        totals.setdefault(rank["gpu"], []).append(  # the GPU's work, not the framework's host costs
            sum(n.duration_micros for n in nodes if n.type == pb.COMP_NODE and "framework." not in n.name)
        )
    return {label: max(values) for label, values in totals.items()}


@pytest.mark.parametrize(
    "override",
    [
        {"compute_multiplier": 0.5},
        {"compute_efficiency": 0.4, "memory_efficiency": 0.45},
        {"bf16_tflops": 494.7, "hbm_tbps": 1.675},
    ],
)
def test_a_group_derived_from_the_same_preset_computes_with_its_own_numbers(tmp_path, override):
    slow = {"preset": "h100-sxm", "name": "my-slow-h100", **override}
    compute = compute_us_by_label(tmp_path, two_h100_groups(slow))
    assert set(compute) == {"h100-sxm", "my-slow-h100"}
    # half the rates; the fixed cost of each kernel (the kernel catalog's, measured) does not scale
    assert 1.7 < compute["my-slow-h100"] / compute["h100-sxm"] < 2.2


def test_one_label_with_two_sets_of_numbers_is_rejected_naming_the_group():
    with pytest.raises(SpecError) as error:
        parse_spec(two_h100_groups({"preset": "h100-sxm", "compute_multiplier": 0.5}))
    assert error.value.field == "cluster"
    assert (
        "node_groups[1].gpu" in error.value.reason and "compute_multiplier 1.0 vs 0.5" in error.value.reason
    )


def test_identical_gpus_share_one_label_and_time_alike(tmp_path):
    compute = compute_us_by_label(tmp_path, two_h100_groups({"preset": "h100-sxm"}))
    assert list(compute) == ["h100-sxm"]


def test_a_renamed_preset_keeps_its_numbers_under_its_own_label():
    spec = parse_spec(two_h100_groups({"preset": "h100-sxm", "name": "H100 lab 2"}))
    fast, renamed = (g.gpu for g in spec.cluster.node_groups)
    assert renamed.type_key == "h100-lab-2" and fast.type_key == "h100-sxm"
    assert renamed.model_dump(exclude={"name"}) == fast.model_dump(exclude={"name"})


def test_catalog_peaks_agree_with_sm_count_and_clock():
    """peak = SMs × clock × tensor FLOP per clock per SM, a power of two per architecture."""
    for key, gpu in gpu_catalog().items():
        per_sm_per_clock = gpu.bf16_tflops * 1e12 / (gpu.num_sms * gpu.boost_clock_mhz * 1e6)
        nearest = 2 ** round(math.log2(per_sm_per_clock))
        assert abs(per_sm_per_clock / nearest - 1) < 0.10, key


@pytest.mark.parametrize(
    ("key", "per_sm_per_clock"), [("h100-sxm", 4096), ("b200", 8192), ("gb200", 8192), ("mi355x", 4096)]
)
def test_peak_is_sms_times_clock_times_the_architectures_dense_bf16_rate(key, per_sm_per_clock):
    """Hopper 4096 and Blackwell 8192 dense BF16 FLOP per clock per SM (CDNA 4: per CU)."""
    gpu = gpu_catalog()[key]
    peak = gpu.num_sms * gpu.boost_clock_mhz * 1e6 * per_sm_per_clock / 1e12
    assert peak == pytest.approx(gpu.bf16_tflops, rel=0.002)


def test_other_formats_keep_the_datasheets_ratios_to_bf16():
    """FP8 doubles BF16 and TF32 halves it wherever the catalog has them (dense figures)."""
    for key, gpu in gpu_catalog().items():
        if gpu.fp8_tflops is not None:
            assert gpu.fp8_tflops / gpu.bf16_tflops == pytest.approx(2.0, rel=0.03), key
        if gpu.tf32_tflops is not None:
            assert gpu.tf32_tflops / gpu.bf16_tflops == pytest.approx(0.5, rel=0.03), key
        assert gpu.fp32_tflops is not None and gpu.fp32_tflops < gpu.bf16_tflops / 3, key


def test_every_catalog_number_beyond_the_datasheet_names_its_source():
    text = resources.files("astra_hetero.spec").joinpath("catalog", "gpus.yaml").read_text()
    sourced = (
        "compute_efficiency",
        "memory_efficiency",
        "num_sms",
        "boost_clock_mhz",
        "sustained_fraction",
        "tdp_w",
        "kernel_overhead_us",
        "attention_fwd_efficiency",
        "attention_bwd_efficiency",
    )
    lines = [line for line in text.splitlines() if re.match(rf"\s+({'|'.join(sourced)}):", line)]
    assert len(lines) == len(sourced) * len(gpu_catalog())
    assert all("#" in line for line in lines)
    for gpu in gpu_catalog().values():
        assert 0 < gpu.attention_bwd_efficiency <= gpu.attention_fwd_efficiency <= 1
        assert 0 < gpu.compute_efficiency <= 1 and 0 < gpu.memory_efficiency <= 1


@pytest.mark.parametrize(
    "field, value",
    [
        ("num_sms", 0),
        ("num_sms", 10**9),
        ("boost_clock_mhz", float("inf")),
        ("sustained_fraction", 1.5),
        ("kernel_overhead_us", -1.0),
        ("kernel_overhead_us", float("inf")),
        ("attention_fwd_efficiency", float("nan")),
        ("attention_bwd_efficiency", 0.0),
    ],
)
def test_out_of_range_compute_figures_name_the_field(field, value):
    data = make_spec_data()
    data["cluster"]["node_groups"][0]["gpu"] = {"preset": "h100-sxm", field: value}
    with pytest.raises(SpecError) as error:
        parse_spec(data)
    assert error.value.field == f"cluster.node_groups[0].gpu.{field}"
