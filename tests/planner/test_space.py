"""The space: grids are exactly the cell assignments up to reordering replicas, each once; splits are
every composition; options follow the dimension table."""

from __future__ import annotations

import itertools
import math
from collections import Counter

import pytest

from astra_hetero.planner.estimate import Cell
from astra_hetero.planner.problem import problem_from_data
from astra_hetero.planner.shape import Shape
from astra_hetero.planner.space import (
    Family,
    class_grids,
    columns,
    families,
    materialize,
    option_sets,
    shapes,
)
from astra_hetero.planner.splits import canonical_batches, compositions, count_compositions
from tests.conftest import node_group
from tests.planner.specs import NARROW, plan_data


def brute_force_grids(composition: tuple[int, ...], pp: int, dp: int, max_distinct: int) -> set:
    """Every assignment of classes to the pp×dp cells with these counts, replicas put in order."""
    found = set()
    for cells in itertools.product(range(len(composition)), repeat=pp * dp):
        if tuple(cells.count(k) for k in range(len(composition))) != composition:
            continue
        cols = tuple(sorted(tuple(cells[r * pp : (r + 1) * pp]) for r in range(dp)))
        if len(set(cols)) <= max_distinct:
            found.add(cols)
    return found


@pytest.mark.parametrize(("composition", "pp", "dp"), [((2, 2), 2, 2), ((3, 3), 3, 2), ((2, 4), 2, 3)])
def test_grids_are_every_assignment_up_to_replica_order_each_once(composition, pp, dp):
    problem = problem_from_data(plan_data({"stage_order": "any", "max_distinct_replicas": dp}))
    grids = list(class_grids(problem, Shape(1, pp, dp), composition))
    assert len(grids) == len(set(grids))
    assert set(grids) == brute_force_grids(composition, pp, dp, dp)


def test_stage_homogeneous_and_replica_homogeneous_families():
    stages = problem_from_data(plan_data({"mapping": "stages"}))
    for grid in class_grids(stages, Shape(1, 4, 2), (4, 4)):
        assert len(set(grid)) == 1  # every replica the same pipeline: each stage on one class
    replicas = problem_from_data(plan_data({"mapping": "replicas"}))
    assert list(class_grids(replicas, Shape(1, 2, 4), (4, 4))) == [((0, 0), (0, 0), (1, 1), (1, 1))]


def test_contiguous_columns_pass_through_each_class_once():
    problem = problem_from_data(plan_data())
    for column in columns(problem, 4, (2, 2)):
        runs = [k for k, _ in itertools.groupby(column)]
        assert len(runs) == len(set(runs))
    assert set(columns(problem, 2, (1, 1))) == {(0, 0), (0, 1), (1, 0), (1, 1)}


def test_materialized_grid_fills_identical_groups_in_cluster_order():
    data = plan_data()
    data["cluster"]["node_groups"] = [
        node_group("fast-a", "h100-sxm", count=1, gpus_per_node=4),
        node_group("slow", "a100-80", count=1, gpus_per_node=4, fabric="nvlink3", nic=200),
        node_group("fast-b", "h100-sxm", count=1, gpus_per_node=4),
    ]
    problem = problem_from_data(data)
    assert [c.groups for c in problem.classes] == [("fast-a", "fast-b"), ("slow",)]
    # two replicas of three stages: fast, fast, slow; cells go stage by stage to fast-a, then fast-b
    grid = materialize(problem, ((0, 0, 1), (0, 0, 1)), cell=2)
    assert grid == (("fast-a", "fast-a"), ("fast-b", "fast-b"), ("slow", "slow"))


def test_shapes_use_every_gpu_unless_told_otherwise():
    everything = problem_from_data(plan_data({"tp": [1, 2, 4]}))
    assert all(s.num_gpus == 8 for s in shapes(everything))
    part = problem_from_data(plan_data({"tp": [1, 2, 4], "use_all_gpus": False}))
    sizes = {s.num_gpus for s in shapes(part)}
    assert 8 in sizes and min(sizes) < 8


@pytest.mark.parametrize(("total", "parts"), [(8, 2), (8, 3), (5, 5), (7, 1), (3, 4)])
def test_compositions_are_all_ordered_positive_splits(total, parts):
    found = list(compositions(total, parts))
    assert len(found) == len(set(found)) == count_compositions(total, parts)
    assert all(sum(c) == total and min(c) >= 1 and len(c) == parts for c in found)


def test_micro_batch_splits_of_identical_replicas_are_collapsed():
    h, a = Cell(0, (0,)), Cell(1, (4,))
    cells = [[h, h, a], [a, a, a]]  # replicas 0 and 1 hold the same classes; replica 2 differs
    assert canonical_batches((5, 2, 1), cells) == (2, 5, 1)
    assert canonical_batches((2, 5, 1), cells) == (2, 5, 1)


def test_a_family_counts_the_replica_orders_it_leaves_out():
    grids = (((0, 0), (0, 0), (1, 1)), ((0, 1), (0, 1), (0, 1)))
    family = Family((4, 2), grids)
    assert family.replica_orderings() == (math.factorial(3) // math.factorial(2) - 1) + 0
    assert family.representatives() == [1]  # the grid whose replicas are all the same pipeline


def values_with_the_rest_fixed(option_sets_: list, field: str) -> list[Counter]:
    """For each setting of the other options, how often each value of `field` appears."""
    groups: dict[tuple, Counter] = {}
    for options in option_sets_:
        rest = tuple((k, v) for k, v in options if k != field)
        groups.setdefault(rest, Counter())[dict(options)[field]] += 1
    return list(groups.values())


def test_options_follow_the_table_and_inert_options_take_one_value():
    problem = problem_from_data(plan_data({**NARROW, "distributed_optimizer": [False, True]}))
    one_replica = option_sets(problem, Shape(4, 2, 1))
    two_replicas = option_sets(problem, Shape(4, 1, 2))
    # every other option held fixed, an inert option takes one value (the schema's default), a live
    # one each allowed value once
    fixed_one = values_with_the_rest_fixed(one_replica, "distributed_optimizer")
    assert fixed_one and all(counts == {False: 1} for counts in fixed_one)
    fixed_two = values_with_the_rest_fixed(two_replicas, "distributed_optimizer")
    assert fixed_two and all(counts == {False: 1, True: 1} for counts in fixed_two)
    no_tp = option_sets(problem_from_data(plan_data({"sequence_parallel": [True, False]})), Shape(1, 4, 2))
    assert {dict(o)["sequence_parallel"] for o in no_tp} == {False}  # the schema's default


def test_virtual_stages_are_searched_only_for_pipelines():
    """Megatron-LM interleaves pipelines of two or more stages: with one stage only v = 1 is tried."""
    problem = problem_from_data(plan_data(NARROW))
    assert {dict(o)["virtual_stages"] for o in option_sets(problem, Shape(4, 1, 2))} == {1}
    assert {dict(o)["virtual_stages"] for o in option_sets(problem, Shape(4, 2, 1))} == {1, 2}


def test_the_spec_mapping_is_the_only_grid_when_asked_for():
    data = plan_data({"mapping": "spec"})
    data["parallelism"] = {**data["parallelism"], "pp": 2, "dp": 2}
    data["mapping"] = {"stages": ["a100", "h100"]}
    problem = problem_from_data(data)
    (family,) = families(problem, Shape(2, 2, 2))
    assert list(family.grids(problem, 2)) == [(("a100", "a100"), ("h100", "h100"))]
    assert families(problem, Shape(1, 4, 2)) == []  # another pipeline depth cannot use it
