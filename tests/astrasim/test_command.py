"""Command lines for each binary, native and as seen inside a container."""

from __future__ import annotations

import json
from pathlib import PurePosixPath

import pytest

from astra_hetero.backends.astrasim.command import FLAVORS, build_command
from astra_hetero.errors import RunDirError
from tests.astrasim.conftest import write_run_dir


def arguments(argv) -> dict[str, str]:
    return dict(arg[2:].split("=", 1) for arg in argv[1:])


@pytest.mark.parametrize(
    ("backend", "network", "system", "cwd"),
    [
        ("analytical", "analytical/network_1d.yml", "analytical/system_1d.json", "logs"),
        ("analytical-unaware", "analytical/network.yml", "analytical/system.json", "logs"),
        ("ns3", "ns3/config.txt", "analytical/system.json", ""),
    ],
)
@pytest.mark.parametrize("root", [None, PurePosixPath("/astra-hetero/run")])
def test_each_backend_gets_its_own_files(tmp_path, backend, network, system, cwd, root):
    run_dir = write_run_dir(tmp_path / "run", 4)
    command = build_command(FLAVORS[backend], run_dir, "/bin/astra", root)
    base = root or run_dir.resolve()
    expected = {
        "workload-configuration": f"{base}/workload/workload",
        "system-configuration": f"{base}/{system}",
        "remote-memory-configuration": f"{base}/analytical/remote_memory.json",
        "network-configuration": f"{base}/{network}",
        "comm-group-configuration": f"{base}/workload/comm_groups.json",
    }
    if backend == "ns3":
        expected["logical-topology-configuration"] = f"{base}/ns3/logical_topology.json"
    assert command.argv[0] == "/bin/astra"
    assert arguments(command.argv) == expected
    assert command.cwd == (base / cwd if cwd else base)


def test_ns3_takes_the_system_file_whose_dimensions_match_its_logical_topology(tmp_path):
    run_dir = write_run_dir(tmp_path / "run", 8, logical_dims=(4, 2))
    (run_dir / "ns3/logical_topology.json").write_text(json.dumps({"logical-dims": ["8"]}))
    command = build_command(FLAVORS["ns3"], run_dir, "ns3")
    assert arguments(command.argv)["system-configuration"].endswith("analytical/system_1d.json")


def test_ns3_without_a_matching_system_file_is_a_run_dir_error(tmp_path):
    run_dir = write_run_dir(tmp_path / "run", 8)
    (run_dir / "ns3/logical_topology.json").write_text(json.dumps({"logical-dims": ["2", "2", "2"]}))
    with pytest.raises(RunDirError, match="3 logical dimension"):
        build_command(FLAVORS["ns3"], run_dir, "ns3")


def test_no_comm_groups_uses_the_documented_literal_empty(tmp_path):
    run_dir = write_run_dir(tmp_path / "run", 4)
    (run_dir / "workload/comm_groups.json").write_text("{}")
    command = build_command(FLAVORS["analytical"], run_dir, "x")
    assert arguments(command.argv)["comm-group-configuration"] == "empty"


@pytest.mark.parametrize(
    "missing", ["analytical/network_1d.yml", "analytical/remote_memory.json", "workload/comm_groups.json"]
)
def test_a_missing_input_file_is_named(tmp_path, missing):
    run_dir = write_run_dir(tmp_path / "run", 4)
    (run_dir / missing).unlink()
    with pytest.raises(RunDirError, match=missing):
        build_command(FLAVORS["analytical"], run_dir, "x")
