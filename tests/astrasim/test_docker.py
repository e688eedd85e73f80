"""The Docker path against a fake docker client: what is asked of the engine, and the failure cases.

The same path on a real engine: test_docker_engine.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import docker.errors
import pytest
import requests.exceptions

from astra_hetero.backends.base import create_backend
from astra_hetero.errors import BackendFailed, BackendUnavailable
from tests.astrasim.conftest import OUTPUTS, write_run_dir

IMAGE = "astra-hetero:test"


class FakeContainer:
    def __init__(self, output: bytes, exit_status: int, hang: bool, start_error: str | None) -> None:
        self.output, self.exit_status, self.hang, self.start_error = output, exit_status, hang, start_error
        self.events: list[str] = []

    def start(self):
        self.events.append("start")
        if self.start_error:
            raise docker.errors.APIError(self.start_error)

    def logs(self, stream, follow, stdout, stderr):
        assert stream and follow and stdout and stderr
        half = len(self.output) // 2
        return iter([self.output[:half], self.output[half:]])

    def wait(self, timeout=None):
        self.events.append(f"wait {timeout}")
        if self.hang:
            raise requests.exceptions.ReadTimeout("read timed out")
        return {"StatusCode": self.exit_status, "Error": None}

    def kill(self):
        self.events.append("kill")

    def remove(self, force=False):
        self.events.append(f"remove force={force}")


class FakeClient:
    """The part of docker.DockerClient the backend uses; records what it was asked to create."""

    def __init__(
        self,
        output: Path | None = None,
        exit_status: int = 0,
        hang: bool = False,
        start_error: str | None = None,
        images: dict[str, list[str]] | None = None,
    ) -> None:
        self.created: list[dict] = []
        self.container = FakeContainer(output.read_bytes() if output else b"", exit_status, hang, start_error)
        self.images = self
        self._images = (
            {IMAGE: ["PATH=/usr/bin", "ASTRA_SIM_BIN_DIR=/opt/astra-sim/bin"]} if images is None else images
        )
        self.containers = self

    def ping(self):
        return True

    def get(self, name):  # images.get
        if name not in self._images:
            raise docker.errors.ImageNotFound(f"No such image: {name}")
        return type("Image", (), {"attrs": {"Config": {"Env": self._images[name]}}})()

    def create(self, image, **options):  # containers.create
        self.created.append({"image": image, **options})
        return self.container


def run(tmp_path, backend="analytical-unaware", num_ranks=4, **client_options):
    client = FakeClient(**client_options)
    run_dir = write_run_dir(tmp_path / "run", num_ranks)
    output = create_backend(backend, docker_image=IMAGE, docker_client=client, timeout_s=60).run(run_dir)
    return output.result, client, run_dir


def test_container_sees_only_the_run_directory_runs_as_the_caller_and_is_removed(tmp_path):
    result, client, run_dir = run(
        tmp_path, output=OUTPUTS / "analytical_unaware_compute_plus_allreduce4_stdout.txt"
    )
    (created,) = client.created
    assert created["image"] == IMAGE
    assert created["volumes"] == {str(run_dir.resolve()): {"bind": "/astra-hetero/run", "mode": "rw"}}
    assert created["user"] == f"{os.getuid()}:{os.getgid()}"
    assert created["entrypoint"] == ["/opt/astra-sim/bin/AstraSim_Analytical_Congestion_Unaware"]
    assert created["command"] == [
        "--workload-configuration=/astra-hetero/run/workload/workload",
        "--system-configuration=/astra-hetero/run/analytical/system.json",
        "--remote-memory-configuration=/astra-hetero/run/analytical/remote_memory.json",
        "--network-configuration=/astra-hetero/run/analytical/network.yml",
        "--comm-group-configuration=/astra-hetero/run/workload/comm_groups.json",
    ]
    assert created["working_dir"] == "/astra-hetero/run/logs"
    assert client.container.events == ["start", "wait 60", "remove force=True"]
    assert result.iteration_time_us == pytest.approx(53.0)
    assert result.meta["docker_image"] == IMAGE
    assert (run_dir / "logs/analytical-unaware.log").read_text().count(" finished, ") == 4


def test_ns3_in_docker_runs_in_the_mounted_run_directory(tmp_path):
    _, client, _ = run(tmp_path, backend="ns3", output=OUTPUTS / "ns3_hetero_one100G_link_dcqcn_stdout.txt")
    (created,) = client.created
    assert created["working_dir"] == "/astra-hetero/run"
    assert created["entrypoint"] == ["/opt/astra-sim/bin/ns3.42-AstraSimNetwork-default"]
    logical = "--logical-topology-configuration=/astra-hetero/run/ns3/logical_topology.json"
    assert logical in created["command"]


def test_without_bin_dir_in_the_image_the_bare_name_is_used(tmp_path):
    _, client, _ = run(
        tmp_path,
        backend="analytical",
        num_ranks=8,
        images={IMAGE: ["PATH=/usr/bin"]},
        output=OUTPUTS / "analytical_aware_allreduce8_stdout.txt",
    )
    assert client.created[0]["entrypoint"] == ["AstraSim_Analytical_Congestion_Aware"]


def test_timeout_kills_and_removes_the_container_and_keeps_the_log(tmp_path):
    with pytest.raises(BackendFailed, match="timed out") as info:
        run(tmp_path, output=OUTPUTS / "FAIL_unknown_pg_name_abort_stdout.txt", hang=True)
    assert "communicator group 1 not found" in info.value.log_tail
    assert (tmp_path / "run/logs/analytical-unaware.log").is_file()
    assert not (tmp_path / "run/result.json").exists()


def test_missing_image_is_a_clear_error(tmp_path):
    with pytest.raises(BackendUnavailable, match="image 'astra-hetero:test' not found"):
        run(tmp_path, images={})


def test_binary_not_in_the_image_is_a_clear_error_and_the_container_is_removed(tmp_path):
    error = 'failed to create task: exec: "/opt/astra-sim/bin/X": stat: no such file or directory'
    with pytest.raises(BackendUnavailable, match="is not in image 'astra-hetero:test'"):
        run(tmp_path, start_error=error)


def test_unreachable_engine_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-such.sock")
    run_dir = write_run_dir(tmp_path / "run", 4)
    with pytest.raises(BackendUnavailable, match="Docker engine unreachable"):
        create_backend("analytical", docker_image=IMAGE).run(run_dir)
