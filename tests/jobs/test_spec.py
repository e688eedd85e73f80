"""A spec of several jobs: who owns which GPUs, each job checked as a spec of its own, and bad input
named by job and field (exit code 2)."""

from __future__ import annotations

import copy
import re

import pytest
import yaml

from astra_hetero.cli import main as cli
from astra_hetero.errors import SpecError
from astra_hetero.jobs.load import parse_run_spec
from astra_hetero.jobs.specs import place_jobs
from astra_hetero.spec import parse_spec
from tests.conftest import TINY_MODEL, node_group
from tests.jobs.specs import dp_job, spread


def _four_nodes(*jobs):
    """Four 4-GPU H100 nodes on one leaf pair."""
    return {
        "name": "four",
        "cluster": {"node_groups": [node_group("h100", "h100-sxm", count=4)]},
        "network": {"topology": "spine_leaf", "nodes_per_leaf": 2},
        "jobs": list(jobs),
    }


def _job(name, tp=4, pp=1, dp=2, **extra):
    return {
        "name": name,
        "model": copy.deepcopy(TINY_MODEL),
        "parallelism": {"tp": tp, "pp": pp, "dp": dp, "global_batch_size": 8},
        **extra,
    }


def _error(data) -> SpecError:
    with pytest.raises(SpecError) as info:
        parse_run_spec(data)
    return info.value


def test_jobs_own_their_named_nodes_and_take_free_nodes_in_cluster_order():
    shared = parse_run_spec(_four_nodes(_job("a"), _job("b", nodes={"h100": [0, 2]})))
    placed = {job.name: job.ranks for job in place_jobs(shared)}
    assert placed["b"] == (*range(0, 4), *range(8, 12))
    assert placed["a"] == (*range(4, 8), *range(12, 16))  # the free nodes 1 and 3


def test_a_job_on_part_of_nodes_and_idle_gpus():
    part = [{"node": 0, "gpus": [0, 1]}, {"node": 1, "gpus": [0, 1]}]
    shared = parse_run_spec(_four_nodes(_job("a", tp=2), _job("b", tp=2, nodes={"h100": part})))
    placed = {job.name: job for job in place_jobs(shared)}
    assert placed["b"].ranks == (0, 1, 4, 5)
    assert placed["b"].spec.cluster.node_groups[0].gpus_per_node == 2
    assert placed["a"].ranks == tuple(range(8, 12))  # the first whole free node: 2 (3 stays idle)


@pytest.mark.parametrize(
    ("jobs", "field", "reason"),
    [
        (  # overlapping GPUs
            [_job("a", nodes={"h100": [0, 1]}), _job("b", nodes={"h100": [1, 2]})],
            r"jobs\[1\]\.nodes\.h100\[0\]",
            r"job 'b': GPU 0 of node 1 of node group 'h100' already belongs to job 'a' "
            r"\(jobs\[0\]\.nodes\.h100\[1\]\)",
        ),
        (  # a job larger than its nodes
            [_job("a", dp=4, nodes={"h100": [0, 1]})],
            r"jobs\[0\]\.parallelism",
            r"job 'a' needs tp·pp·dp = 4·1·4 = 16 GPUs but its nodes \(jobs\[0\]\.nodes\) hold 8",
        ),
        (  # larger than the nodes left free for it
            [_job("a", nodes={"h100": [0, 1, 2]}), _job("b")],
            r"jobs\[1\]\.parallelism",
            r"job 'b' needs .* = 8 GPUs but the free nodes hold 4 \(job 'a' holds the rest\)",
        ),
        (  # a TP group that cannot stay inside the job's part of a node
            [_job("a", dp=1, nodes={"h100": [{"node": 0, "gpus": [0, 1]}, {"node": 1, "gpus": [0, 1]}]})],
            r"jobs\[0\]\.nodes\.h100",
            r"job 'a': tp=4 must divide gpus_per_node=2 so that every TP group stays inside one node",
        ),
        ([_job("a", nodes={"gpu": [0]})], r"jobs\[0\]\.nodes\.gpu", "unknown node group"),
        ([_job("a", nodes={"h100": [7]})], r"jobs\[0\]\.nodes\.h100\[0\]", r"node 7 outside"),
        ([_job("a"), _job("a")], r"jobs\[1\]\.name", "names must be unique"),
        (  # a TP group across the job's nodes
            [_job("a", tp=8, dp=1, nodes={"h100": [0, 1]})],
            r"jobs\[0\]\.nodes\.h100",
            r"job 'a': tp=8 must divide gpus_per_node=4",
        ),
        (  # the same without `nodes:`: the cluster's node size
            [_job("a", tp=8, dp=1)],
            r"cluster\.node_groups\[0\]\.gpus_per_node",
            r"job 'a': tp=8 must divide gpus_per_node=4",
        ),
        ([_job("a", tp=3)], r"jobs\[0\]\.parallelism\.tp", r"job 'a': tp=3 does not divide model\.num_heads"),
        (
            [_job("a", dp=1, nodes={"h100": [0, 1]})],
            r"jobs\[0\]\.parallelism",
            r"uses .* 4 of the 8 GPUs of its nodes .* jobs\[0\]\.mapping\.allow_idle_gpus",
        ),
    ],
)
def test_bad_input_names_the_job_and_the_field(jobs, field, reason):
    error = _error(_four_nodes(*jobs))
    assert re.fullmatch(field, error.field), error
    assert re.search(reason, error.reason), error


def test_single_job_sections_at_the_top_are_refused():
    data = _four_nodes(_job("a"))
    data["model"] = TINY_MODEL
    assert _error(data).field == "model"


def test_a_single_job_spec_is_unchanged(spec_data):
    assert parse_run_spec(copy.deepcopy(spec_data)) == parse_spec(spec_data)


def test_a_single_job_command_refuses_jobs_naming_the_key():
    with pytest.raises(SpecError, match=r"^jobs: a spec of several jobs"):
        parse_spec(spread())


@pytest.mark.parametrize(
    ("jobs", "says"),
    [
        ([dp_job("a", {"x": [0, 1]}), dp_job("b", {"x": [1], "y": [0]})], "jobs[1].nodes.x[0]: job 'b'"),
        ([dp_job("a", {"x": [0]})], "jobs[0].parallelism: job 'a' needs"),
    ],
)
def test_the_cli_exits_2_naming_the_job_and_field(tmp_path, capsys, jobs, says):
    data = spread()
    data["jobs"] = jobs
    path = tmp_path / "shared.yaml"
    path.write_text(yaml.safe_dump(data))
    assert cli.main(["run", str(path), "-o", str(tmp_path / "run")]) == 2
    assert says in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_the_cli_exits_2_for_an_unknown_job_in_search_job(tmp_path, capsys):
    data = spread()
    data["search"] = {"job": "nobody"}
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(data))
    assert cli.main(["plan", str(path), "-o", str(tmp_path / "out"), "--no-cache", "--quiet"]) == 2
    assert "search.job: no job is called 'nobody'" in capsys.readouterr().err
