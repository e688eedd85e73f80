"""The native path end to end, with fake binaries that print real captured ASTRA-sim output."""

from __future__ import annotations

import json
import time

import pytest

from astra_hetero.backends.base import create_backend
from astra_hetero.errors import BackendFailed, BackendUnavailable, RunDirError
from tests.astrasim.conftest import OUTPUTS, calls_of, write_fake_binary, write_run_dir

AWARE = "AstraSim_Analytical_Congestion_Aware"
UNAWARE = "AstraSim_Analytical_Congestion_Unaware"
NS3 = "ns3.42-AstraSimNetwork-default"


def test_analytical_run_gives_a_result_labelled_from_the_manifest(tmp_path):
    run_dir = write_run_dir(tmp_path / "run", 4)
    binary = write_fake_binary(
        tmp_path / "bin", UNAWARE, OUTPUTS / "analytical_unaware_compute_plus_allreduce4_stdout.txt"
    )
    result = create_backend("analytical-unaware", bin_dir=str(binary.parent)).run(run_dir).result

    assert result.backend == "analytical-unaware"
    assert result.iteration_time_us == pytest.approx(53.0)
    assert [(r.gpu, r.stage) for r in result.ranks] == [("h100-sxm", 0)] * 2 + [("a100-80", 1)] * 2
    for rank in result.ranks:
        assert (rank.compute_us, rank.exposed_comm_us, rank.idle_us) == pytest.approx((10.0, 43.0, 0.0))
    assert "nanoseconds" in result.time_unit_note
    assert result.exit_status == 0 and result.warnings == ()
    (call,) = calls_of(binary)
    assert call["cwd"] == str((run_dir / "logs").resolve())
    assert result.meta["argv"] == call["argv"][:1] + call["argv"][1:]
    log = (run_dir / "logs/analytical-unaware.log").read_text()
    assert log.count(" finished, ") == 4
    assert not (run_dir / "result.json").exists()  # the caller writes it


def test_ns3_runs_in_the_run_directory_and_idle_is_time_after_a_rank_finished(tmp_path):
    run_dir = write_run_dir(tmp_path / "run", 4)
    binary = write_fake_binary(tmp_path / "bin", NS3, OUTPUTS / "ns3_hetero_one100G_link_dcqcn_stdout.txt")
    result = create_backend("ns3", binary=str(binary)).run(run_dir).result

    (call,) = calls_of(binary)
    assert call["cwd"] == str(run_dir.resolve())  # the ns-3 config's paths are relative to it
    assert result.iteration_time_us == pytest.approx(391.248)
    assert [r.idle_us for r in result.ranks] == pytest.approx([0.0, 8.262, 68.397, 27.437])


def test_stderr_is_kept_in_the_log_and_shown_in_the_error(tmp_path):
    run_dir = write_run_dir(tmp_path / "run", 4)
    binary = write_fake_binary(
        tmp_path / "bin",
        AWARE,
        OUTPUTS / "FAIL_no_global_metadata_abort_stdout.txt",
        exit_status=3,
        stderr="fatal: something on stderr\n",
    )
    with pytest.raises(BackendFailed, match="exited with status 3") as info:
        create_backend("analytical", bin_dir=str(binary.parent)).run(run_dir)
    assert "fatal: something on stderr" in info.value.log_tail
    assert "fatal: something on stderr" in (run_dir / "logs/analytical.log").read_text()
    assert not (run_dir / "result.json").exists()


def test_abort_after_every_rank_finished_is_a_result_with_the_status_as_a_warning(tmp_path):
    run_dir = write_run_dir(tmp_path / "run", 8)
    binary = write_fake_binary(
        tmp_path / "bin", AWARE, OUTPUTS / "analytical_aware_allreduce8_stdout.txt", exit_status=134
    )
    result = create_backend("analytical", bin_dir=str(binary.parent)).run(run_dir).result
    assert result.exit_status == 134
    assert result.iteration_time_us == pytest.approx(57.426)
    assert "status 134 after every rank had finished" in result.warnings[0]


def test_timeout_kills_the_process_group_keeps_the_log_and_gives_no_result(tmp_path):
    run_dir = write_run_dir(tmp_path / "run", 16)
    binary = write_fake_binary(
        tmp_path / "bin", NS3, OUTPUTS / "FAIL_unknown_pg_name_abort_stdout.txt", sleep_s=120
    )
    with pytest.raises(BackendFailed, match="timed out after") as info:
        create_backend("ns3", bin_dir=str(binary.parent), timeout_s=0.5).run(run_dir)
    assert "communicator group 1 not found" in info.value.log_tail
    child = int(binary.with_name(binary.name + ".calls.child").read_text())
    assert _ends_soon(child), "the binary's child process outlived the timeout"
    assert "communicator group 1 not found" in (run_dir / "logs/ns3.log").read_text()
    assert not (run_dir / "result.json").exists()


def _ends_soon(pid: int, patience_s: float = 10.0) -> bool:
    """SIGKILL is delivered asynchronously: give the kernel a moment. A zombie counts as ended."""
    deadline = time.monotonic() + patience_s
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                if stat.read().split()[2] == "Z":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.01)
    return False


def test_missing_binary_is_unavailable_and_leaves_no_log(tmp_path, monkeypatch):
    monkeypatch.delenv("ASTRA_SIM_BIN_DIR", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    run_dir = write_run_dir(tmp_path / "run", 4)
    with pytest.raises(BackendUnavailable, match="AstraSim_Analytical_Congestion_Aware"):
        create_backend("analytical").run(run_dir)
    assert not (run_dir / "logs").exists()


def test_a_missing_trace_is_named_before_anything_runs(tmp_path):
    run_dir = write_run_dir(tmp_path / "run", 4)
    (run_dir / "workload/workload.2.et").unlink()
    binary = write_fake_binary(tmp_path / "bin", AWARE, OUTPUTS / "analytical_aware_allreduce8_stdout.txt")
    with pytest.raises(RunDirError, match=r"workload\.2\.et"):
        create_backend("analytical", binary=str(binary)).run(run_dir)
    assert calls_of(binary) == []


def test_a_non_positive_timeout_is_rejected():
    with pytest.raises(BackendUnavailable, match="timeout_s must be positive"):
        create_backend("ns3", timeout_s=0)


def test_the_run_directorys_approximation_note_for_the_network_file_run_becomes_a_warning(tmp_path):
    run_dir = write_run_dir(tmp_path / "run", 4)
    notes = {
        "analytical/network.yml": "ASTRA-sim simplified this cluster: two-D note.",
        "analytical/network_1d.yml": "ASTRA-sim simplified this cluster: one-D note.",
    }
    (run_dir / "analytical/approximations.json").write_text(json.dumps(notes))
    binary = write_fake_binary(
        tmp_path / "bin", UNAWARE, OUTPUTS / "analytical_unaware_compute_plus_allreduce4_stdout.txt"
    )
    result = create_backend("analytical-unaware", bin_dir=str(binary.parent)).run(run_dir).result
    assert result.warnings == ("approximation: ASTRA-sim simplified this cluster: two-D note.",)
    assert result.approximations == result.warnings


def test_a_malformed_approximation_note_fails_before_the_simulator_runs(tmp_path):
    run_dir = write_run_dir(tmp_path / "run", 4)
    (run_dir / "analytical/approximations.json").write_text(json.dumps({"analytical/network.yml": 3}))
    binary = write_fake_binary(tmp_path / "bin", UNAWARE)
    with pytest.raises(RunDirError, match="approximations.json"):
        create_backend("analytical-unaware", bin_dir=str(binary.parent)).run(run_dir)
    assert calls_of(binary) == []
