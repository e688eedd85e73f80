"""The operator model: fused attention's FLOPs and bytes in closed form, the unfused formulation, and
the work Megatron does outside the layers (embedding, LM head, loss, optimizer)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from astra_hetero.spec import parse_spec
from astra_hetero.spec.schema import GpuSpec
from astra_hetero.workload.attention import attention_backward, attention_forward, fused_attention
from astra_hetero.workload.blocks import optimizer_cost
from astra_hetero.workload.costs import (
    Collective,
    Op,
    embedding_backward,
    head_backward,
    head_forward,
    layer_backward,
    layer_forward,
    operator_names,
)
from astra_hetero.workload.gemm import gemm_time_ns
from astra_hetero.workload.kernels import gemm_kind, kernel_kind
from astra_hetero.workload.memory import activation_bytes_per_layer
from astra_hetero.workload.ops import Gemm, Shape
from astra_hetero.workload.timing import (
    DROPOUT_BANDWIDTH_FRACTION,
    DeviceCostModel,
    OperatorModel,
    attention_efficiency,
)
from tests.conftest import make_spec_data

X = Shape(b=2, s=2048, h=4096, a=32, kv=8, f=11008, v=32000, t=4, sp=True, swiglu=True)


def ops(steps) -> list[Op]:
    return [s for s in steps if isinstance(s, Op)]


def test_fused_attention_flops_count_the_causal_pairs():
    heads, d = X.a // X.t, X.d
    pairs = X.s * (X.s + 1) // 2
    forward = fused_attention(X, "fwd")
    assert forward.flops == 4 * X.b * heads * d * pairs  # Q·Kᵀ and P·V over the causal pairs
    assert fused_attention(X, "bwd").flops == pytest.approx(
        2.5 * forward.flops
    )  # five products: S again, dP, dV, dQ, dK


def test_fused_attention_bytes_are_its_inputs_and_outputs_only():
    heads, kv, d = X.a // X.t, X.kv // X.t, X.d
    row = X.b * X.s * d * 2
    lse = X.b * heads * X.s * 4
    assert fused_attention(X, "fwd").bytes == row * (2 * heads + 2 * kv) + lse  # read Q, K, V; write O, LSE
    backward = row * (4 * heads + 4 * kv) + 3 * lse + 2 * X.b * X.s * d * heads * 4
    assert fused_attention(X, "bwd").bytes == backward
    # No score matrix: doubling the sequence doubles the bytes (the unfused bytes grow fourfold).
    longer = replace(X, s=2 * X.s)
    assert fused_attention(longer, "fwd").bytes == pytest.approx(2 * fused_attention(X, "fwd").bytes)


def test_unfused_attention_materialises_every_score():
    x = replace(X, fused_attention=False)
    forward = ops(attention_forward(x))
    assert [op.name for op in forward] == [
        "attn_score",
        "softmax",
        "attn_dropout",
        "attn_context",
        "attn_context_copy",
    ]
    scores = x.b * (x.a // x.t) * x.s * x.s
    assert sum(op.flops for op in forward if op.kind == "gemm") == 4 * scores * x.d  # full s², mask included
    assert {op.name: op.bytes for op in forward if op.kind == "memory"} == {
        "softmax": 4 * scores,  # read scores, write probabilities (BF16)
        "attn_dropout": 5 * scores,  # read, write, 1-byte mask
        "attn_context_copy": 4 * x.tokens * x.h // x.t,  # head-major back to token-major: read, write
    }
    fused = fused_attention(X, "fwd").flops
    assert fused == pytest.approx(0.5 * sum(op.flops for op in forward if op.kind == "gemm"), rel=1e-3)


def test_selective_recompute_adds_one_forward_of_the_core_attention():
    for fused in (True, False):
        x = replace(X, fused_attention=fused)
        plain = sum(op.flops for op in attention_backward(x, False))
        again = sum(op.flops for op in attention_backward(x, True))
        assert again - plain == pytest.approx(sum(op.flops for op in attention_forward(x)))


def test_fused_attention_efficiency_rises_with_sequence_and_matches_its_source():
    gpu = GpuSpec.model_validate({"preset": "h100-sxm"})
    curve = [attention_efficiency(gpu, "fwd", s) for s in (512, 1024, 2048, 4096, 8192, 16384)]
    assert curve == sorted(curve) and curve[-1] == pytest.approx(gpu.attention_fwd_efficiency)
    # The published curve it is fitted to: 315 … 539 TFLOP/s (FlashAttention-3 paper, cuDNN causal).
    measured = [315, 410, 484, 518, 529, 539]
    for model, tflops in zip(curve, measured, strict=True):
        assert model * gpu.bf16_tflops == pytest.approx(tflops, rel=0.05)
    assert attention_efficiency(gpu, "bwd", 2048) < attention_efficiency(gpu, "fwd", 2048)
    assert attention_efficiency(gpu, "fwd", 10**9) <= 1.0


def test_fused_attention_stores_no_scores():
    def activations(attention, recompute="none", seq_len=2048):
        data = make_spec_data(compute={"attention": attention})
        data["model"] = {**data["model"], "seq_len": seq_len}
        data["parallelism"] = {**data["parallelism"], "recompute": recompute}
        return activation_bytes_per_layer(parse_spec(data))

    assert activations("fused") < activations("unfused")
    assert activations("unfused", "selective") == pytest.approx(activations("fused"), rel=0.01)
    # Per token, unfused memory grows with the sequence (s² scores); fused memory does not.
    assert activations("fused", seq_len=4096) == pytest.approx(2 * activations("fused"), rel=1e-9)
    assert activations("unfused", seq_len=4096) > 2.2 * activations("unfused")


def test_layer_collectives_mirror_between_forward_and_backward():
    def kinds(steps):
        return [s.kind for s in steps if isinstance(s, Collective)]

    assert kinds(layer_forward(X)) == ["all_gather", "reduce_scatter"] * 2
    # Backward of each block: all-gather of the output gradient (the forward's reduce-scatter), the
    # re-gather of the column-parallel layer's sharded input for its weight gradient, reduce-scatter.
    assert kinds(layer_backward(X, "none")) == ["all_gather", "all_gather", "reduce_scatter"] * 2
    assert [s.kind for s in head_backward(X) if isinstance(s, Collective)][0] == "all_gather"
    no_sp = replace(X, sp=False)
    assert kinds(layer_forward(no_sp)) == ["all_reduce"] * 2
    assert kinds(layer_backward(no_sp, "none")) == ["all_reduce"] * 2
    assert kinds(layer_forward(replace(X, t=1))) == []


def test_head_runs_the_lm_head_gemm_and_a_vocab_parallel_loss():
    forward = head_forward(X)
    lm_head = next(s for s in forward if isinstance(s, Op) and s.name == "lm_head")
    assert (lm_head.gemms[0].m, lm_head.gemms[0].n, lm_head.gemms[0].k) == (X.tokens, X.v // X.t, X.h)
    logits = X.tokens * X.v // X.t
    loss = sum(s.bytes for s in forward if isinstance(s, Op) and s.name.startswith("cross_entropy"))
    assert loss == 38 * logits  # FP32 cast, max, shift, exp, sum, normalise
    per_token = [s for s in forward if isinstance(s, Collective) and s.bytes == 4 * X.tokens]
    assert len(per_token) == 3  # max logit, target logit, sum of exponentials across TP
    backward = ops(head_backward(X))
    assert [op.name for op in backward] == ["cross_entropy", "lm_head", "final_norm"]
    assert backward[1].flops == 2 * lm_head.flops


def test_embedding_gradient_touches_the_whole_vocabulary_shard():
    grad = next(s for s in embedding_backward(X) if isinstance(s, Op) and s.name == "embedding_grad")
    assert grad.bytes == 12 * (X.v / X.t) * X.h + 10 * X.tokens * X.h


def test_optimizer_step_is_memory_bound_over_the_updated_shard_and_zeroes_all_gradients():
    cost = DeviceCostModel(GpuSpec.model_validate({"preset": "a100-80"}))
    optimizer = optimizer_cost(cost, X)
    bandwidth = cost.model.rates.bytes_per_ns
    params = 1e9
    whole, sharded = optimizer.segment(params, 1), optimizer.segment(params, 8)
    assert whole.bytes == pytest.approx(34 * params + 4 * params)  # Adam 30 B + grad norm 4 B; zeroing 4 B
    assert sharded.bytes == pytest.approx(34 * params / 8 + 4 * params)
    assert whole.time_ns == pytest.approx(optimizer.fixed_ns + whole.bytes / bandwidth)
    assert sharded.time_ns == pytest.approx(optimizer.fixed_ns + sharded.bytes / bandwidth)


def test_operator_names_cover_every_formulation():
    names = operator_names()
    assert {"attention", "attn_score", "softmax", "qkv_proj", "mlp_gate_up", "mlp_up"} <= names["fwd"]
    assert {"recompute_attention", "recompute_attn_score", "embedding_grad", "lm_head"} <= names["bwd"]
    assert names["step"] == {"optimizer_step", "grad_norm", "zero_grad", "fp8_weight_cast"}


def test_operator_model_times_memory_kernels_at_achievable_bandwidth_plus_fixed_costs():
    # an architecture the kernel catalog has not measured: the GPU's memory_efficiency and kernel cost
    gpu = GpuSpec.model_validate({"preset": "mi300x"})
    assert kernel_kind(gpu.architecture, "norm_attn") is None
    model = OperatorModel(gpu)
    norm = ops(layer_forward(X))[0]
    expected = norm.kernels * model.rates.kernel_ns + norm.bytes / (
        gpu.hbm_tbps * 1e3 * gpu.memory_efficiency
    )
    assert model.time_ns(norm) == pytest.approx(expected)


def test_blackwell_kernels_take_hoppers_measured_fractions_as_a_stated_estimate():
    # no public per-kernel Blackwell data: the kernel catalog carries Hopper's figures over
    for name in ("norm_attn", "swiglu", "rope", "residual_attn", "embedding"):
        assert kernel_kind("blackwell", name) == kernel_kind("hopper", name)


@pytest.mark.parametrize("preset", ["a100-80", "h100-sxm"])
def test_a_measured_kernel_kind_takes_its_own_bandwidth_and_fixed_cost(preset):
    gpu = GpuSpec.model_validate({"preset": preset})
    model = OperatorModel(gpu)
    norm = ops(layer_forward(X))[0]
    measured = kernel_kind(gpu.architecture, norm.name)
    assert measured is not None and measured.bandwidth_fraction_at(norm.bytes) < 1
    rate = gpu.effective_bytes_per_ns * measured.bandwidth_fraction_at(norm.bytes)
    assert model.time_ns(norm) == pytest.approx(norm.kernels * measured.fixed_us * 1e3 + norm.bytes / rate)
    # the measured kinds are slower than streaming at the datasheet-derived rate
    assert model.time_ns(norm) > norm.bytes / gpu.effective_bytes_per_ns


def test_a_memory_bound_gemm_streams_at_the_measured_gemm_rate_plus_its_fixed_cost():
    gpu = GpuSpec.model_validate({"preset": "a100-80"})
    rates = OperatorModel(gpu).rates_for("bf16")
    measured = gemm_kind(gpu.architecture)
    assert rates.kernel_ns == measured.fixed_us * 1e3
    assert rates.bytes_per_ns == pytest.approx(gpu.effective_bytes_per_ns * measured.bandwidth_fraction)
    shallow = Gemm(4096, 4096, 64)  # K = 64: writing the 4096 x 4096 output dominates
    assert gemm_time_ns(shallow, rates) == pytest.approx(rates.kernel_ns + shallow.bytes / rates.bytes_per_ns)


GPT = Shape(b=4, s=2048, h=6144, a=64, kv=64, f=24576, v=51200, t=8, sp=False, swiglu=False)
LOCAL_ONLY = {
    "fwd": {"qkv_bias", "attn_context_copy"},
    "bwd": {
        "mlp_down_bias_grad",
        "mlp_up_bias_grad",
        "attn_out_bias_grad",
        "qkv_grad_concat",
        "qkv_bias_grad",
    },
}


def _names(x: Shape) -> dict[str, set[str]]:
    return {
        "fwd": {op.name for op in ops(layer_forward(x))},
        "bwd": {op.name for op in ops(layer_backward(x, "none"))},
    }


def test_megatrons_own_layer_runs_its_separate_bias_copy_and_bias_gradient_kernels():
    local = replace(GPT, fused_attention=False)
    qkv, tokens = local.tokens * local.qkv_width // local.t, local.tokens
    for phase, names in LOCAL_ONLY.items():
        assert names <= _names(local)[phase]
        assert not names & _names(GPT)[phase]  # Transformer Engine fuses them into its GEMMs and norms
    forward = {op.name: op for op in ops(layer_forward(local))}
    backward = {op.name: op for op in ops(layer_backward(local, "none"))}
    assert forward["qkv_bias"].bytes == 4 * qkv  # matmul, then `output + bias`: read and write BF16
    assert backward["qkv_bias_grad"].bytes == 2 * qkv  # sum over tokens reads the gradient once
    assert backward["qkv_grad_concat"].bytes == 4 * qkv
    assert backward["mlp_up_bias_grad"].bytes == 2 * tokens * local.f // local.t
    assert backward["attn_out_bias_grad"].bytes == 2 * tokens * local.h  # full h: the bias is replicated
    assert backward["norm_attn"].bytes == 16 * tokens * local.h  # apex reads dy and x in both kernels
    assert {op.name: op for op in ops(layer_backward(GPT, "none"))}["norm_attn"].bytes == 12 * tokens * GPT.h


def test_gated_layers_without_biases_have_no_bias_kernels():
    local_llama = replace(X, fused_attention=False)
    names = _names(local_llama)
    assert not {n for n in names["fwd"] | names["bwd"] if "bias" in n}
    assert "qkv_grad_concat" not in names["bwd"]


def test_sequence_parallel_shards_the_replicated_bias_gradients():
    local = replace(GPT, fused_attention=False)
    sharded = replace(local, sp=True)
    grad = {op.name: op.bytes for op in ops(layer_backward(local, "none"))}
    grad_sp = {op.name: op.bytes for op in ops(layer_backward(sharded, "none"))}
    assert grad_sp["attn_out_bias_grad"] == pytest.approx(grad["attn_out_bias_grad"] / GPT.t)
    assert grad_sp["qkv_bias_grad"] == grad["qkv_bias_grad"]  # the QKV output is split by heads anyway


def test_dropout_kernels_run_at_pytorchs_measured_philox_rate():
    model = OperatorModel(GpuSpec.model_validate({"preset": "a100-80"}))
    forward = {op.name: op for op in ops(layer_forward(replace(GPT, fused_attention=False)))}
    backward = {op.name: op for op in ops(layer_backward(replace(GPT, fused_attention=False), "none"))}
    random = {name for name, op in forward.items() if op.random}
    assert random == {"attn_dropout", "residual_attn", "residual_mlp"}  # mask drawn in the forward only
    assert not any(op.random for op in backward.values())  # the backward reuses the stored mask
    bandwidth = 2.039e3 * 0.88
    for name in ("attn_dropout", "residual_mlp"):
        op = forward[name]
        measured = kernel_kind("ampere", name)  # residual adds: the catalog's fixed cost, streaming rate
        kernel_ns = measured.fixed_us * 1e3 if measured else model.rates.kernel_ns
        fraction = measured.bandwidth_fraction_at(op.bytes) if measured else 1.0
        expected = op.kernels * kernel_ns + op.bytes / (bandwidth * fraction * DROPOUT_BANDWIDTH_FRACTION)
        assert model.time_ns(op) == pytest.approx(expected)
    assert DROPOUT_BANDWIDTH_FRACTION == pytest.approx(952.7 / 1326.9)
