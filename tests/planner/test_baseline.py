"""The homogeneous-assumption baseline: planned as if every GPU were the most common one, with
uniform splits in cluster order, then run on the real cluster."""

from __future__ import annotations

from astra_hetero.planner.baseline import homogeneous_problem, most_common_gpu
from astra_hetero.planner.cache import PlanCache
from astra_hetero.planner.driver import find_plans
from astra_hetero.planner.problem import problem_from_data
from astra_hetero.workload.partition import even_split
from tests.conftest import node_group
from tests.planner.specs import NARROW, plan_data


def three_a100_nodes_one_h100() -> dict:
    data = plan_data({**NARROW, "baseline": True})
    data["cluster"]["node_groups"] = [
        node_group("h100", "h100-sxm", count=1, gpus_per_node=4),
        node_group("a100", "a100-80", count=3, gpus_per_node=4, fabric="nvlink3", nic=200),
    ]
    data["parallelism"]["global_batch_size"] = 16
    return data


def test_the_most_common_gpu_stands_in_for_every_gpu():
    problem = problem_from_data(three_a100_nodes_one_h100())
    assert most_common_gpu(problem.base).type_key == "a100-80"
    assumed = homogeneous_problem(problem)
    assert {g.gpu.type_key for g in assumed.base.cluster.node_groups} == {"a100-80"}
    assert [g.intra_node_fabric for g in assumed.base.cluster.node_groups] == [
        g.intra_node_fabric for g in problem.base.cluster.node_groups
    ]  # only the GPUs are assumed alike; the network stays as it is
    assert (assumed.settings.mapping, assumed.settings.layers, assumed.settings.micro_batches) == (
        "default",
        "uniform",
        "uniform",
    )


def test_the_baseline_runs_a_uniform_plan_on_the_real_cluster_and_the_best_beats_it():
    report = find_plans(problem_from_data(three_a100_nodes_one_h100()), cache=PlanCache(None))
    baseline, best = report.baseline_best, report.best
    assert baseline is not None and best is not None and report.speedup is not None
    plan = baseline.plan
    assert plan.grid is None and baseline.source == "baseline"
    assert plan.layers == tuple(even_split(4, plan.pp))
    assert len(set(plan.micro_batches)) == 1
    assert report.speedup == baseline.time_us / best.time_us >= 1.0
