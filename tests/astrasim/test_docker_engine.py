"""docker/Dockerfile and the Docker backend on a real engine, with ASTRA-sim from a local build.

Needs a reachable Docker engine and ASTRA_SIM_BIN_DIR (the binaries of a local ASTRA-sim build);
skips otherwise. The test lays those binaries out as ASTRA-sim's own image does (under /app/astra-sim,
with the shared libraries they link that are not the C library's, ns-3's from its build tree) on a
small base image, builds docker/Dockerfile on top of that, and runs the backends in it:

- ASTRA_HETERO_TEST_BASE_IMAGE: the base image (default debian:bookworm-slim; its C library must be
  at least as new as the build machine's). Pulled if the engine does not have it; skipped if it can't.
- The image build uses the network for Python packages (and for Python itself if the base lacks it):
  HTTP(S)_PROXY / NO_PROXY, PIP_INDEX_URL / PIP_EXTRA_INDEX_URL (http(s) only) and the CA bundle this
  machine's pip uses (PIP_CERT, pip's `cert` setting, SSL_CERT_FILE) are passed on as build arguments.

The images are removed afterwards.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from astra_hetero.backends.astrasim.command import FLAVORS
from tests.astrasim.test_integration import SMALL_SPEC

pytestmark = pytest.mark.integration

REPO = Path(__file__).parents[2]
ASTRA_SIM_ROOT = "/app/astra-sim"  # where ASTRA-sim's image keeps its checkout (docker/Dockerfile's default)
LAYOUT = {  # binary name -> directory under ASTRA_SIM_ROOT, as ASTRA-sim's build scripts leave them
    FLAVORS["analytical"].binary_name: "build/astra_analytical/build/bin",
    FLAVORS["analytical-unaware"].binary_name: "build/astra_analytical/build/bin",
    FLAVORS["ns3"].binary_name: "extern/network_backend/ns-3/build/scratch",
}
NS3_LIB_DIR = "extern/network_backend/ns-3/build/lib"
# The C library's own objects come from the base image; everything else a binary links is copied.
C_LIBRARY = re.compile(r"^(ld-linux.*|libc|libm|libdl|libpthread|librt|libutil|libresolv)\.so")
CA_IN_CONTEXT = "docker/ca.pem"  # git-ignored


def _engine():
    import docker

    try:
        client = docker.from_env()
        client.ping()
    except Exception as exc:  # any failure to reach an engine means: skip
        pytest.skip(f"no Docker engine reachable ({type(exc).__name__})")
    return client


def _bin_dir() -> Path:
    value = os.environ.get("ASTRA_SIM_BIN_DIR")
    if not value:
        pytest.skip("set ASTRA_SIM_BIN_DIR to a local ASTRA-sim build's binaries")
    bin_dir = Path(value)
    if not any(os.access(bin_dir / name, os.X_OK) for name in LAYOUT):
        pytest.skip(f"no ASTRA-sim binary in {bin_dir}")
    return bin_dir


def _base_image(client) -> str:
    import docker.errors

    name = os.environ.get("ASTRA_HETERO_TEST_BASE_IMAGE", "debian:bookworm-slim")
    try:
        client.images.get(name)
    except docker.errors.ImageNotFound:
        try:
            client.images.pull(name)
        except docker.errors.APIError as exc:
            pytest.skip(f"base image {name} is not on this engine and cannot be pulled ({exc})")
    return name


def linked_libraries(binary: Path) -> dict[str, Path]:
    """soname -> file for every shared library `binary` loads, except the C library's own."""
    out = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, check=True).stdout
    found = {}
    for line in out.splitlines():
        match = re.match(r"\s*(\S+) => (/\S+)", line)
        if match and not C_LIBRARY.match(match.group(1)):
            found[match.group(1)] = Path(match.group(2))
    return found


def astra_sim_context(bin_dir: Path, context: Path, base_image: str) -> list[str]:
    """A build context that puts the binaries of `bin_dir` where ASTRA-sim's image has them; returns
    the binary names it holds."""
    root = context / "astra-sim"
    names = [name for name in LAYOUT if os.access(bin_dir / name, os.X_OK)]
    libraries: dict[str, Path] = {}
    for name in names:
        binary = (bin_dir / name).resolve()  # the real file, in its build tree
        target = root / LAYOUT[name] / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(binary, target)
        libraries.update(linked_libraries(binary))
    for soname, path in libraries.items():
        in_ns3_tree = path.parent.name == "lib" and path.parent.parent.name == "build" and "ns-3" in str(path)
        where = root / NS3_LIB_DIR if in_ns3_tree else context / "lib"
        where.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, where / soname)  # follows the soname link to the library itself
    (context / "lib").mkdir(exist_ok=True)
    (context / "Dockerfile").write_text(
        f"FROM {base_image}\n"
        f"COPY astra-sim/ {ASTRA_SIM_ROOT}/\n"
        "COPY lib/ /opt/astra-sim-libs/\n"
        f"ENV LD_LIBRARY_PATH={ASTRA_SIM_ROOT}/{NS3_LIB_DIR}:/opt/astra-sim-libs\n"
        f"WORKDIR {ASTRA_SIM_ROOT}\n"
    )
    return names


def pip_ca_bundle() -> Path | None:
    """The CA bundle this machine's pip verifies with, if it is told one."""
    config = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True)
    settings = re.findall(r"^\S*\.cert='(.*)'$", config.stdout, flags=re.MULTILINE)
    candidates = [os.environ.get("PIP_CERT"), *settings, os.environ.get("SSL_CERT_FILE")]
    return next((Path(c) for c in candidates if c and Path(c).is_file()), None)


def build_arguments(astra_sim_image: str, ca_bundle: Path | None) -> dict[str, str]:
    args = {"ASTRA_SIM_IMAGE": astra_sim_image}
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy"):
        if os.environ.get(name):
            args[name] = os.environ[name]
    for name in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_TRUSTED_HOST"):
        urls = [
            u
            for u in os.environ.get(name, "").split()
            if name == "PIP_TRUSTED_HOST" or u.startswith(("http://", "https://"))
        ]  # file:// indexes are this machine's only
        if urls:
            args[name] = " ".join(urls)
    if ca_bundle is not None:
        args["CA_CERT"] = CA_IN_CONTEXT
    return args


def checkout_copy(into: Path) -> Path:
    """The checkout without what .dockerignore leaves out, so that the test never writes into it."""
    patterns = [
        line.strip().removeprefix("**/")
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    return Path(shutil.copytree(REPO, into, ignore=shutil.ignore_patterns(*patterns)))


def _build(client, context: Path, tag: str, dockerfile: str = "Dockerfile", **buildargs: str):
    import docker.errors

    try:
        client.images.build(
            path=str(context), dockerfile=dockerfile, tag=tag, buildargs=buildargs, rm=True, forcerm=True
        )
    except docker.errors.BuildError as exc:
        tail = "".join(str(chunk.get("stream", chunk.get("error", ""))) for chunk in exc.build_log)[-3000:]
        pytest.fail(f"building {tag} failed: {exc}\n{tail}")
    return tag


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    """(client, astra-hetero image, binary names in it); both images are removed afterwards."""
    client = _engine()
    bin_dir = _bin_dir()
    base = _base_image(client)
    suffix = uuid.uuid4().hex[:8]
    astra_sim_tag, hetero_tag = f"astra-hetero-test/astra-sim:{suffix}", f"astra-hetero-test/app:{suffix}"
    made = []
    try:
        context = tmp_path_factory.mktemp("astra-sim-image")
        names = astra_sim_context(bin_dir, context, base)
        made.append(_build(client, context, astra_sim_tag))
        checkout = checkout_copy(tmp_path_factory.mktemp("context") / "astra-hetero")
        ca_bundle = pip_ca_bundle()
        if ca_bundle is not None:
            shutil.copy2(ca_bundle, checkout / CA_IN_CONTEXT)
        made.append(
            _build(
                client, checkout, hetero_tag, "docker/Dockerfile", **build_arguments(astra_sim_tag, ca_bundle)
            )
        )
        yield client, hetero_tag, names
    finally:
        for tag in reversed(made):
            client.images.remove(tag, force=True)


class RecordingContainers:
    """The SDK's `containers`, recording how each created container is configured (before it is gone)."""

    def __init__(self, containers) -> None:
        self._containers = containers
        self.configured: list[dict] = []

    def create(self, *args, **kwargs):
        container = self._containers.create(*args, **kwargs)
        container.reload()
        self.configured.append(container.attrs)
        return container


class RecordingClient:
    def __init__(self, client) -> None:
        self.ping, self.images = client.ping, client.images
        self.containers = RecordingContainers(client.containers)


def _run_dir(root: Path) -> Path:
    from astra_hetero.pipeline import build_run_dir
    from astra_hetero.spec import parse_spec

    return build_run_dir(parse_spec(SMALL_SPEC), root).root


@pytest.mark.parametrize("backend", ["analytical", "analytical-unaware", "ns3"])
def test_backend_in_the_image_mounts_only_the_run_directory_as_the_caller_and_leaves_nothing(
    images, tmp_path, backend
):
    import docker.errors

    from astra_hetero.backends.base import create_backend

    client, image, names = images
    if FLAVORS[backend].binary_name not in names:
        pytest.skip(f"{FLAVORS[backend].binary_name} is not in ASTRA_SIM_BIN_DIR")
    run_dir = _run_dir(tmp_path / "run")
    recording = RecordingClient(client)
    in_docker = create_backend(backend, docker_image=image, docker_client=recording, timeout_s=1800)
    result = in_docker.run(run_dir).result

    (attrs,) = recording.containers.configured
    mounts = [(m["Type"], m["Source"], m["Destination"], m["RW"]) for m in attrs["Mounts"]]
    assert mounts == [("bind", str(run_dir.resolve()), "/astra-hetero/run", True)]
    assert attrs["Config"]["User"] == f"{os.getuid()}:{os.getgid()}"
    with pytest.raises(docker.errors.NotFound):
        client.containers.get(attrs["Id"])
    written = [p for p in run_dir.rglob("*")]
    assert any(p.parent.name == "log" for p in written)  # ASTRA-sim's own log copy, written in the container
    assert {p.stat().st_uid for p in written} == {os.getuid()}
    assert result.num_ranks == 8 and result.iteration_time_us > 0
    # The mixed spec's network was flattened for the analytical binaries, and the result says so.
    assert result.approximations or backend == "ns3"

    native = Path(os.environ["ASTRA_SIM_BIN_DIR"]) / FLAVORS[backend].binary_name
    if os.access(native, os.X_OK):  # the same binary natively: the very same simulated times
        twin = _run_dir(tmp_path / "native")
        assert create_backend(backend, timeout_s=1800).run(twin).result.ranks == result.ranks


def test_everything_runs_inside_the_container(images, tmp_path):
    client, image, names = images
    if FLAVORS["analytical-unaware"].binary_name not in names:
        pytest.skip("the analytical-unaware binary is not in ASTRA_SIM_BIN_DIR")
    import yaml

    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(SMALL_SPEC))
    output = client.containers.run(
        image,
        ["astra-hetero", "run", "runs/spec.yaml", "-o", "runs/out", "--backend", "analytical-unaware"],
        user=f"{os.getuid()}:{os.getgid()}",
        volumes={str(tmp_path): {"bind": "/work/runs", "mode": "rw"}},
        remove=True,
        stderr=True,
    ).decode()
    from astra_hetero.results.io import read_result

    result = read_result(tmp_path / "out")
    assert result.backend == "analytical-unaware" and result.num_ranks == 8
    assert (tmp_path / "out/result.json").stat().st_uid == os.getuid()
    (approximation,) = result.approximations
    assert approximation in output.splitlines()  # the CLI summary shows it, whole, on one line
    assert "error" not in output.lower()
