"""The spec's communication fields: GPU architecture, fabric kind, `collectives` model and tables."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from astra_hetero.errors import SpecError
from astra_hetero.spec import load_spec, parse_spec
from astra_hetero.spec.catalog import fabric_catalog, gpu_catalog
from tests.conftest import make_spec_data

SAMPLE = Path(__file__).parents[1] / "data" / "nccl_tests" / "all_reduce_perf_8xh100.txt"
CUSTOM_GPU = {
    "name": "my-gpu",
    "bf16_tflops": 400,
    "hbm_tbps": 2,
    "memory_gib": 64,
    "compute_efficiency": 0.7,
    "memory_efficiency": 0.8,
}


def test_every_gpu_preset_names_its_architecture_and_every_fabric_its_kind():
    expected = {
        "v100": "volta",
        "a100-80": "ampere",
        "h100-sxm": "hopper",
        "h200": "hopper",
        "l40s": "ada",
        "mi300x": "cdna3",
        "b200": "blackwell",
        "gb200": "blackwell",
        "mi325x": "cdna3",
        "mi355x": "cdna4",
    }
    assert {k: gpu_catalog()[k].architecture for k in expected} == expected
    assert {k: f.kind for k, f in fabric_catalog().items()} == {
        "nvlink2": "nvlink",
        "nvlink3": "nvlink",
        "nvlink4": "nvlink",
        "nvlink5": "nvlink",
        "xgmi": "xgmi",
        "xgmi-cdna4": "xgmi",
        "pcie4": "pcie",
        "pcie5": "pcie",
    }


def _with_gpu(gpu) -> dict:
    data = make_spec_data()
    data["cluster"]["node_groups"][1]["gpu"] = gpu
    return data


def test_a_custom_gpu_gives_its_architecture():
    spec = parse_spec(_with_gpu({**CUSTOM_GPU, "architecture": "blackwell"}))
    assert spec.cluster.node_groups[1].gpu.architecture == "blackwell"
    with pytest.raises(SpecError, match=r"cluster.node_groups\[1\].gpu.architecture: required"):
        parse_spec(_with_gpu(CUSTOM_GPU))
    with pytest.raises(SpecError, match="unknown architecture 'pascal'; known: volta"):
        parse_spec(_with_gpu({**CUSTOM_GPU, "architecture": "pascal"}))


def test_a_custom_fabric_gives_its_kind():
    data = make_spec_data()
    data["cluster"]["node_groups"][0]["intra_node_fabric"] = {"gbytes_per_s": 100, "latency_ns": 300}
    with pytest.raises(SpecError, match=r"intra_node_fabric.kind: required"):
        parse_spec(data)
    data["cluster"]["node_groups"][0]["intra_node_fabric"]["kind"] = "pcie"
    assert parse_spec(data).cluster.node_groups[0].intra_node_fabric.kind == "pcie"


def test_the_nccl_model_is_the_default_and_the_ideal_one_keeps_its_hierarchical_default():
    nccl = parse_spec(make_spec_data()).collectives
    assert (nccl.model, nccl.resolved_algorithm, nccl.protocol) == ("nccl", "auto", "auto")
    ideal = parse_spec(make_spec_data(collectives={"model": "ideal"})).collectives
    assert ideal.resolved_algorithm == "hierarchical"


@pytest.mark.parametrize(
    ("collectives", "reason"),
    [
        ({"algorithm": "hierarchical"}, "hierarchical is the ideal model's"),
        ({"model": "ideal", "algorithm": "nvls"}, "NCCL's; the ideal model runs ring or hierarchical"),
        ({"model": "ideal", "protocol": "ll"}, "need model: nccl"),
        ({"nccl_tests": {"intra": "x.txt"}}, "intra_node"),
    ],
)
def test_collectives_fields_must_fit_the_model(collectives, reason):
    with pytest.raises(SpecError, match=reason):
        parse_spec(make_spec_data(collectives=collectives))


def _spec_file(tmp_path: Path, nccl_tests) -> Path:
    (tmp_path / "measured").mkdir()
    shutil.copyfile(SAMPLE, tmp_path / "measured" / "ar.txt")
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(make_spec_data(collectives={"nccl_tests": nccl_tests})))
    return path


def test_tables_are_found_relative_to_the_spec_and_read_at_load_time(tmp_path):
    spec = load_spec(
        _spec_file(
            tmp_path,
            {
                "intra_node": "measured/ar.txt",
                "inter_node": [{"path": "measured/ar.txt", "node_group": "a100"}],
            },
        )
    )
    intra, inter = spec.collectives.nccl_tests["intra_node"][0], spec.collectives.nccl_tests["inter_node"][0]
    assert intra.path == str((tmp_path / "measured/ar.txt").resolve())
    assert intra.collective == inter.collective == "all_reduce"  # read from the output
    assert inter.node_group == "a100"


@pytest.mark.parametrize(
    ("entry", "field", "reason"),
    [
        ("measured/missing.txt", r"collectives.nccl_tests.intra_node\[0\].path", "file not found"),
        (
            {"path": "measured/ar.txt", "node_group": "b200"},
            r"intra_node\[0\].node_group",
            "unknown node group",
        ),
        ("spec.yaml", r"intra_node\[0\].path", "no nccl-tests header|cannot tell"),
    ],
)
def test_a_bad_table_fails_at_load_time_naming_its_field(tmp_path, entry, field, reason):
    with pytest.raises(SpecError, match=f"{field}.*({reason})"):
        load_spec(_spec_file(tmp_path, {"intra_node": entry}))
