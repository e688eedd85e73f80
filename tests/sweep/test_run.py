"""Running sweeps: one run directory and one CSV row per point; a failing point does not stop the rest."""

from __future__ import annotations

import csv
import sys

import pytest
import yaml

from astra_hetero.cli.main import main
from astra_hetero.errors import BackendUnavailable
from astra_hetero.results.io import read_result
from astra_hetero.sweep.plan import plan_sweep
from astra_hetero.sweep.run import run_sweep
from tests.astrasim.conftest import write_checking_binaries
from tests.conftest import make_spec_data

# tp=3 cannot tile 16 GPUs with pp=2, dp=4: that point fails, the other runs.
GRID = {"parallelism.tp": [2, 3], "cluster.node_groups[1].nic.gbps": [100]}
# Points run through the congestion-unaware backend with a fake binary that checks its inputs, so
# these tests need no ASTRA-sim build.
BACKEND = "analytical-unaware"


@pytest.fixture
def options(tmp_path) -> dict[str, str]:
    return {"bin_dir": str(write_checking_binaries(tmp_path / "bin"))}


def rows(path):
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def check_outcomes(out_dir, outcomes):
    assert [o.ok for o in outcomes] == [True, False], [o.error for o in outcomes]
    good, bad = outcomes
    assert "parallelism" in bad.error
    assert not (out_dir / bad.name / "result.json").exists()
    table = rows(out_dir / "sweep.csv")
    assert [row["point"] for row in table] == [good.name, bad.name]
    assert [row["status"] for row in table] == ["ok", "failed"]
    assert [row["parallelism.tp"] for row in table] == ["2", "3"]
    result = read_result(out_dir / good.name)
    assert float(table[0]["iteration_time_us"]) == pytest.approx(result.iteration_time_us, abs=1e-3)
    assert int(table[0]["num_ranks"]) == result.num_ranks == 16
    assert table[1]["iteration_time_us"] == "" and "parallelism" in table[1]["error"]


@pytest.mark.parametrize("jobs", [1, 2])
def test_local_sweep_runs_every_point_and_writes_one_row_each(tmp_path, options, jobs):
    sweep = plan_sweep({"base": make_spec_data(), "grid": GRID}, tmp_path)
    outcomes = run_sweep(sweep, tmp_path / "out", BACKEND, options, jobs=jobs)
    check_outcomes(tmp_path / "out", outcomes)


def sweep_on_the_fake_binary(tmp_path, options) -> list[str]:
    """`sweep` over tmp_path/sweep.yaml into tmp_path/out with the ASTRA-sim stand-in."""
    out = str(tmp_path / "out")
    return [
        "sweep",
        str(tmp_path / "sweep.yaml"),
        "-o",
        out,
        "--quiet",
        "--backend",
        BACKEND,
        "--bin-dir",
        options["bin_dir"],
    ]


def test_cli_prints_a_table_and_exits_1_when_a_point_failed(tmp_path, options, capsys):
    sweep_data = {"base": make_spec_data(), "name": "tp", "grid": GRID}
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(sweep_data))
    argv = sweep_on_the_fake_binary(tmp_path, options)
    assert main(argv) == 1
    printed = capsys.readouterr().out
    assert f"tp: 2 points, backend {BACKEND}" in printed
    assert "failed" in printed and "sweep.csv" in printed
    assert len(rows(tmp_path / "out/sweep.csv")) == 2


def test_ray_sweep_on_a_local_ray_instance(tmp_path, options):
    ray = pytest.importorskip("ray", reason="ray is an optional extra (pip install 'astra-hetero[ray]')")
    context = ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        sweep = plan_sweep({"base": make_spec_data(), "grid": GRID}, tmp_path)
        outcomes = run_sweep(
            sweep, tmp_path / "out", BACKEND, options, ray_address=context.address_info["address"]
        )
    finally:
        ray.shutdown()
    check_outcomes(tmp_path / "out", outcomes)


def test_ray_missing_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # makes `import ray` fail as if not installed
    sweep = plan_sweep({"base": make_spec_data(), "grid": GRID}, tmp_path)
    with pytest.raises(BackendUnavailable, match=r"astra-hetero\[ray\]"):
        run_sweep(sweep, tmp_path / "out", "embedded", ray_address="auto")


def test_jobs_must_be_positive(tmp_path):
    sweep = plan_sweep({"base": make_spec_data(), "grid": GRID}, tmp_path)
    with pytest.raises(BackendUnavailable, match="--jobs"):
        run_sweep(sweep, tmp_path / "out", "embedded", jobs=0)


def test_default_backend_is_embedded_and_faster_nics_never_slow_the_iteration(tmp_path):
    sweep_data = {"base": make_spec_data(), "grid": {"cluster.node_groups[1].nic.gbps": [100, 200, 400]}}
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(sweep_data))
    argv = ["sweep", str(tmp_path / "sweep.yaml"), "-o", str(tmp_path / "out"), "--quiet", "-j", "2"]
    assert main(argv) == 0
    table = rows(tmp_path / "out/sweep.csv")
    assert [row["cluster.node_groups[1].nic.gbps"] for row in table] == ["100", "200", "400"]
    times = [float(row["iteration_time_us"]) for row in table]
    assert times[0] >= times[1] >= times[2]
    assert read_result(tmp_path / "out" / table[0]["point"]).backend == "embedded"


def test_cli_prints_each_points_approximation_once_whole(tmp_path, options, capsys):
    # Two points on the mixed cluster, differing in the A100 NICs: two different approximation lines.
    grid = {"cluster.node_groups[1].nic.gbps": [100, 200]}
    sweep_data = {"base": make_spec_data(), "name": "nic", "grid": grid}
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(sweep_data))
    argv = sweep_on_the_fake_binary(tmp_path, options)
    assert main(argv) == 0
    printed = capsys.readouterr().out.splitlines()
    lines = [line for line in printed if line.startswith("approximation: ")]
    assert len(lines) == 2
    for line in lines:
        point = line.rsplit("[", 1)[1].rstrip("]")
        (expected,) = read_result(tmp_path / "out" / point).approximations
        assert line == f"{expected} [{point}]"
