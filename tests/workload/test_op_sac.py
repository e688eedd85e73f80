"""torchtitan's per-op selective activation checkpointing (`recompute: selective_op`): which forward
work the backward redoes, and what a layer keeps, in closed form."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from astra_hetero.spec import parse_spec
from astra_hetero.workload.costs import Collective, Op, layer_backward, layer_forward, op_sac_recompute
from astra_hetero.workload.memory import activation_bytes_per_layer, estimate
from astra_hetero.workload.ops import Shape
from astra_hetero.workload.precision import Dtypes
from tests.conftest import node_group

X = Shape(b=2, s=2048, h=4096, a=32, kv=8, f=14336, v=128256, t=4, sp=True, swiglu=True, rope=True)
FP8 = Dtypes(compute="fp8", fp8_recipe="current")


def gemm_flops(steps) -> float:
    return sum(s.flops for s in steps if isinstance(s, Op) and s.kind == "gemm")


def test_bf16_recomputes_every_second_matmul_wk_wo_and_w3():
    """wq, wk, wv, wo, w1, w3, w2 run in that order; the save list keeps every aten.mm output but
    every second one: wk, wo and w3 are recomputed, 2·tokens·(h·kv·d + q·h + h·f)/tp FLOPs."""
    recomputed = op_sac_recompute(X)
    kv_width = X.kv * X.d
    expected = 2 * X.tokens * (X.h * kv_width + X.q_width * X.h + X.h * X.f) / X.t
    assert gemm_flops(recomputed) == pytest.approx(expected)
    assert all(s.name.startswith("recompute_") for s in recomputed if isinstance(s, Op))


def test_fp8_recomputes_every_linear_as_scaled_mm_is_not_saved():
    x = replace(X, dtypes=FP8)
    assert gemm_flops(op_sac_recompute(x)) == pytest.approx(gemm_flops(layer_forward(x)))


@pytest.mark.parametrize("dtypes", [Dtypes(), FP8])
def test_the_attention_core_and_the_reduce_scatters_are_saved_not_recomputed(dtypes):
    x = replace(X, dtypes=dtypes)
    recomputed = op_sac_recompute(x)
    assert not any(isinstance(s, Op) and s.kind == "attention" for s in recomputed)
    kinds = [s.kind for s in recomputed if isinstance(s, Collective)]
    assert "reduce_scatter" not in kinds
    assert kinds.count("all_gather") == 2  # the SP all-gathers before the QKV and MLP linears run again
    # every norm, RoPE, the activation and the residual adds run again
    names = {s.name for s in recomputed if isinstance(s, Op)}
    assert {"recompute_norm_attn", "recompute_norm_mlp", "recompute_rope", "recompute_swiglu"} <= names


def test_the_backward_is_the_plain_backward_after_the_recomputation():
    plain, op_sac = layer_backward(X, "none"), layer_backward(X, "selective_op")
    assert op_sac == op_sac_recompute(X) + plain
    # between Megatron's selective recompute (the attention core only) and the whole forward again
    assert (
        gemm_flops(layer_backward(X, "selective"))
        < gemm_flops(op_sac)
        < gemm_flops(plain) + gemm_flops(layer_forward(X))
    )


def spec(compute: str, tp: int = 1, **parallelism: Any):
    return parse_spec(
        {
            "model": {
                "num_layers": 4,
                "hidden_size": 4096,
                "num_heads": 32,
                "num_kv_heads": 8,
                "ffn_size": 14336,
                "activation": "swiglu",
                "vocab_size": 128256,
                "seq_len": 8192,
                "norm": "rmsnorm",
                "rope": True,
            },
            "cluster": {"node_groups": [node_group("h100", "h100-sxm", count=2, gpus_per_node=8)]},
            "parallelism": {
                "tp": tp,
                "pp": 1,
                "dp": 16 // tp,
                "micro_batch_size": 2,
                "global_batch_size": 32 // tp,
                "sequence_parallel": tp > 1,
                "recompute": "selective_op",
                "fsdp": True,
                **parallelism,
            },
            "precision": {"compute": compute},
        }
    )


def test_a_layer_keeps_its_input_the_attention_output_and_the_saved_products():
    """Per token, BF16, no TP: the block's input (h), SDPA's output (q) and FP32 log-sum-exp per
    head, and the outputs of wq (q), wv (kv·d), w1 (f) and w2 (h), 2 B each."""
    h, q, kv, f, a = 4096, 4096, 8 * 128, 14336, 32
    per_token = 2 * (h + q + q + kv + f + h) + 4 * a
    assert activation_bytes_per_layer(spec("bf16")) == pytest.approx(per_token * 8192 * 2)


def test_under_tp_the_column_outputs_shard_and_the_reduce_scatter_outputs_are_kept():
    h, q, kv, f, a, t = 4096, 4096, 8 * 128, 14336, 32, 4
    per_token = 2 * h / t + (2 * q + 4 * a) / t + 2 * 2 * h / t + 2 * (q + kv + f) / t + 2 * h
    assert activation_bytes_per_layer(spec("bf16", tp=t)) == pytest.approx(per_token * 8192 * 2)


def test_fp8_keeps_no_matmul_output_and_a_recomputed_layer_lives_during_its_backward():
    bf16, fp8 = spec("bf16"), spec("fp8")
    h, f, q, kv = 4096, 14336, 4096, 1024
    assert activation_bytes_per_layer(bf16) - activation_bytes_per_layer(fp8) == pytest.approx(
        2 * (q + kv + f + h) * 8192 * 2
    )
    none = parse_spec(
        {**bf16.model_dump(), "parallelism": {**bf16.parallelism.model_dump(), "recompute": "none"}}
    )
    kept = estimate(bf16, 0, 4, 1).activations - estimate(none, 0, 4, 1).activations
    per_layer_none = activation_bytes_per_layer(none)
    # four layers' kept tensors plus one layer's full activations, instead of four layers' full ones
    assert kept == pytest.approx(4 * activation_bytes_per_layer(bf16) + per_layer_none - 4 * per_layer_none)
