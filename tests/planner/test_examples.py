"""The shipped plan specs load, and their search spaces are not empty."""

from __future__ import annotations

from pathlib import Path

import pytest

from astra_hetero.planner.problem import load_problem
from astra_hetero.planner.space import families, shapes

EXAMPLES = sorted(Path(__file__).parents[2].joinpath("examples", "planner").glob("*.yaml"))


def test_there_are_mixed_examples_of_32_to_128_gpus_with_two_and_three_gpu_types():
    problems = [load_problem(path) for path in EXAMPLES]
    assert all(32 <= p.num_gpus <= 128 for p in problems)
    assert {len({c.gpu_type for c in p.classes}) for p in problems} == {2, 3}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_has_a_search_space(path):
    problem = load_problem(path)
    assert any(families(problem, shape) for shape in shapes(problem))
