"""Specs: presets resolve with overrides; every bad spec gives one clear error naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from astra_hetero.errors import InfeasiblePlan, SpecError
from astra_hetero.jobs.load import load_run_spec
from astra_hetero.jobs.specs import place_jobs
from astra_hetero.spec import load_spec, parse_spec
from astra_hetero.spec.catalog import gpu_catalog, model_catalog
from astra_hetero.spec.schema.jobs import SharedClusterSpec
from astra_hetero.workload.generate import plan_workload
from tests.conftest import example_specs, make_spec_data, node_group

REQUIRED_GPUS = {"v100", "a100-40", "a100-80", "h100-sxm", "h200", "l40s", "mi300x"}
REQUIRED_MODELS = {"gpt3-175b", "gpt3-13b", "llama-65b", "llama2-7b", "llama2-13b", "llama2-70b"}


def test_catalog_has_the_required_presets_with_sane_numbers():
    gpus = gpu_catalog()
    assert REQUIRED_GPUS <= set(gpus)
    for gpu in gpus.values():
        assert gpu.bf16_tflops > 50 and gpu.hbm_tbps > 0.5 and gpu.memory_gib >= 32
        assert 0 < gpu.compute_efficiency <= 1 and 0 < gpu.memory_efficiency <= 1
    assert gpus["h100-sxm"].bf16_tflops > gpus["a100-80"].bf16_tflops > gpus["v100"].bf16_tflops
    assert REQUIRED_MODELS <= set(model_catalog())


def test_preset_fields_can_be_overridden():
    data = make_spec_data(model={"preset": "llama2-7b", "seq_len": 2048})
    data["cluster"]["node_groups"][0]["gpu"] = {"preset": "h100-sxm", "compute_efficiency": 0.5}
    spec = parse_spec(data)
    assert spec.model.seq_len == 2048 and spec.model.num_layers == 32
    gpu = spec.cluster.node_groups[0].gpu
    assert gpu.compute_efficiency == 0.5 and gpu.bf16_tflops == gpu_catalog()["h100-sxm"].bf16_tflops


def test_compute_multiplier_scales_a_reference_gpu():
    data = make_spec_data()
    data["cluster"]["node_groups"][1]["gpu"] = {
        "preset": "h100-sxm",
        "name": "half-h100",
        "compute_multiplier": 0.5,
    }
    spec = parse_spec(data)
    full, half = (g.gpu for g in spec.cluster.node_groups)
    assert half.effective_flops_per_ns == pytest.approx(full.effective_flops_per_ns / 2)


def with_parallelism(**changes):
    data = make_spec_data()
    data["parallelism"] = {**data["parallelism"], **changes}
    return data


def with_group(index, **changes):
    data = make_spec_data()
    data["cluster"]["node_groups"][index] = {**data["cluster"]["node_groups"][index], **changes}
    return data


BAD_SPECS = {
    "wrong product": (with_parallelism(dp=2), "parallelism", "16 GPUs"),
    "missing field": (
        {k: v for k, v in make_spec_data().items() if k != "parallelism"},
        "parallelism",
        "required",
    ),
    "unknown model preset": (make_spec_data(model="gpt-5"), "model", "unknown model preset"),
    "unknown gpu preset": (with_group(0, gpu="tpu-v9"), "cluster.node_groups[0].gpu", "unknown gpu preset"),
    "unknown fabric": (
        with_group(1, intra_node_fabric="warp-drive"),
        "cluster.node_groups[1].intra_node_fabric",
        "unknown intra_node_fabric preset",
    ),
    "negative count": (with_group(0, count=-2), "cluster.node_groups[0].count", "greater than or equal to 1"),
    "zero gpus": (
        with_group(0, gpus_per_node=0),
        "cluster.node_groups[0].gpus_per_node",
        "greater than or equal to 1",
    ),
    "unknown key": (with_parallelism(pipeline_parallel=4), "parallelism.pipeline_parallel", "unknown field"),
    # shown as written (`parallelism.tp:: unknown field` before)
    "key with a colon": (with_parallelism(**{"tp:": 2}), "parallelism['tp:']", "unknown field"),
    "top-level key with a colon": ({**make_spec_data(), "nam:": 1}, "'nam:'", "unknown field"),
    "tp does not divide heads": (
        make_spec_data(
            model={**make_spec_data()["model"], "num_heads": 15, "hidden_size": 1020, "num_kv_heads": 15}
        ),
        "parallelism.tp",
        "does not divide",
    ),
    "tp spans nodes": (
        with_parallelism(tp=8, pp=1, dp=2),
        "cluster.node_groups[0].gpus_per_node",
        "inside one node",
    ),
    "layers do not add up": (make_spec_data(partition={"layers": [4, 5]}), "partition.layers", "sums to 9"),
    "micro-batches do not add up": (
        make_spec_data(partition={"micro_batches": [4, 4, 4, 5]}),
        "partition.micro_batches",
        "sums to 17",
    ),
    "unknown mapping group": (
        make_spec_data(mapping={"stages": ["h100", "b200"]}),
        "mapping.stages[1]",
        "unknown node group",
    ),
    "batch not a multiple": (
        with_parallelism(global_batch_size=17, micro_batch_size=2),
        "parallelism.global_batch_size",
        "not a multiple",
    ),
    # pydantic's "Input should be a valid dictionary or instance of NodeGroupSpec" before
    "section not a mapping": (
        make_spec_data(cluster={"node_groups": [7]}),
        "cluster.node_groups[0]",
        "expected a mapping of keys (key: value), got a number",
    ),
    "model given as a list": (make_spec_data(model=[1]), "model", "got a list"),
    "negative latency": (
        make_spec_data(network={"link_latency_ns": -1}),
        "network.link_latency_ns",
        "greater than or equal to 0",
    ),
}


@pytest.mark.parametrize("name", sorted(BAD_SPECS))
def test_bad_spec_names_the_field_and_reason(name):
    data, field, reason = BAD_SPECS[name]
    with pytest.raises(SpecError) as caught:
        plan_workload(parse_spec(data))
    assert caught.value.field == field
    assert reason in str(caught.value)


def test_mapping_that_leaves_gpus_unused_is_rejected():
    data = make_spec_data(mapping={"stages": ["h100", "h100"]})
    with pytest.raises(SpecError, match="too few|not mapped|which has"):
        plan_workload(parse_spec(data))


def test_tp_group_across_gpu_types_is_rejected():
    data = make_spec_data()
    data["cluster"]["node_groups"] = [
        node_group("h", "h100-sxm", count=1, gpus_per_node=2),
        node_group("a", "a100-80", count=1, gpus_per_node=2),
    ]
    data["parallelism"] = {"tp": 4, "pp": 1, "dp": 1, "global_batch_size": 4, "allow_tp_across_nodes": True}
    with pytest.raises(SpecError, match="spans GPU types"):
        plan_workload(parse_spec(data))


def test_memory_overflow_names_stage_and_device():
    data = make_spec_data(model={"preset": "gpt3-175b"})
    data["parallelism"] = {**data["parallelism"], "pp": 2}
    with pytest.raises(InfeasiblePlan) as caught:
        plan_workload(parse_spec(data))
    message = str(caught.value)
    assert "stage 0" in message and "GiB" in message and "H100" in message


def test_include_pulls_sections_from_another_file(tmp_path: Path):
    data = make_spec_data()
    (tmp_path / "cluster.yaml").write_text(
        yaml.safe_dump({"cluster": data.pop("cluster"), "network": data.pop("network")})
    )
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump({"include": "cluster.yaml", **data}))
    spec = load_spec(tmp_path / "spec.yaml")
    assert spec.cluster.num_gpus == 16


def test_missing_spec_file_and_bad_yaml(tmp_path: Path):
    with pytest.raises(SpecError, match="not found"):
        load_spec(tmp_path / "nope.yaml")
    (tmp_path / "bad.yaml").write_text("model: [unclosed\n")
    with pytest.raises(SpecError, match="not valid YAML"):
        load_spec(tmp_path / "bad.yaml")
    for text, kind in (("", "null"), ("- model: x\n", "list"), ("3\n", "int")):
        (tmp_path / "odd.yaml").write_text(text)
        with pytest.raises(SpecError, match=f"odd.yaml: the spec must be a mapping of sections, got {kind}"):
            load_spec(tmp_path / "odd.yaml")


@pytest.mark.parametrize("path", example_specs())
def test_shipped_examples_are_valid_and_feasible(path):
    spec = load_run_spec(path)
    jobs = [job.spec for job in place_jobs(spec)] if isinstance(spec, SharedClusterSpec) else [spec]
    for one in jobs:  # a spec of several jobs: each job on its own GPUs
        plan = plan_workload(one)
        assert sum(plan.partition.layers_per_stage) == plan.spec.model.num_layers


def test_an_unnamed_groups_default_name_cannot_collide_with_a_given_one():
    data = make_spec_data()
    data["cluster"]["node_groups"][0].pop("name")
    data["cluster"]["node_groups"][1]["name"] = "group0"
    with pytest.raises(SpecError, match="group0") as caught:
        parse_spec(data)
    assert caught.value.field == "cluster" and "unnamed" in str(caught.value)


def test_too_few_gpus_for_the_mapped_cells_gives_the_counts():
    data = make_spec_data(mapping={"replicas": ["h100", "h100", "h100", "a100"]})
    with pytest.raises(SpecError) as caught:
        plan_workload(parse_spec(data))
    message = str(caught.value)
    assert "has 8 GPUs" in message and "6 cells" in message and "12 in all" in message
