"""Simulated plans are cached by content: a rerun simulates nothing; any change to what is simulated
changes the key."""

from __future__ import annotations

from pathlib import Path

from astra_hetero.planner.cache import PlanCache, plan_key
from astra_hetero.planner.driver import find_plans
from astra_hetero.planner.problem import problem_from_data
from astra_hetero.spec import parse_spec
from tests.conftest import make_spec_data
from tests.planner.specs import NARROW, plan_data


def test_a_rerun_is_served_from_the_cache(tmp_path: Path):
    problem = problem_from_data(plan_data({**NARROW, "baseline": True}))
    first = find_plans(problem, cache=PlanCache(tmp_path / "cache"))
    again = find_plans(problem, cache=PlanCache(tmp_path / "cache"))
    assert first.num_simulated > 0 and first.cache_hits == 0
    assert again.num_simulated == 0 and again.cache_hits == first.num_simulated
    assert [t.time_us for t in again.search.trials] == [t.time_us for t in first.search.trials]
    assert all(t.evaluation is not None and t.evaluation.cached for t in again.search.trials)


def test_the_key_follows_what_is_simulated_not_the_name(tmp_path: Path):
    spec = parse_spec(make_spec_data())
    assert plan_key(spec) == plan_key(spec.model_copy(update={"name": "renamed"}))
    wider = parse_spec({**make_spec_data(), "network": {"topology": "spine_leaf", "link_latency_ns": 900}})
    assert plan_key(spec) != plan_key(wider)
    table = tmp_path / "calibration.csv"
    table.write_text("gpu,op,time_us\nh100-sxm,qkv_proj.fwd,10\n")
    calibrated = parse_spec({**make_spec_data(), "calibration": str(table)})
    before = plan_key(calibrated)
    table.write_text("gpu,op,time_us\nh100-sxm,qkv_proj.fwd,20\n")
    assert plan_key(calibrated) != before  # the table's content is part of the key


def test_a_damaged_entry_is_simulated_again(tmp_path: Path):
    problem = problem_from_data(plan_data({**NARROW, "tp": 4}))
    cache = PlanCache(tmp_path)
    first = find_plans(problem, cache=cache)
    for entry in tmp_path.rglob("*.json"):
        entry.write_text("{not json")
    again = find_plans(problem, cache=PlanCache(tmp_path))
    assert again.num_simulated == first.num_simulated and again.cache_hits == 0
