"""Two jobs on one cluster, simulated together by the embedded engine: closed forms of max-min fair
sharing on small cases, and what must not change (disjoint halves, a job that starts after the other
has finished, folding)."""

from __future__ import annotations

import pytest

from astra_hetero import pipeline
from astra_hetero.jobs.load import parse_run_spec
from astra_hetero.spec import parse_spec
from tests.jobs.specs import UPLINK_BYTES_PER_NS, dp_job, packed, spread, two_leaves


def _run(tmp_path, data, name="run", **options):
    run_dir = pipeline.build_run_dir(parse_run_spec(data), tmp_path / name).root
    return pipeline.execute(run_dir, "embedded", timeline="none", **options)


def _job(result, name):
    return next(job for job in result.jobs if job["name"] == name)


@pytest.mark.parametrize(
    "data", [packed(1.0), spread(1.0), packed(2.0)], ids=["packed", "spread", "packed-2:1"]
)
def test_jobs_that_share_no_bottleneck_take_exactly_their_solo_time(tmp_path, data):
    result = _run(tmp_path, data)
    for job in result.jobs:
        assert job["iteration_time_us"] == job["solo_iteration_time_us"]
        assert job["slowdown"] == 1.0
    assert result.jobs[0]["iteration_time_us"] == result.jobs[1]["iteration_time_us"]


def test_solo_time_is_the_job_run_alone_as_a_single_job_spec(tmp_path):
    """The solo run inside a shared run equals an ordinary run of job a by itself on the same cluster
    (its replicas on node 0 of each leaf, the other GPUs idle)."""
    shared = _run(tmp_path, spread(2.0), "shared")
    alone = two_leaves(2.0, [])
    del alone["jobs"]
    job = dp_job("a", None)
    alone.update(model=job["model"], parallelism=job["parallelism"])
    alone["mapping"] = {"replicas": ["x", "y"], "allow_idle_gpus": True}
    run_dir = pipeline.build_run_dir(parse_spec(alone), tmp_path / "alone").root
    single = pipeline.execute(run_dir, "embedded", timeline="none")
    assert _job(shared, "a")["solo_iteration_time_us"] == single.iteration_time_us


def test_a_two_to_one_spine_slows_simultaneous_all_reduces_as_max_min_sharing_implies(tmp_path):
    """Each leaf has one 400G uplink for its two 400G NICs. Alone, a job's 2-rank ring all-reduce of S
    bytes sends S bytes each way across the uplink at its full rate C; both jobs reduce at the same
    instant, so max-min fairness gives each flow C/2 and each all-reduce takes S/C longer: the
    iteration grows by exactly S/C, compute and latencies unchanged."""
    result = _run(tmp_path, spread(2.0))
    a, b = _job(result, "a"), _job(result, "b")
    reduced = [c for c in result.collectives if c.type == "all_reduce"]
    assert len(reduced) == 2 and reduced[0].bytes == reduced[1].bytes
    extra_us = reduced[0].bytes / UPLINK_BYTES_PER_NS / 1000
    for job in (a, b):
        assert job["iteration_time_us"] - job["solo_iteration_time_us"] == pytest.approx(extra_us, abs=0.002)
        assert job["slowdown"] > 1.5
    (uplink,) = result.shared_links
    assert uplink["kind"] == "uplink" and uplink["gbps"] == 400.0 and uplink["num_lines"] == 2
    # ring all-reduce of 2 ranks: S/2 per step, two steps, each way
    assert uplink["bytes"] == {"a": reduced[0].bytes, "b": reduced[0].bytes}
    assert uplink["busy"] == pytest.approx(
        2 * reduced[0].bytes / (UPLINK_BYTES_PER_NS * a["iteration_time_us"] * 1000), abs=1e-6
    )


def test_a_job_that_starts_after_the_other_has_finished_is_unaffected(tmp_path):
    """Job a runs two iterations from 0; b starts at 100 ms, after a has ended, on the same 2:1 spine."""
    data = spread(2.0)
    data["jobs"][0]["iterations"] = 2
    data["jobs"][1]["start_ms"] = 100.0
    result = _run(tmp_path, data)
    a, b = _job(result, "a"), _job(result, "b")
    assert a["iterations"][-1]["time_us"] < 100_000 / 2
    for job in (a, b):
        assert job["iteration_time_us"] == job["solo_iteration_time_us"]
        assert [i["time_us"] for i in job["iterations"]] == [i["time_us"] for i in job["solo_iterations"]]
    assert b["start_us"] == 100_000.0
    assert len(a["iterations"]) == 2 and len(b["iterations"]) == 1
    assert b["iteration_time_us"] == a["iterations"][0]["time_us"]  # the same job, the cluster its own
    assert result.iteration_time_us == pytest.approx(100_000 + b["iteration_time_us"], abs=0.001)
    assert result.shared_links  # the uplinks carried both jobs, at different times


def test_a_job_starting_midway_slows_only_the_iterations_it_overlaps(tmp_path):
    data = spread(2.0)
    data["jobs"][0]["iterations"] = 3
    result = _run(tmp_path, data)
    first = _job(result, "a")["iterations"]
    alone = _job(result, "a")["solo_iterations"]
    assert first[0]["time_us"] > alone[0]["time_us"]  # b reduces beside a's first iteration
    assert [i["time_us"] for i in first[1:]] == [i["time_us"] for i in alone[1:]]


@pytest.mark.parametrize("collectives", ["nccl", "ideal"])
def test_folded_equals_rank_by_rank_with_two_jobs(tmp_path, collectives):
    """Four-GPU nodes, NIC per GPU, 2:1 spine: job a TP2·DP4 across both leaves for two iterations,
    job b TP2·PP2·DP2 from 1 ms; folding leaves each job's classes apart and changes nothing."""
    data = two_leaves(2.0, [], collectives={"model": collectives})
    for group in data["cluster"]["node_groups"]:
        group["gpus_per_node"] = 4
    a = dp_job("a", {"x": [0], "y": [0]}, iterations=2)
    a["parallelism"] = {"tp": 2, "pp": 1, "dp": 4, "global_batch_size": 8}
    b = dp_job("b", {"x": [1], "y": [1]}, start_ms=1.0)
    b["parallelism"] = {"tp": 2, "pp": 2, "dp": 2, "global_batch_size": 4}
    data["jobs"] = [a, b]
    run_dir = pipeline.build_run_dir(parse_run_spec(data), tmp_path / "run").root
    folded = pipeline.execute(run_dir, "embedded", timeline="none")
    plain = pipeline.execute(run_dir, "embedded", timeline="none", fold=False)
    assert folded.meta["folding"]["rank_classes"] < folded.num_ranks  # it did fold
    assert folded.jobs == plain.jobs
    assert folded.ranks == plain.ranks
    assert folded.shared_links == plain.shared_links
    assert folded.iteration_time_us == plain.iteration_time_us
    assert folded.jobs[0]["slowdown"] > 1.0


def test_cluster_events_apply_to_every_job_and_folding_stays_exact(tmp_path):
    """A link event on the shared spine and a slowed GPU of job b: both jobs run under the events,
    alone as together, and the folded run still equals the rank-by-rank one."""
    data = spread(
        2.0,
        dynamics=[
            {"event": "link_rate", "kind": "uplink", "factor": 0.5, "start_ms": 5, "end_ms": 20},
            {"event": "device_slowdown", "node_group": "y", "node": 1, "factor": 0.5},
        ],
    )
    data["jobs"][0]["iterations"] = 2
    run_dir = pipeline.build_run_dir(parse_run_spec(data), tmp_path / "run").root
    folded = pipeline.execute(run_dir, "embedded", timeline="none")
    plain = pipeline.execute(run_dir, "embedded", timeline="none", fold=False)
    assert folded.jobs == plain.jobs and folded.ranks == plain.ranks
    calm = _run(tmp_path, spread(2.0), "calm")
    assert _job(folded, "b")["solo_iteration_time_us"] > _job(calm, "b")["solo_iteration_time_us"]  # slowed
    assert [e["event"] for e in folded.events] == ["link_rate", "device_slowdown"]


def test_run_iterations_overrides_every_jobs_count(tmp_path):
    result = _run(tmp_path, spread(1.0), iterations=3)
    assert [len(job["iterations"]) for job in result.jobs] == [3, 3]
