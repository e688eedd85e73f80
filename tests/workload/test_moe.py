"""Mixture-of-experts layers: FLOPs, dispatch volumes, parameters and groups against closed forms."""

from __future__ import annotations

from typing import Any

import pytest

from astra_hetero.errors import SpecError
from astra_hetero.spec import parse_spec
from astra_hetero.spec.schema import ModelSpec
from astra_hetero.workload.costs import Collective, layer_backward, layer_forward, parameter_counts
from astra_hetero.workload.generate import class_graph, plan_workload
from astra_hetero.workload.ops import Op, shape_of
from astra_hetero.workload.program import COLL
from tests.conftest import node_group

H, F, E, K, S = 1024, 2048, 8, 2, 1024  # hidden, expert width, experts, top-k, sequence


def moe_spec(**parallelism: Any) -> dict[str, Any]:
    """A 2-layer MoE model (8 experts of 2048, top-2, gated) on two 8-GPU H100 nodes."""
    moe = parallelism.pop("moe", {})
    return {
        "model": {
            "num_layers": 2,
            "hidden_size": H,
            "num_heads": 16,
            "num_kv_heads": 4,
            "ffn_size": 4096,
            "activation": "swiglu",
            "vocab_size": 32000,
            "seq_len": S,
            "norm": "rmsnorm",
            "moe": {"num_experts": E, "top_k": K, "expert_ffn_size": F, **moe},
        },
        "cluster": {"node_groups": [node_group("h100", "h100-sxm", count=2, gpus_per_node=8)]},
        "parallelism": {"tp": 1, "pp": 1, "dp": 16, "global_batch_size": 16, **parallelism},
    }


def layer_steps(data: dict[str, Any]) -> tuple[list[Any], list[Any], Any]:
    spec = parse_spec(data)
    x = shape_of(spec.model, spec.parallelism, spec.compute.attention)
    return layer_forward(x), layer_backward(x, "none"), x


def ops_named(steps: list[Any], prefix: str) -> list[Op]:
    return [s for s in steps if isinstance(s, Op) and s.name.startswith(prefix)]


@pytest.mark.parametrize("ep,etp,tp", [(1, 1, 1), (4, 1, 1), (8, 1, 2), (4, 2, 2), (2, 4, 4)])
def test_expert_flops_per_rank_are_its_tokens_top_k_copies_through_one_gated_expert(ep, etp, tp):
    data = moe_spec(ep=ep, etp=etp, tp=tp, dp=16 // tp, sequence_parallel=tp > 1)
    forward, backward, x = layer_steps(data)
    tokens = S // tp  # the rank's sequence-parallel shard enters the layer
    # every copy runs fc1 (h → 2F) and fc2 (F → h); each rank holds 1/etp of F for etp times the copies
    expected = 2 * tokens * K * H * 3 * F
    assert sum(op.flops for op in ops_named(forward, "expert_fc")) == pytest.approx(expected)
    # backward: an input-gradient and a weight-gradient GEMM per forward GEMM
    assert sum(op.flops for op in ops_named(backward, "expert_fc")) == pytest.approx(2 * expected)


@pytest.mark.parametrize("ep", [2, 4, 8])
def test_dispatch_and_combine_each_move_top_k_copies_of_every_token(ep):
    forward, backward, _ = layer_steps(moe_spec(ep=ep))
    per_rank = K * S * H * 2  # top-k × tokens × hidden × BF16
    for steps in (forward, backward):
        exchanges = [s for s in steps if isinstance(s, Collective) and s.group == "ep"]
        assert [(s.kind, s.bytes) for s in exchanges] == [("all_to_all", per_rank)] * 2


def test_imbalance_paces_every_rank_at_the_busiest_ranks_load():
    # 8 experts on 4 EP ranks, the busiest expert takes 40 %: its rank holds it and one of the rest
    busiest = 0.4 + 0.6 / 7
    forward, _, x = layer_steps(moe_spec(ep=4, moe={"imbalance": 0.4}))
    assert x.moe.load == pytest.approx(busiest * 4)
    balanced, _, _ = layer_steps(moe_spec(ep=4))
    flops = [sum(o.flops for o in ops_named(s, "expert_fc")) for s in (forward, balanced)]
    assert flops[0] == pytest.approx(flops[1] * busiest * 4, rel=1e-3)  # whole rows per expert
    exchange = [s.bytes for s in forward if isinstance(s, Collective) and s.group == "ep"]
    assert exchange == [int(K * S * H * 2 * busiest * 4)] * 2


def test_capacity_factor_caps_the_busiest_expert():
    _, _, x = layer_steps(moe_spec(ep=8, moe={"imbalance": 0.5, "capacity_factor": 1.5}))
    assert x.moe.load == pytest.approx(1.5)  # one expert per rank, at most 1.5× its even share


def test_drawn_imbalance_is_reproducible_by_its_seed():
    draw = {"distribution": "dirichlet", "concentration": 2.0, "seed": 7}
    loads = [layer_steps(moe_spec(ep=4, moe={"imbalance": dict(draw)}))[2].moe.load for _ in range(2)]
    other = layer_steps(moe_spec(ep=4, moe={"imbalance": {**draw, "seed": 8}}))[2].moe.load
    assert loads[0] == loads[1] > 1.0 and other != loads[0]


def test_allgather_dispatcher_gathers_the_expert_group_and_reduce_scatters_back():
    forward, _, _ = layer_steps(moe_spec(ep=4, moe_token_dispatcher="allgather"))
    moe = [(s.kind, s.bytes) for s in forward if isinstance(s, Collective)]
    gathered = 4 * S * (2 * H + 5 * E)  # every token of the group, with FP32 scores and a mask byte
    assert moe == [("all_gather", gathered), ("reduce_scatter", 4 * S * 2 * H)]


@pytest.mark.parametrize(
    "preset,billions",
    [("mixtral-8x7b", 46.7), ("mixtral-8x22b", 140.6), ("qwen3-30b-a3b", 30.5), ("qwen3-235b-a22b", 235.1)],
)
def test_moe_presets_have_their_model_cards_parameter_counts(preset, billions):
    model = ModelSpec.model_validate(preset)
    assert parameter_counts(model).total(model.num_layers) / 1e9 == pytest.approx(billions, rel=0.01)


def test_expert_groups_follow_megatron_order_within_each_stage():
    plan = plan_workload(parse_spec(moe_spec(tp=2, dp=8, ep=4, etp=1, sequence_parallel=True)))
    groups = {g.kind: [] for g in plan.groups}
    for g in plan.groups:
        groups[g.kind].append(g.ranks)
    # ranks 0..15 of one stage: expert TP innermost (1), EP next (4), expert DP outermost (4)
    assert groups["ep"][:2] == [(0, 1, 2, 3), (4, 5, 6, 7)]
    assert groups["edp"][0] == (0, 4, 8, 12)
    assert "etp" not in groups


def test_expert_gradients_are_reduced_over_the_expert_data_parallel_group():
    data = moe_spec(ep=4, distributed_optimizer=True)
    plan = plan_workload(parse_spec(data))
    ctx = plan.contexts[0]
    graph = class_graph(plan, ctx)
    reduced = {"dp": 0.0, "edp": 0.0}
    for node in graph.nodes:
        if node.kind == COLL and ".grad_" in node.name:
            reduced[node.group] += node.bytes
    counts = parameter_counts(parse_spec(data).model)
    # FP32 gradients: the rank's quarter of the experts over "edp", every dense weight over "dp"
    assert reduced["edp"] == pytest.approx(4 * 2 * counts.experts_per_layer / 4)
    assert reduced["dp"] == pytest.approx(4 * (counts.total(2) - 2 * counts.experts_per_layer))


@pytest.mark.parametrize(
    "parallelism,field",
    [
        ({"ep": 3, "dp": 16}, "parallelism.ep"),
        ({"tp": 2, "dp": 8, "ep": 2}, "parallelism.sequence_parallel"),
        ({"ep": 32, "dp": 16, "moe": {"num_experts": 32}}, "parallelism.ep"),
    ],
)
def test_expert_placements_megatron_cannot_build_are_rejected(parallelism, field):
    with pytest.raises(SpecError) as error:
        parse_spec(moe_spec(**parallelism))
    assert error.value.field == field


def test_expert_parallelism_needs_experts():
    data = moe_spec(ep=2)
    data["model"].pop("moe")
    with pytest.raises(SpecError, match="mixture-of-experts") as error:
        parse_spec(data)
    assert error.value.field == "parallelism.ep"


@pytest.mark.parametrize("ep", [1, 4])
def test_stored_moe_activations_keep_each_routed_copy_once_per_saved_tensor(ep):
    """BF16, balanced: the router's input (2·h B) and FP32 scores (4·E B) per token; per routed copy the
    experts' saved input (2·h B, the permuted copy itself: the permutation saves only its index map),
    fc1's output (2·2F B, the weighted gated activation's input), fc2's input (2·F B) and the FP32
    routing probability the activation applies — no expert output (the unpermutation is a plain sum)."""
    from astra_hetero.workload.moe import moe_activation_bytes

    spec = parse_spec(moe_spec(ep=ep))
    x = shape_of(spec.model, spec.parallelism, spec.compute.attention)
    copies = S * K  # every rank processes as many copies as it routes when the load is balanced
    expected = S * (2 * H + 4 * E) + copies * (2 * H + 2 * 2 * F + 2 * F + 4)
    assert moe_activation_bytes(x) == pytest.approx(expected)
