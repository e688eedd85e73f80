"""docker/build.sh on a real engine: ASTRA-sim's image built from a source tree in one command, its
binaries running ASTRA-sim's own example inputs, and `run --docker` giving the native result.

Needs a reachable Docker engine and ASTRA_SIM_SRC (an ASTRA-sim checkout with submodules at the commits
of third_party/README.md, yaml-cpp included or found as build.sh describes); skips otherwise. Nothing is
pulled or fetched: the base image is ASTRA_HETERO_TEST_BASE_IMAGE (default debian:bookworm), which must
already be on the engine. The first build takes a while (docker/README.md gives the time measured);
later ones reuse the engine's layer cache. The images made are removed afterwards (cached layers stay).

The comparison with native binaries needs ASTRA_SIM_BIN_DIR as well (skipped per backend without one).
ASTRA_HETERO_TEST_IMAGE_TAG=TAG tests the images astra-sim:TAG and astra-hetero:TAG that build.sh made
earlier instead of building (and keeps them); the one-command build is then not what is tested.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import uuid
from pathlib import Path

import pytest

from astra_hetero.backends.astrasim.command import FLAVORS
from tests.astrasim.test_docker_engine import pip_ca_bundle
from tests.astrasim.test_integration import SMALL_SPEC

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REPO = Path(__file__).parents[2]
COMPONENTS = (
    "astra-sim",
    "chakra",
    "astra-network-analytical",
    "astra-network-ns3",
    "astra-memory-analytical",
    "fmt",
    "spdlog",
    "yaml-cpp",
)
ROOT = "/app/astra-sim"
FINISHED = re.compile(r"sys\[(\d+)\],? finished, (\d+) cycles")


def docker(*args: str, check: bool = True, **options) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=check, **options)


def _source() -> Path:
    value = os.environ.get("ASTRA_SIM_SRC")
    if not value:
        pytest.skip("set ASTRA_SIM_SRC to an ASTRA-sim checkout with submodules")
    if not (Path(value) / "extern/network_backend/ns-3/ns3").is_file():
        pytest.skip(f"ASTRA_SIM_SRC={value} is not an ASTRA-sim checkout with submodules")
    return Path(value)


def _engine() -> None:
    try:
        docker("info")
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("no Docker engine reachable")


@pytest.fixture(scope="module")
def images():
    """(astra-sim image, astra-hetero image) built by build.sh with one command; removed afterwards."""
    source = _source()
    _engine()
    given = os.environ.get("ASTRA_HETERO_TEST_IMAGE_TAG")
    if given:
        for image in (f"astra-sim:{given}", f"astra-hetero:{given}"):
            if docker("image", "inspect", image, check=False).returncode != 0:
                pytest.skip(f"ASTRA_HETERO_TEST_IMAGE_TAG={given}: no image {image}")
        yield f"astra-sim:{given}", f"astra-hetero:{given}"
        return
    base = os.environ.get("ASTRA_HETERO_TEST_BASE_IMAGE", "debian:bookworm")
    if docker("image", "inspect", base, check=False).returncode != 0:
        pytest.skip(f"base image {base} is not on this engine (nothing is pulled; see docker/README.md)")
    tag = f"test-{uuid.uuid4().hex[:8]}"
    command = [str(REPO / "docker/build.sh"), "--astra-sim-src", str(source), "--tag", tag, "--base", base]
    ca_bundle = pip_ca_bundle()
    if ca_bundle is not None:
        command += ["--ca-cert", str(ca_bundle)]
    try:
        built = subprocess.run(command, capture_output=True, text=True)
        if built.returncode != 0:
            pytest.fail(
                f"docker/build.sh failed ({built.returncode}):\n{(built.stdout + built.stderr)[-4000:]}"
            )
        yield f"astra-sim:{tag}", f"astra-hetero:{tag}"
    finally:
        for image in (f"astra-hetero:{tag}", f"astra-sim:{tag}"):
            docker("image", "rm", image, check=False)


def labels(image: str) -> dict[str, str]:
    return json.loads(docker("image", "inspect", "--format", "{{json .Config.Labels}}", image).stdout) or {}


def test_both_images_name_every_components_commit(images):
    astra_sim, hetero = images
    for image in images:
        found = labels(image)
        for component in COMPONENTS:
            value = found[f"org.astra-hetero.component.{component}"]
            assert value == "unknown" or re.fullmatch(r"[0-9a-f]{40}", value), (image, component, value)
    source = _source()
    if (source / ".git").exists() or (source / "SOURCE_COMMITS").is_file():
        assert labels(astra_sim)["org.astra-hetero.component.astra-sim"] != "unknown"
    assert labels(hetero)["org.astra-hetero.astra-sim-image"] == astra_sim


def finish_cycles(output: str) -> dict[int, int]:
    return {int(rank): int(cycles) for rank, cycles in FINISHED.findall(output)}


@pytest.mark.parametrize(
    ("binary", "network"),
    [
        ("AstraSim_Analytical_Congestion_Aware", "HGX-H100-validated.yml"),
        ("AstraSim_Analytical_Congestion_Unaware", "Ring_8npus.yml"),
    ],
)
def test_the_analytical_binaries_run_astra_sims_own_all_reduce_sample(images, binary, network):
    examples = f"{ROOT}/examples"
    command = (
        f"$ASTRA_SIM_BIN_DIR/{binary}"
        f" --workload-configuration={examples}/workload/microbenchmarks/all_reduce/8npus_1MB/all_reduce"
        f" --system-configuration={examples}/system/native_collectives/HGX-H100-validated.json"
        f" --network-configuration={examples}/network/analytical/{network}"
        f" --remote-memory-configuration={examples}/remote_memory/analytical/no_memory_expansion.json"
    )
    ran = docker("run", "--rm", "-u", "12345:12345", images[0], "bash", "-c", command, timeout=600)
    cycles = finish_cycles(ran.stdout + ran.stderr)
    assert sorted(cycles) == list(range(8))
    # an all-reduce ends together on every NPU
    assert len(set(cycles.values())) == 1 and next(iter(cycles.values())) > 0


def test_the_ns3_binary_runs_astra_sims_own_all_gather_sample_as_any_user(images):
    """ASTRA-sim's ns-3 run script, as an unprivileged user: its outputs go to scratch/output."""
    script = f"{ROOT}/examples/run_scripts/ns3/Ring_allgather_16npus.sh"
    ran = docker("run", "--rm", "-u", "12345:12345", images[0], "bash", script, check=False, timeout=1200)
    output = ran.stdout + ran.stderr
    assert ran.returncode == 0, output[-3000:]
    cycles = finish_cycles(output)
    assert sorted(cycles) == list(range(16)) and min(cycles.values()) > 0


@pytest.mark.parametrize("backend", ["analytical", "analytical-unaware", "ns3"])
def test_run_docker_on_a_generated_run_directory_equals_the_native_binary(images, tmp_path, backend):
    from astra_hetero.pipeline import build_run_dir, execute
    from astra_hetero.spec import parse_spec

    bin_dir = os.environ.get("ASTRA_SIM_BIN_DIR")
    if not bin_dir or not os.access(Path(bin_dir) / FLAVORS[backend].binary_name, os.X_OK):
        pytest.skip(f"no native {FLAVORS[backend].binary_name} in ASTRA_SIM_BIN_DIR to compare with")
    spec = parse_spec(SMALL_SPEC)
    native = execute(build_run_dir(spec, tmp_path / "native").root, backend, timeline="none", bin_dir=bin_dir)
    in_docker = execute(
        build_run_dir(spec, tmp_path / "docker").root, backend, timeline="none", docker_image=images[1]
    )
    assert in_docker.iteration_time_us == native.iteration_time_us
    assert [r.finish_us for r in in_docker.ranks] == [r.finish_us for r in native.ranks]
    docker_record = in_docker.meta["provenance"]["backend"]["docker"]
    assert docker_record["image"] == images[1] and docker_record["id"].startswith("sha256:")
    assert (
        docker_record["labels"]["org.astra-hetero.component.astra-sim"]
        == labels(images[1])["org.astra-hetero.component.astra-sim"]
    )


def test_a_reduced_experiment_runs_and_checks_inside_the_image(images, tmp_path):
    """docker/README.md's walk-through: the study inside the container, the results in a host directory
    owned by the caller, checked against the experiments list shipped in the image."""
    out = tmp_path / "runs"
    out.mkdir()
    user = f"{os.getuid()}:{os.getgid()}"
    study = "/opt/astra-hetero/src/examples/studies/heterogeneity_impact.yaml"
    ran = docker(
        "run", "--rm", "-u", user, "-v", f"{out}:/work/runs", images[1],
        "astra-hetero", "study", study, "-o", "runs/E1", "--reduced", "--check", "--quiet",
        check=False, timeout=900,
    )  # fmt: skip
    assert ran.returncode == 0, (ran.stdout + ran.stderr)[-3000:]
    assert "FAIL" not in ran.stdout and "PASS" in ran.stdout
    assert (out / "E1/results.csv").stat().st_uid == os.getuid()
    record = json.loads((out / "E1/provenance.json").read_text())
    assert (
        record["environment"]["image_components"]["astra-sim"]
        == labels(images[1])["org.astra-hetero.component.astra-sim"]
    )
