"""`search.job`: one job of a shared cluster planned beside the others, which stay fixed."""

from __future__ import annotations

import pytest

from astra_hetero import pipeline
from astra_hetero.errors import SpecError
from astra_hetero.jobs.load import parse_run_spec
from astra_hetero.planner.cache import PlanCache
from astra_hetero.planner.driver import find_plans
from astra_hetero.planner.outputs import best_spec_data
from astra_hetero.planner.problem import problem_from_data
from tests.jobs.specs import spread

# Plans of job b on its two one-GPU nodes (one per leaf): data parallel (gradients across the 2:1
# spine, where job a reduces at the same time) or a two-stage pipeline (activations only).
SEARCH = {
    "job": "b",
    "tp": 1,
    "micro_batch_size": 1,
    "schedule": "1f1b",
    "sequence_parallel": False,
    "recompute": "none",
    "layers": "uniform",
    "planner": "exhaustive",
    "baseline": False,
}


def _shared(**search):
    data = spread(2.0)
    for job in data["jobs"]:
        job["model"].update(seq_len=4096, vocab_size=8192)
        job["parallelism"] = {"tp": 1, "pp": 1, "dp": 2, "global_batch_size": 4}
    data["jobs"][0]["iterations"] = 2
    data["search"] = {**SEARCH, **search}
    return data


def _best(data):
    report = find_plans(problem_from_data(data), cache=PlanCache(None))
    return report, report.best.plan


def test_the_best_plan_beside_a_neighbour_is_not_the_best_plan_alone(tmp_path):
    """Alone, data parallelism with the distributed optimizer is fastest; beside job a, whose
    gradient all-reduce shares the oversubscribed uplinks at the same instants, the pipeline is."""
    _, alone = _best(_shared(neighbours="ignore"))
    report, beside = _best(_shared())
    assert (alone.pp, alone.dp) == (1, 2) and (beside.pp, beside.dp) == (2, 1)
    # the search's time for its best plan is job b's own time when best.yaml runs the whole cluster
    run_dir = pipeline.build_run_dir(parse_run_spec(best_spec_data(report)), tmp_path / "best").root
    result = pipeline.execute(run_dir, "embedded", timeline="none")
    b = next(job for job in result.jobs if job["name"] == "b")
    assert b["iteration_time_us"] == pytest.approx(report.best.time_us)
    assert [job["name"] for job in result.jobs] == ["a", "b"]  # the neighbour ran as written


def test_an_unknown_job_in_search_job_names_the_field():
    with pytest.raises(SpecError, match=r"search\.job: no job is called 'c'; jobs: 'a', 'b'"):
        problem_from_data(_shared(job="c"))


def test_a_shared_spec_needs_search_job():
    data = _shared()
    del data["search"]["job"]
    with pytest.raises(SpecError, match=r"search\.job: a spec of several jobs plans one of them"):
        problem_from_data(data)


def test_search_job_on_a_spec_of_one_job_is_refused(spec_data):
    spec_data["search"] = {"job": "b"}
    with pytest.raises(SpecError, match=r"search\.job: names a job, but the spec has no `jobs:`"):
        problem_from_data(spec_data)
