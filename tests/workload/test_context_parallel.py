"""Context parallelism: balanced causal work per rank, the KV ring's traffic, groups and memory."""

from __future__ import annotations

from typing import Any

import pytest

from astra_hetero.errors import SpecError
from astra_hetero.spec import parse_spec
from astra_hetero.workload.attention import causal_pairs, fused_attention
from astra_hetero.workload.context_parallel import (
    core_attention_backward,
    core_attention_forward,
    kv_bytes,
    step_fractions,
)
from astra_hetero.workload.generate import class_graph, plan_workload
from astra_hetero.workload.memory import activation_bytes_per_layer
from astra_hetero.workload.memory import estimate as memory_estimate
from astra_hetero.workload.ops import Collective, Concurrent, Piece, Transfer, shape_of
from astra_hetero.workload.program import COLL, RECV, SEND
from tests.conftest import node_group

S, H, HEADS, KV = 8192, 1024, 16, 4


def cp_spec(cp: int, **parallelism: Any) -> dict[str, Any]:
    return {
        "model": {
            "num_layers": 2,
            "hidden_size": H,
            "num_heads": HEADS,
            "num_kv_heads": KV,
            "ffn_size": 4096,
            "activation": "swiglu",
            "vocab_size": 32000,
            "seq_len": S,
            "norm": "rmsnorm",
        },
        "cluster": {"node_groups": [node_group("h100", "h100-sxm", count=2, gpus_per_node=8)]},
        "parallelism": {"tp": 1, "cp": cp, "pp": 1, "dp": 16 // cp, "global_batch_size": 16, **parallelism},
    }


def shape(cp: int, **parallelism: Any):
    spec = parse_spec(cp_spec(cp, **parallelism))
    return shape_of(spec.model, spec.parallelism, spec.compute.attention)


def ring_work(steps: list[Any]) -> float:
    return sum(
        node.op.flops * node.fraction
        for step in steps
        if isinstance(step, Concurrent)
        for node in step.nodes
        if isinstance(node, Piece)
    )


@pytest.mark.parametrize("cp", [2, 4, 8])
def test_load_balanced_chunks_give_every_rank_one_cp_th_of_the_causal_work(cp):
    # rank i holds chunks i and 2cp-1-i of c tokens: 2c²+c pairs locally, 2c² at each other step
    c = S // (2 * cp)
    pairs = [2 * c * c + c] + [2 * c * c] * (cp - 1)
    assert sum(pairs) * cp == causal_pairs(S)
    assert step_fractions(cp, S) == pytest.approx([p / sum(pairs) for p in pairs])
    whole = fused_attention(shape(1), "fwd").flops
    assert ring_work(core_attention_forward(shape(cp))) == pytest.approx(whole / cp)


@pytest.mark.parametrize("cp", [2, 4])
def test_the_ring_sends_kv_cp_minus_one_times_forward_and_kv_plus_dkv_backward(cp):
    x = shape(cp)
    kv = 2 * 2 * (S // cp) * KV * (H // HEADS)  # K and V of the rank's tokens, BF16
    assert kv_bytes(x) == kv

    def sent(steps):
        return [
            n.bytes
            for s in steps
            if isinstance(s, Concurrent)
            for n in s.nodes
            if isinstance(n, Transfer) and n.direction == "send"
        ]

    assert sent(core_attention_forward(x)) == [kv] * (cp - 1)
    assert sum(sent(core_attention_backward(x, False))) == 2 * (cp - 1) * kv


def test_all_gather_variant_gathers_kv_and_reduce_scatters_its_gradient():
    x = shape(4, cp_comm="all_gather")
    forward = core_attention_forward(x)
    backward = core_attention_backward(x, False)
    kv = kv_bytes(x)
    assert [(s.kind, s.bytes, s.group) for s in forward if isinstance(s, Collective)] == [
        ("all_gather", 4 * kv, "cp")
    ]
    assert [(s.kind, s.bytes) for s in backward if isinstance(s, Collective)] == [
        ("all_gather", 4 * kv),
        ("reduce_scatter", 4 * kv),
    ]


def test_each_rank_sends_to_its_ring_successor_and_receives_from_its_predecessor():
    plan = plan_workload(parse_spec(cp_spec(4)))
    binding = plan.bindings[1]
    assert (binding.peers["cp_next"], binding.peers["cp_prev"]) == (2, 0)
    graph = class_graph(plan, plan.contexts[1])
    layers, micro_batches = 2, 4  # 16 sequences over dp = 4 replicas
    sends = [n for n in graph.nodes if n.kind == SEND and n.peer.startswith("cp")]
    recvs = [n for n in graph.nodes if n.kind == RECV and n.peer.startswith("cp")]
    per_layer = (4 - 1) + 4  # forward sends, backward sends
    assert len(sends) == len(recvs) == layers * micro_batches * per_layer
    assert len({n.tag for n in sends}) == len(sends)


def test_cp_ranks_join_the_data_parallel_gradient_group():
    plan = plan_workload(parse_spec(cp_spec(2)))
    dp_groups = [g for g in plan.groups if g.kind == "dp"]
    assert [len(g.ranks) for g in dp_groups] == [16]  # dp = 8 replicas × cp = 2
    ctx = plan.contexts[0]
    assert ctx.dp_size == 16
    graph = class_graph(plan, ctx)
    assert {n.group for n in graph.nodes if n.kind == COLL and ".grad_" in n.name} == {"dp"}


@pytest.mark.parametrize("cp", [2, 4])
def test_activations_are_one_cp_th(cp):
    whole = activation_bytes_per_layer(parse_spec(cp_spec(1)))
    assert activation_bytes_per_layer(parse_spec(cp_spec(cp))) == pytest.approx(whole / cp)


@pytest.mark.parametrize("cp", [2, 8])
def test_the_last_stage_holds_the_logits_of_its_own_tokens_only(cp):
    """The LM head and the loss run on a rank's s/cp tokens: the logits' share of the last stage's
    memory (activation format + FP32 softmax per token and vocabulary entry) is one cp-th."""

    def logits(c: int) -> float:
        spec = parse_spec(cp_spec(c))
        layers = activation_bytes_per_layer(spec) * spec.model.num_layers
        # one layer's recompute-free activations are not held without full recompute: the rest is logits
        return memory_estimate(spec, 0, spec.model.num_layers, 1).activations - layers

    whole = logits(1)
    assert whole == pytest.approx(S * 32000 * (2 + 4))
    assert logits(cp) == pytest.approx(whole / cp)


def test_unbalanceable_sequences_and_unfused_attention_are_rejected():
    data = cp_spec(4)
    data["model"]["seq_len"] = 8188
    with pytest.raises(SpecError, match="2·cp") as error:
        parse_spec(data)
    assert error.value.field == "parallelism.cp"
    with pytest.raises(SpecError, match="fused") as error:
        parse_spec({**cp_spec(2), "compute": {"attention": "unfused"}})
    assert error.value.field == "parallelism.cp"
