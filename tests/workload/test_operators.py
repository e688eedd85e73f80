"""RoPE, squared ReLU and sliding-window attention: FLOPs and bytes against closed forms, and the
per-layer kinds of a local/global pattern in the generated traces."""

from __future__ import annotations

from dataclasses import replace

import pytest

from astra_hetero.errors import SpecError
from astra_hetero.spec import parse_spec
from astra_hetero.spec.schema import ModelSpec
from astra_hetero.workload.attention import causal_pairs
from astra_hetero.workload.costs import operators, parameter_counts
from astra_hetero.workload.generate import class_graph, plan_workload, timed_blocks
from astra_hetero.workload.ops import Shape
from tests.conftest import make_spec_data

X = Shape(b=2, s=4096, h=6144, a=48, kv=8, f=24576, v=256000, t=4, sp=True, swiglu=False)


def test_squared_relu_reads_and_writes_its_tensor_twice_forward_and_three_times_backward():
    x = replace(X, squared_relu=True)
    elements = x.tokens * x.f // x.t
    fwd, bwd = operators(x)["fwd"]["squared_relu"], operators(x)["bwd"]["squared_relu"]
    assert (fwd.bytes, fwd.flops, fwd.kernels) == (8 * elements, 2 * elements, 2)
    assert (bwd.bytes, bwd.flops, bwd.kernels) == (12 * elements, 3 * elements, 3)
    assert "gelu" not in operators(x)["fwd"] and "mlp_gate_up" not in operators(x)["fwd"]
    assert operators(x)["fwd"]["mlp_up"].flops == 2 * x.tokens * x.h * (x.f // x.t)


def test_squared_relu_layers_have_two_matrices_and_no_biases():
    nemotron = ModelSpec.model_validate({"preset": "nemotron-4-15b"})
    counts = parameter_counts(nemotron)
    h, f, kv_width = 6144, 24576, 8 * 128
    attention = h * (h + 2 * kv_width) + h * h
    assert counts.per_layer == attention + 2 * h * f + 2 * 2 * h  # two LayerNorms with bias
    assert not replace(X, squared_relu=True).biases


def test_rope_rotates_q_and_k_once_each_in_both_passes():
    x = replace(X, rope=True)
    q_and_k = x.tokens * (x.a + x.kv) // x.t * x.d
    for phase in ("fwd", "bwd"):
        op = operators(x)[phase]["rope"]
        assert (op.bytes, op.flops, op.kernels) == (4 * q_and_k, 3 * q_and_k, 2)
    assert "rope" not in operators(X)["fwd"]


@pytest.mark.parametrize(("s", "w"), [(8, 3), (4096, 4096), (8192, 4096), (2048, 256), (100, 1)])
def test_windowed_causal_pairs_count_every_query_min_of_its_position_and_the_window(s, w):
    assert causal_pairs(s, w) == sum(min(i + 1, w) for i in range(s))
    assert causal_pairs(s) == s * (s + 1) // 2


def test_local_attention_costs_the_attended_pairs_and_nothing_else_changes():
    local = replace(X, window=1024)
    ratio = causal_pairs(X.s, 1024) / causal_pairs(X.s)
    for phase in ("fwd", "bwd"):
        full_op, local_op = operators(X)[phase]["attention"], operators(local)[phase]["attention"]
        assert local_op.flops == pytest.approx(full_op.flops * ratio)
        assert local_op.bytes == full_op.bytes  # Q, K, V, O are read and written once either way
        assert local_op.seq_len == 1024  # the band's width sets the short-sequence efficiency
    assert operators(local)["fwd"]["qkv_proj"] == operators(X)["fwd"]["qkv_proj"]


def test_unfused_attention_masks_the_window_inside_full_scores():
    unfused = replace(X, fused_attention=False)
    assert operators(replace(unfused, window=256))["fwd"] == operators(unfused)["fwd"]


def test_window_schema_expresses_mistral_and_gpt_neo():
    mistral = ModelSpec.model_validate({"preset": "mistral-7b"})
    assert {mistral.window_of(i) for i in range(32)} == {4096}
    neo = ModelSpec.model_validate({"preset": "gpt-neo-2.7b"})
    assert [neo.window_of(i) for i in range(4)] == [0, 256, 0, 256]
    shorthand = ModelSpec.model_validate({"preset": "llama2-7b", "attention_window": 512})
    assert shorthand.layer_windows == (512,)


def test_rope_and_learned_positions_together_are_refused():
    data = make_spec_data()
    data["model"] = {**data["model"], "rope": True, "learned_position_embeddings": True}
    with pytest.raises(SpecError, match="rope"):
        parse_spec(data)


def _alternating_spec():
    data = make_spec_data()
    data["model"] = {**data["model"], "attention_window": {"tokens": 128, "pattern": ["global", "local"]}}
    return parse_spec(data)


def test_alternating_layers_run_their_own_blocks_in_the_traces():
    spec = _alternating_spec()
    plan = plan_workload(spec)
    blocks = next(iter(timed_blocks(spec, plan.layout.devices).values()))
    assert blocks.layer(2) == blocks.layer(0) and blocks.layer(3) == blocks.layer(1)
    assert [share for _, share in blocks.layer_mix()] == [0.5, 0.5]
    graph = class_graph(plan, plan.contexts[0])

    def attention_node_ns(layer: int) -> float:
        """The first micro-batch's forward node ending in `layer`'s attention projection."""
        tail = f"L{layer}.norm_attn..attn_out_proj"
        (node,) = [n for n in graph.nodes if n.name.startswith("F.mb0.") and n.name.endswith(tail)]
        return node.time_ns

    # stage 0 holds layers 0-3: global, local, global, local
    assert attention_node_ns(1) < attention_node_ns(2)
    assert attention_node_ns(3) == pytest.approx(attention_node_ns(1))
