"""Sharded data parallelism (ZeRO 1-3, FSDP): memory per rank and gather/scatter volumes."""

from __future__ import annotations

from typing import Any

import pytest

from astra_hetero.errors import SpecError
from astra_hetero.spec import parse_spec
from astra_hetero.workload.costs import parameter_counts
from astra_hetero.workload.generate import class_graph, plan_workload
from astra_hetero.workload.memory import estimate
from astra_hetero.workload.precision import BF16
from astra_hetero.workload.program import COLL
from astra_hetero.workload.sharding import largest_unit_parameters
from tests.conftest import TINY_MODEL, node_group

DP, MICRO_BATCHES = 16, 2
# Megatron's mixed precision: BF16 weights, FP32 main gradients, FP32 master copy and Adam moments
WEIGHT_BYTES, GRAD_BYTES, OPTIMIZER_BYTES = BF16.param_bytes, BF16.grad_bytes, BF16.optimizer_bytes


def zero_spec(**parallelism: Any) -> dict[str, Any]:
    """The tiny GPT (2 layers) data-parallel over 16 H100s, two micro-batches per replica."""
    return {
        "model": {**TINY_MODEL, "num_layers": 2},
        "cluster": {"node_groups": [node_group("h100", "h100-sxm", count=2, gpus_per_node=8)]},
        "parallelism": {"tp": 1, "pp": 1, "dp": DP, "global_batch_size": DP * MICRO_BATCHES, **parallelism},
    }


def volumes(data: dict[str, Any]) -> dict[str, float]:
    """Per kind of data-parallel collective on rank 0: full buffers summed over the iteration."""
    plan = plan_workload(parse_spec(data))
    out: dict[str, float] = {}
    for node in class_graph(plan, plan.contexts[0]).nodes:
        if node.kind == COLL and node.group == "dp":
            buffer = node.bytes * (DP if node.comm_type == "all_gather" else 1)
            out[node.comm_type] = out.get(node.comm_type, 0.0) + buffer
    return out


def params() -> float:
    return parameter_counts(parse_spec(zero_spec()).model).total(2)


@pytest.mark.parametrize("flag", [{"zero_stage": 3}, {"fsdp": True}])
def test_zero3_gathers_every_unit_before_its_forward_and_backward_and_scatters_its_gradients(flag):
    found = volumes(zero_spec(**flag))
    assert found["all_gather"] == pytest.approx(2 * MICRO_BATCHES * params() * 2, rel=1e-6)  # BF16
    assert found["reduce_scatter"] == pytest.approx(MICRO_BATCHES * params() * 4, rel=1e-6)  # FP32
    assert "all_reduce" not in found


def test_zero2_scatters_gradients_every_micro_batch_and_gathers_parameters_once():
    found = volumes(zero_spec(zero_stage=2))
    assert found["reduce_scatter"] == pytest.approx(MICRO_BATCHES * params() * 4, rel=1e-6)
    assert found["all_gather"] == pytest.approx(params() * 2, rel=1e-6)


def test_zero1_is_the_distributed_optimizer():
    found = volumes(zero_spec(zero_stage=1))
    assert found == volumes(zero_spec(distributed_optimizer=True))
    assert found["reduce_scatter"] == pytest.approx(params() * 4, rel=1e-6)  # once, after the backward


@pytest.mark.parametrize("stage", [0, 1, 2, 3])
def test_memory_per_rank_shards_states_by_stage(stage):
    spec = parse_spec(zero_spec(zero_stage=stage))
    need = estimate(spec, 0, 2, MICRO_BATCHES)
    p, unit = params(), largest_unit_parameters(spec, 0)
    sharded = {
        "weights": WEIGHT_BYTES * (p / DP if stage == 3 else p),
        "gradients": GRAD_BYTES * (p / DP if stage >= 2 else p),
        "optimizer": OPTIMIZER_BYTES * (p / DP if stage >= 1 else p),
    }
    if stage == 2:
        sharded["gradients"] += 2 * 25 * 1024**2  # two gradient buckets in flight
    if stage == 3:  # the unit in use and the prefetched one, and one unit's gradients
        sharded["weights"] += 2 * WEIGHT_BYTES * unit
        sharded["gradients"] += GRAD_BYTES * unit
    for part, value in sharded.items():
        assert getattr(need, part) == pytest.approx(value), part


@pytest.mark.parametrize(
    "parallelism,match",
    [
        ({"fsdp": True, "zero_stage": 2}, "contradicts zero_stage 2"),
        ({"zero_stage": 0, "distributed_optimizer": True}, "contradicts zero_stage 0"),
        ({"zero_stage": 2, "distributed_optimizer": False}, "distributed_optimizer: false"),
        ({"zero_stage": 3, "distributed_optimizer": True, "overlap_param_gather": True}, "ZeRO-3"),
    ],
)
def test_contradictory_sharding_options_are_rejected_naming_the_section(parallelism, match):
    with pytest.raises(SpecError, match=match) as error:
        parse_spec(zero_spec(**parallelism))
    assert error.value.field.startswith("parallelism")
