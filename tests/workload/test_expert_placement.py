"""Experts on a subset of node groups (`mapping.experts`): who computes what, what moves, who holds what."""

from __future__ import annotations

from typing import Any

import pytest

from astra_hetero.errors import SpecError
from astra_hetero.planner.problem import problem_from_data
from astra_hetero.spec import parse_spec
from astra_hetero.workload.costs import Collective, layer_forward, parameter_counts
from astra_hetero.workload.expert_placement import expert_placement
from astra_hetero.workload.generate import plan_workload
from astra_hetero.workload.layout import build_layout
from astra_hetero.workload.memory import estimate
from astra_hetero.workload.ops import Op, shape_of
from tests.conftest import node_group

ALTERNATING = ["h100", "b200"] * 4  # replica r on h100 when r is even: each expert group mixes both


def placed(**mapping: Any) -> dict[str, Any]:
    """A 2-layer, 8-expert model over 8 H100 and 8 B200: TP 2, DP 8, EP 8 (etp 1)."""
    return {
        "model": {
            "num_layers": 2,
            "hidden_size": 1024,
            "num_heads": 16,
            "num_kv_heads": 4,
            "ffn_size": 4096,
            "activation": "swiglu",
            "vocab_size": 32000,
            "seq_len": 1024,
            "norm": "rmsnorm",
            "moe": {"num_experts": 8, "top_k": 2, "expert_ffn_size": 2048},
        },
        "cluster": {
            "node_groups": [
                node_group("h100", "h100-sxm", count=1, gpus_per_node=8),
                node_group("b200", "b200", count=1, gpus_per_node=8, fabric="nvlink5"),
            ]
        },
        "parallelism": {
            "tp": 2,
            "dp": 8,
            "ep": 8,
            "etp": 1,
            "sequence_parallel": True,
            "global_batch_size": 16,
        },
        "mapping": {"replicas": ALTERNATING, **mapping},
    }


def layer_work(spec, hosts: tuple[int, bool]) -> tuple[float, list[int]]:
    """(expert FLOPs of one forward layer, its all-to-all sizes) on a rank holding experts or not."""
    steps = layer_forward(shape_of(spec.model, spec.parallelism, expert_hosts=hosts))
    flops = sum(op.flops for op in steps if isinstance(op, Op) and op.name.startswith("expert_fc"))
    sizes = [s.bytes for s in steps if isinstance(s, Collective) and s.group == "ep"]
    return flops, sizes


def test_holders_process_every_copy_of_their_group_and_the_others_none():
    spec = parse_spec(placed(experts=["b200"]))
    placement = expert_placement(spec, build_layout(spec))
    assert placement is not None and placement.hosts == 4  # 4 of an expert group's 8 ranks are B200s
    assert placement.holds(8) and not placement.holds(0)
    flops_uniform, a2a_uniform = layer_work(spec, (0, True))
    flops_b200, a2a_b200 = layer_work(spec, (4, True))
    flops_h100, a2a_h100 = layer_work(spec, (4, False))
    # an expert group of 8 ranks has 4 B200 holders: each takes 8/4 = 2 times its even share
    assert flops_b200 == pytest.approx(2 * flops_uniform, rel=1e-3)
    assert flops_h100 == 0
    # the all-to-all is written at a holder's receive volume, for every member alike
    assert a2a_b200 == a2a_h100 == [2 * a2a_uniform[0]] * 2


def test_holders_keep_the_experts_and_the_others_none():
    spec = parse_spec(placed(experts=["b200"]))
    counts = parameter_counts(spec.model)
    holder = estimate(spec, 0, 2, 2, expert_hosts=(4, True))
    other = estimate(spec, 0, 2, 2, expert_hosts=(4, False))
    # BF16 weights: two layers of 8 experts over 4 holders
    assert holder.weights - other.weights == pytest.approx(2 * 2 * counts.experts_per_layer / 4)


def test_expert_gradients_reduce_among_the_holders_of_the_same_experts():
    plan = plan_workload(parse_spec(placed(experts=["b200"])))
    edp = [g for g in plan.groups if g.kind == "edp"]
    assert edp and all(len(g.ranks) == 2 for g in edp)  # two expert groups per stage
    holders = {8, 9, 10, 11, 12, 13, 14, 15}
    for g in edp:
        assert set(g.ranks) <= holders or not set(g.ranks) & holders


@pytest.mark.parametrize(
    "mapping,parallelism,field",
    [
        ({"experts": ["gpu-x"]}, {}, "mapping.experts[0]"),
        ({"experts": ["b200"], "replicas": ["h100"] * 4 + ["b200"] * 4}, {}, "mapping.experts"),
        ({"experts": ["b200"]}, {"etp": 2}, "parallelism.etp"),
        ({"experts": ["b200"]}, {"zero_stage": 3}, "mapping.experts"),
    ],
)
def test_placements_the_model_cannot_run_are_refused(mapping, parallelism, field):
    data = placed(**mapping)
    data["parallelism"].update(parallelism)
    with pytest.raises(SpecError) as error:
        plan_workload(parse_spec(data))
    assert error.value.field == field


def test_the_planner_does_not_place_experts():
    data = placed(experts=["b200"])
    data["search"] = {"tp": 2}
    with pytest.raises(SpecError, match="does not place experts"):
        problem_from_data(data)


def test_routing_and_unpermutation_remain_on_ranks_without_experts():
    spec = parse_spec(placed(experts=["b200"]))
    steps = layer_forward(shape_of(spec.model, spec.parallelism, expert_hosts=(4, False)))
    names = {op.name for op in steps if isinstance(op, Op)}
    assert {"router", "moe_permute", "moe_unpermute"} <= names
    assert not {n for n in names if n.startswith("expert_")}


def test_placed_experts_fold_to_the_rank_by_rank_result(tmp_path):
    from astra_hetero.pipeline import build_run_dir
    from tests.embedded.folding_checks import assert_same_simulation, simulate_both

    build_run_dir(parse_spec(placed(experts=["b200"])), tmp_path / "run")
    folded, plain = simulate_both(tmp_path / "run")
    assert_same_simulation(folded, plain)
