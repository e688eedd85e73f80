"""The `search:` section: validated like the spec, errors name the field."""

from __future__ import annotations

import pytest

from astra_hetero.errors import SpecError
from astra_hetero.planner.problem import problem_from_data
from tests.planner.specs import plan_data


@pytest.mark.parametrize(
    ("search", "field", "reason"),
    [
        ({"tp": "eight"}, "search.tp", "integer"),
        ({"schedule": "zigzag"}, "search.schedule", "1f1b"),
        ({"max_distinct_replicas": 0}, "search.max_distinct_replicas", "greater than 0"),
        ({"not_a_setting": 1}, "search.not_a_setting", "unknown field"),
        ({"prices_per_gpu_hour": {"b200": 9}}, "search.prices_per_gpu_hour.b200", "not a GPU type"),
        ({"prices_per_gpu_hour": {"h100-sxm": 2}}, "search.prices_per_gpu_hour", "no price for a100-80"),
        ({"mapping": "spec"}, "search.mapping", "no mapping"),
        ({"micro_batch_size": [0]}, "search.micro_batch_size[0]", "greater than or equal to 1"),
        ({"micro_batch_size": 0}, "search.micro_batch_size", "greater than or equal to 1"),
        ({"virtual_stages": [0]}, "search.virtual_stages[0]", "greater than or equal to 1"),
        ({"tp": []}, "search.tp", "at least 1 item"),
        ({"dp": [2, 0]}, "search.dp[1]", "greater than 0"),
        ({"recompute": []}, "search.recompute", "at least 1 item"),
    ],
)
def test_bad_search_settings_name_the_field(search, field, reason):
    with pytest.raises(SpecError) as caught:
        problem_from_data(plan_data(search))
    assert caught.value.field == field and reason in caught.value.reason


def test_a_scalar_fixes_a_dimension_and_a_list_narrows_it():
    problem = problem_from_data(plan_data({"tp": 2, "recompute": ["none", "full"]}))
    assert problem.settings.tp == 2 and problem.settings.recompute == ["none", "full"]


def test_identical_node_groups_form_one_device_class():
    data = plan_data()
    groups = data["cluster"]["node_groups"]
    data["cluster"]["node_groups"] = [groups[0], {**groups[0], "name": "h100-b"}, groups[1]]
    problem = problem_from_data(data)
    assert [c.groups for c in problem.classes] == [("h100", "h100-b"), ("a100",)]
    assert problem.classes[0].num_gpus == 8
