"""A generated run directory through every ASTRA-sim backend, with a fake binary that checks its inputs.

The fake (see conftest) reads what the real binary would and prints a `finished` line per rank.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from astra_hetero.backends.base import create_backend
from astra_hetero.errors import BackendFailed
from astra_hetero.spec import parse_spec
from tests.astrasim.conftest import BINARIES, OUTPUTS, write_checking_binaries, write_fake_binary
from tests.conftest import make_spec_data


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    from astra_hetero.pipeline import build_run_dir

    return build_run_dir(parse_spec(make_spec_data()), tmp_path_factory.mktemp("gen") / "run").root


@pytest.fixture(scope="module")
def bin_dir(tmp_path_factory) -> Path:
    return write_checking_binaries(tmp_path_factory.mktemp("bin"))


@pytest.mark.parametrize("backend", list(BINARIES))
def test_every_backend_runs_a_generated_run_directory(run_dir, bin_dir, backend):
    result = create_backend(backend, bin_dir=str(bin_dir)).run(run_dir).result
    assert result.num_ranks == 16
    assert result.iteration_time_us == pytest.approx(1.015)
    assert [r.gpu for r in result.ranks] == ["h100-sxm"] * 8 + ["a100-80"] * 8
    for rank in result.ranks:
        busy_us = rank.compute_us + rank.exposed_comm_us
        assert busy_us + rank.idle_us == pytest.approx(result.iteration_time_us)
        assert rank.idle_us == pytest.approx(result.iteration_time_us - rank.finish_us)


def test_execute_writes_result_only_on_success_and_keeps_the_log(tmp_path, bin_dir):
    from astra_hetero.pipeline import build_run_dir, execute
    from astra_hetero.results.io import read_result

    run_dir = build_run_dir(parse_spec(make_spec_data()), tmp_path / "run").root
    result = execute(run_dir, "analytical-unaware", bin_dir=str(bin_dir))
    assert read_result(run_dir) == result
    assert (run_dir / "trace.json").is_file()

    before = {p.name: p.read_bytes() for p in (run_dir / "result.json", run_dir / "trace.json")}
    silent = write_fake_binary(
        tmp_path / "silent",
        BINARIES["analytical-unaware"],
        OUTPUTS / "FAIL_missing_comm_size_exit0_no_finish_stdout.txt",
    )
    with pytest.raises(BackendFailed, match="exited 0 but 0 of 16 ranks") as failed:
        execute(run_dir, "analytical-unaware", binary=str(silent))
    # The failed rerun leaves the previous result of these inputs as it was, and keeps its own log.
    assert {name: (run_dir / name).read_bytes() for name in before} == before
    assert "comm_size not found" in (run_dir / "logs/analytical-unaware.failed.log").read_text()
    assert "logs/analytical-unaware.failed.log" in str(failed.value)


def test_an_astrasim_run_of_traces_by_class_publishes_the_per_rank_files_it_needed(tmp_path, bin_dir):
    from astra_hetero.pipeline import build_run_dir, execute

    spec = parse_spec(make_spec_data())
    by_class = build_run_dir(spec, tmp_path / "classes").root
    per_rank = build_run_dir(spec, tmp_path / "per-rank", per_rank=True).root
    assert not list((by_class / "workload").glob("workload.*.et"))
    execute(by_class, "analytical-unaware", bin_dir=str(bin_dir))
    for rank in range(16):  # written from the class traces, as the per-rank generator writes them
        name = f"workload/workload.{rank}.et"
        assert (by_class / name).read_bytes() == (per_rank / name).read_bytes()
