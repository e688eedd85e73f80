"""Precision in the search space: the planner tries the formats `search: precision` lists, prices
each with its own rates and widths, and counts a format a GPU lacks as a spec rejection."""

from __future__ import annotations

from astra_hetero.planner.base import Budget
from astra_hetero.planner.cache import PlanCache
from astra_hetero.planner.evaluate import Evaluator
from astra_hetero.planner.feasibility import Reason
from astra_hetero.planner.problem import problem_from_data
from astra_hetero.planner.search import BranchAndBound, Exhaustive
from tests.conftest import node_group
from tests.planner.specs import NARROW, plan_data

# estimate_margin off: only bounds prune, so the search must meet the exhaustive optimum
SEARCH = {**NARROW, "tp": [4], "precision": ["bf16", "fp8"], "estimate_margin": None}


def h100_l40s() -> dict:
    """Two FP8-capable GPU types: a 4-GPU H100 node and a 4-GPU PCIe L40S node."""
    data = plan_data(SEARCH)
    data["cluster"]["node_groups"] = [
        node_group("h100", "h100-sxm", count=1, gpus_per_node=4),
        node_group("l40s", "l40s", count=1, gpus_per_node=4, fabric="pcie4", nic=200),
    ]
    return data


def test_fp8_is_searched_and_chosen_where_every_gpu_has_it():
    problem = problem_from_data(h100_l40s())
    with Evaluator(PlanCache(None)) as evaluator:
        exhaustive = Exhaustive().search(problem, evaluator, Budget.of(10_000, None))
        planned = BranchAndBound().search(problem, evaluator, Budget.of(120, None))
    formats = {t.plan.option("precision") for t in exhaustive.trials}
    assert formats == {"bf16", "fp8"}
    assert exhaustive.best is not None and exhaustive.best.plan.option("precision") == "fp8"
    assert planned.best is not None and planned.best.plan == exhaustive.best.plan


def test_a_format_a_gpu_lacks_is_a_spec_rejection():
    problem = problem_from_data(plan_data(SEARCH))  # H100 + A100: no FP8 on the A100
    with Evaluator(PlanCache(None)) as evaluator:
        outcome = Exhaustive().search(problem, evaluator, Budget.of(10_000, None))
    assert {t.plan.option("precision") for t in outcome.trials} == {"bf16"}
    rejected = [key for key in outcome.tally.counts if key.startswith(Reason.SPEC.value)]
    assert any("fp8_tflops" in key for key in rejected)


def test_memory_pruning_sees_the_formats_widths():
    """FP8 saves the linear layers' inputs in one byte: a context under FP8 needs less memory."""
    from astra_hetero.planner.context import Contexts
    from astra_hetero.planner.shape import Shape

    problem = problem_from_data(h100_l40s())
    contexts = Contexts(problem)
    base = [
        (k, v) for k, v in contexts.problem.base.parallelism.model_dump().items() if k == "micro_batch_size"
    ]
    needs = {}
    for fmt in ("bf16", "fp8"):
        ctx = contexts.get(Shape(4, 1, 2), (*base, ("precision", fmt)))
        assert ctx.dtypes.compute == fmt
        needs[fmt] = ctx.memory_need_gib(0, 4, 4)
    assert needs["fp8"] < needs["bf16"]
