"""The shipped examples run end to end on the embedded backend and tell the heterogeneity story."""

from __future__ import annotations

import json
from pathlib import Path
from statistics import mean

import pytest

from astra_hetero.cli.main import main
from astra_hetero.results.io import read_result

EXAMPLES = Path(__file__).parents[1] / "examples"
# The 1024-GPU example is exercised by benchmarks/ (it takes tens of seconds); every other runs here.
SMALL = ["gpt3_13b_16xh100", "llama65b_mixed_32gpu", "llama2_70b_h100_l40s", "dynamics_nic_flap"]


@pytest.fixture(scope="module")
def gpt3_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("gpt3")
    results = {}
    for name in ("gpt3_175b_128gpu_h100", "gpt3_175b_128gpu_mixed", "gpt3_175b_128gpu_mixed_auto"):
        assert main(["run", str(EXAMPLES / f"{name}.yaml"), "-o", str(root / name), "--quiet"]) == 0
        results[name] = read_result(root / name)
    return results


@pytest.mark.parametrize("name", SMALL)
def test_example_runs_and_accounts_for_every_rank(tmp_path, name):
    out = tmp_path / name
    assert main(["run", str(EXAMPLES / f"{name}.yaml"), "-o", str(out), "--quiet"]) == 0
    result = read_result(out)
    manifest = json.loads((out / "manifest.json").read_text())
    assert [r.rank for r in result.ranks] == list(range(manifest["num_ranks"]))
    for rank in result.ranks:
        assert rank.compute_us > 0
        assert rank.compute_us + rank.exposed_comm_us + rank.idle_us == pytest.approx(
            result.iteration_time_us, rel=1e-6
        )
    timeline = json.loads((out / "trace.json").read_text())
    assert timeline["traceEvents"]


def test_mixed_cluster_is_slower_than_its_all_h100_twin_with_idle_on_the_fast_ranks(gpt3_runs):
    twin, mixed = gpt3_runs["gpt3_175b_128gpu_h100"], gpt3_runs["gpt3_175b_128gpu_mixed"]
    assert mixed.iteration_time_us > twin.iteration_time_us
    idle = {gpu: mean(r.idle_us for r in mixed.ranks if r.gpu == gpu) for gpu in ("h100-sxm", "a100-80")}
    assert idle["h100-sxm"] > idle["a100-80"]


def test_capability_aware_partition_recovers_part_of_the_loss(gpt3_runs):
    twin = gpt3_runs["gpt3_175b_128gpu_h100"].iteration_time_us
    uniform = gpt3_runs["gpt3_175b_128gpu_mixed"].iteration_time_us
    auto = gpt3_runs["gpt3_175b_128gpu_mixed_auto"].iteration_time_us
    assert twin < auto < uniform


def test_the_nic_flap_example_slows_the_iterations_its_events_overlap_and_recovers(tmp_path):
    out = tmp_path / "flap"
    assert main(["run", str(EXAMPLES / "dynamics_nic_flap.yaml"), "-o", str(out), "--quiet"]) == 0
    times = [it["time_us"] for it in read_result(out).iterations]
    steady = times[-1]
    assert len(times) == 10 and times[1] == pytest.approx(steady)  # events 0-1 end inside iteration 0
    assert times[0] > 1.5 * steady  # a NIC of the slowest group down, then at a quarter rate
    assert times[2] > steady and times[5] > steady  # background traffic; the throttled A100 node
