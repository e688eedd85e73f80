"""Tokens/s, model TFLOP/s per GPU and MFU: Megatron-LM's model-FLOPs count, the sum of the cluster's
peaks, and an honest warning where a run directory cannot state them."""

from __future__ import annotations

import json

import pytest

from astra_hetero import rundir
from astra_hetero.errors import RunDirError
from astra_hetero.pipeline import build_run_dir, execute, run_spec
from astra_hetero.results.throughput import NO_THROUGHPUT, throughput_line, with_throughput
from astra_hetero.spec import parse_spec
from astra_hetero.spec.schema import ModelSpec, ParallelismSpec
from astra_hetero.workload.costs import operators, shape_of
from astra_hetero.workload.model_flops import model_flops_per_token, throughput_record
from tests.results.builders import pipeline_result
from tests.test_pipeline import small_spec


def test_gpt3_175b_model_flops_match_the_published_count():
    # NVIDIA/dgxc-benchmarking nemo_megatron/README_175b.md: "The model flops for GPT 3 175b for
    # GBS=1 is 2.20E+15" (2048 tokens; 24lh² + 12lhs attention, 48lh² MLP, 6Vh logits per token)
    model = ModelSpec.model_validate({"preset": "gpt3-175b", "vocab_size": 51200})  # padded, as NeMo runs it
    per_sequence = model_flops_per_token(model) * model.seq_len
    published = 2048 * (24 * 96 * 12288**2 + 12 * 96 * 12288 * 2048 + 48 * 96 * 12288**2 + 6 * 51200 * 12288)
    assert per_sequence == pytest.approx(published, rel=1e-12)
    assert per_sequence == pytest.approx(2.20e15, rel=0.01)


@pytest.mark.parametrize("preset", ["llama2-70b", "llama2-7b", "gpt3-175b"])
def test_model_flops_are_three_times_the_forward_gemms_of_the_cost_model(preset):
    """Megatron's closed form equals 3x the forward GEMM FLOPs of the operator model (unfused
    attention computes the full s x s scores, as the formula counts them), per token, on one GPU."""
    model = ModelSpec.model_validate({"preset": preset})
    one_gpu = ParallelismSpec.model_validate({"micro_batch_size": 1, "global_batch_size": 1})
    forward = operators(shape_of(model, one_gpu, "unfused"))["fwd"]
    gemm_flops = sum(op.flops for op in forward.values() if op.kind == "gemm")
    head = forward["lm_head"].flops
    per_token = 3 * ((gemm_flops - head) * model.num_layers + head) / model.seq_len
    assert model_flops_per_token(model) == pytest.approx(per_token, rel=1e-9)


def test_mfu_of_a_mixed_cluster_is_measured_against_the_sum_of_its_peaks():
    spec = parse_spec(small_spec_mixed())
    record = throughput_record(spec)
    result = with_throughput(
        pipeline_result(["h100-sxm", "a100-80"], [1e6, 1e6], exposed_comm_us=0), {"throughput": record}
    )
    t = result.throughput
    seconds = result.iteration_time_us / 1e6
    peaks = 8 * 989.4 + 8 * 312.0
    assert t["num_gpus"] == 16 and t["peak_tflops"] == pytest.approx(peaks)
    assert t["mfu"] == pytest.approx(record["model_flops_per_iteration"] / seconds / (peaks * 1e12))
    assert t["model_tflops_per_gpu"] == pytest.approx(
        record["model_flops_per_iteration"] / seconds / 16 / 1e12
    )
    assert t["tokens_per_s"] == pytest.approx(
        spec.parallelism.global_batch_size * spec.model.seq_len / seconds
    )
    assert "MFU" in throughput_line(result)


def small_spec_mixed() -> dict:
    from tests.conftest import node_group

    data = small_spec()
    data["cluster"] = {
        "node_groups": [
            node_group("h100", "h100-sxm", count=2),
            node_group("a100", "a100-80", count=2, fabric="nvlink3", nic=200),
        ]
    }
    data["parallelism"] = {"tp": 2, "pp": 2, "dp": 4, "micro_batch_size": 1, "global_batch_size": 16}
    return data


def test_every_result_states_its_throughput(tmp_path):
    spec = parse_spec(small_spec())
    result = run_spec(spec, tmp_path / "run", timeline="none")
    saved = json.loads((tmp_path / "run" / rundir.RESULT).read_text())["throughput"]
    tokens = spec.parallelism.global_batch_size * spec.model.seq_len
    assert saved["tokens_per_s"] == pytest.approx(tokens / (result.iteration_time_us / 1e6))
    assert 0 < saved["mfu"] < 1
    assert not [w for w in result.warnings if w.startswith(NO_THROUGHPUT)]


def test_a_manifest_without_model_flops_gives_a_warning_not_a_number(tmp_path):
    run = build_run_dir(parse_spec(small_spec()), tmp_path / "run").root
    manifest = json.loads((run / rundir.MANIFEST).read_text())
    del manifest["throughput"]
    (run / rundir.MANIFEST).write_text(json.dumps(manifest))
    result = execute(run, timeline="none")
    assert result.throughput is None
    assert any(w.startswith(NO_THROUGHPUT) and "manifest.json" in w for w in result.warnings)


def test_a_cut_down_iteration_states_no_throughput():
    data = small_spec()
    data["scope"] = {"layers_per_stage": 1}
    record = throughput_record(parse_spec(data))
    result = with_throughput(pipeline_result(["h100-sxm"], [1e3]), {"throughput": record})
    assert result.throughput is None
    assert any("cut-down" in w for w in result.warnings)


@pytest.mark.parametrize(
    "bad",
    [
        "x",
        {
            "model_flops_per_iteration": -1,
            "tokens_per_iteration": 1,
            "gpus": {"a": {"count": 1, "peak_tflops": 1}},
        },
        {"model_flops_per_iteration": 1, "tokens_per_iteration": 1, "gpus": {}},
        # copied into result.json as it was (a NaN formula) before
        {
            "model_flops_per_iteration": 1,
            "tokens_per_iteration": 1,
            "gpus": {"a": {"count": 1, "peak_tflops": 1}},
            "formula": float("nan"),
        },
    ],
)
def test_a_malformed_record_is_an_error_naming_the_field(bad):
    with pytest.raises(RunDirError, match="throughput"):
        with_throughput(pipeline_result(["h100-sxm"], [1e3]), {"throughput": bad})


def test_moe_model_flops_count_the_experts_a_token_is_routed_to():
    """Megatron-LM counts the MLP a token runs through: (top_k + shared) expert MLPs, not all of them."""
    dense = ModelSpec.model_validate({"preset": "mixtral-8x7b", "moe": None})
    moe = ModelSpec.model_validate({"preset": "mixtral-8x7b"})
    routed = moe.moe.top_k * moe.moe.expert_ffn_size
    as_dense = ModelSpec.model_validate({"preset": "mixtral-8x7b", "moe": None, "ffn_size": routed})
    assert model_flops_per_token(moe) == pytest.approx(model_flops_per_token(as_dense), rel=1e-12)
    assert model_flops_per_token(moe) != model_flops_per_token(dense)


def test_mfu_is_measured_against_the_peak_of_the_compute_precision():
    spec = parse_spec(small_spec())
    fp8 = parse_spec({**small_spec(), "precision": {"compute": "fp8"}})
    h100 = next(iter(throughput_record(spec)["gpus"].values()))
    h100_fp8 = next(iter(throughput_record(fp8)["gpus"].values()))
    assert throughput_record(fp8)["compute_precision"] == "fp8"
    assert h100_fp8["peak_tflops"] == pytest.approx(2 * h100["peak_tflops"], rel=0.01)
