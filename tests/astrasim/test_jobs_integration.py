"""Two jobs in one run directory on the real ASTRA-sim binaries; skipped unless ASTRA_SIM_BIN_DIR is set.

To ASTRA-sim the jobs are ranks with disjoint comm groups. Where the network is exact for its
analytical (congestion-unaware) backend — each job inside its own nodes, nothing shared beyond them —
the embedded engine under ASTRA-sim's rules (ideal collectives, one op in flight) must agree with it
job by job, together and alone.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from astra_hetero import pipeline
from astra_hetero.backends.astrasim.command import FLAVORS
from astra_hetero.errors import RunDirError
from astra_hetero.jobs.load import parse_run_spec
from tests.conftest import node_group

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        not os.environ.get("ASTRA_SIM_BIN_DIR"),
        reason="set ASTRA_SIM_BIN_DIR to a directory holding ASTRA-sim binaries",
    ),
]


def _job(name: str, nodes: list[int], pp: int, dp: int) -> dict:
    return {
        "name": name,
        "model": {"preset": "gpt3-13b", "num_layers": 8},
        "parallelism": {"tp": 8, "pp": pp, "dp": dp, "global_batch_size": 4, "sequence_parallel": True},
        "nodes": {"h100": nodes},
    }


# Four 8-GPU H100 nodes on one leaf: job a TP8·PP2 on nodes 0-1, job b TP8·DP2 on nodes 2-3.
TWO_JOBS = {
    "name": "two-jobs",
    "cluster": {"node_groups": [node_group("h100", "h100-sxm", count=4, gpus_per_node=8)]},
    "network": {"topology": "spine_leaf", "nodes_per_leaf": 4},
    "collectives": {"model": "ideal", "max_in_flight_per_rank": 1},
    "jobs": [_job("a", [0, 1], pp=2, dp=1), _job("b", [2, 3], pp=1, dp=2)],
}


def _binary(backend: str) -> None:
    binary = Path(os.environ["ASTRA_SIM_BIN_DIR"]) / FLAVORS[backend].binary_name
    if not os.access(binary, os.X_OK):
        pytest.skip(f"{binary} is not an executable file")


def test_analytical_runs_two_jobs_and_agrees_with_the_embedded_engine(tmp_path):
    _binary("analytical-unaware")
    ours = pipeline.build_run_dir(parse_run_spec(TWO_JOBS), tmp_path / "embedded").root
    theirs = shutil.copytree(ours, tmp_path / "analytical")
    embedded = pipeline.execute(ours, "embedded", timeline="none")
    analytical = pipeline.execute(theirs, "analytical-unaware", timeline="none", timeout_s=1800)
    assert [j["name"] for j in analytical.jobs] == ["a", "b"]
    for mine, real in zip(embedded.jobs, analytical.jobs, strict=True):
        difference = real["iteration_time_us"] / mine["iteration_time_us"] - 1
        solo = real["solo_iteration_time_us"] / mine["solo_iteration_time_us"] - 1
        print(
            f"\njob {mine['name']}: embedded {mine['iteration_time_us']:.1f} us, analytical-unaware "
            f"{real['iteration_time_us']:.1f} us ({difference:+.2%}); alone {solo:+.2%}"
        )
        assert abs(difference) <= 0.02 and abs(solo) <= 0.02
        assert real["slowdown"] == pytest.approx(1.0, abs=1e-6)  # nothing shared: no interference
    assert (theirs / "logs" / "analytical-unaware.solo-0.log").is_file()


def test_astra_sim_refuses_a_job_that_starts_later(tmp_path):
    _binary("analytical-unaware")
    data = {**TWO_JOBS, "jobs": [TWO_JOBS["jobs"][0], {**TWO_JOBS["jobs"][1], "start_ms": 5.0}]}
    run_dir = pipeline.build_run_dir(parse_run_spec(data), tmp_path / "run").root
    with pytest.raises(RunDirError, match=r"jobs\[1\] \('b'\) starts at 5 ms"):
        pipeline.execute(run_dir, "analytical-unaware", timeline="none")
