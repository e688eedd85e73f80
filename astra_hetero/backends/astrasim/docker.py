"""Run an ASTRA-sim command inside a container of a user-named image (docker SDK, no shell).

Only the run directory is bind-mounted, at `CONTAINER_ROOT`; the container runs as the calling
uid:gid so that files it writes stay the user's; it is removed afterwards, its output kept in the log.
The client is injectable: tests pass an object with the same few methods.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path, PurePosixPath
from typing import Any

import docker.errors  # also binds `docker` (docker.from_env)
import requests.exceptions

from astra_hetero.backends.astrasim.command import Command
from astra_hetero.backends.astrasim.locate import BIN_DIR_ENV
from astra_hetero.backends.astrasim.process import ProcessOutcome, log_header, open_log
from astra_hetero.errors import BackendFailed, BackendUnavailable

CONTAINER_ROOT = PurePosixPath("/astra-hetero/run")

# How long to wait for the container's output to drain after it stopped.
LOG_DRAIN_S = 30.0

_NOT_FOUND_HINTS = ("executable file not found", "no such file or directory")


def connect(client: Any | None = None) -> Any:
    """The given client, or one from the environment (DOCKER_HOST, ...) that answered a ping."""
    try:
        client = client if client is not None else docker.from_env()
        client.ping()
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        raise BackendUnavailable(
            f"Docker engine unreachable ({exc}); start Docker, check DOCKER_HOST, or run natively "
            f"with --bin-dir / {BIN_DIR_ENV}"
        ) from None
    return client


class DockerRunner:
    """Runs commands in containers of `image`; `executable(name)` says where a binary is inside it."""

    def __init__(
        self, image: str, client: Any | None = None, binary: str | None = None, bin_dir: str | None = None
    ) -> None:
        self.image = image
        self.client = connect(client)
        self.binary = binary
        self.bin_dir = bin_dir
        try:
            self.image_attrs: dict[str, Any] = dict(self.client.images.get(image).attrs or {})
            self.image_env = _env_of(self.image_attrs)
        except docker.errors.ImageNotFound:
            raise BackendUnavailable(
                f"Docker image {image!r} not found on this engine; build it (see docker/README.md) "
                "or pull it first"
            ) from None

    def executable(self, name: str) -> str:
        """Explicit path > --bin-dir > the image's ASTRA_SIM_BIN_DIR > the bare name (image's PATH)."""
        if self.binary:
            return self.binary
        directory = self.bin_dir or self.image_env.get(BIN_DIR_ENV)
        return str(PurePosixPath(directory) / name) if directory else name

    def run(self, command: Command, run_dir: Path, log_path: Path, timeout_s: float | None) -> ProcessOutcome:
        started = time.monotonic()
        container = self._start(command, run_dir)
        try:
            with open_log(log_path) as log:
                log.write(log_header(command).encode())
                copier = threading.Thread(target=_copy_logs, args=(container, log), daemon=True)
                copier.start()
                exit_status, timed_out = _wait(container, timeout_s)
                copier.join(LOG_DRAIN_S)
        finally:
            _remove(container)
        return ProcessOutcome(exit_status, timed_out, time.monotonic() - started)

    def _start(self, command: Command, run_dir: Path) -> Any:
        try:
            container = self.client.containers.create(
                self.image,
                entrypoint=[command.argv[0]],
                command=list(command.argv[1:]),
                volumes={str(Path(run_dir).resolve()): {"bind": str(CONTAINER_ROOT), "mode": "rw"}},
                working_dir=str(command.cwd),
                user=f"{os.getuid()}:{os.getgid()}",
                detach=True,
            )
        except docker.errors.APIError as exc:
            raise BackendFailed(f"cannot create a container of {self.image!r}: {exc}") from None
        try:
            container.start()
        except docker.errors.APIError as exc:
            _remove(container)
            if any(hint in str(exc).lower() for hint in _NOT_FOUND_HINTS):
                raise BackendUnavailable(
                    f"{command.argv[0]} is not in image {self.image!r}; give its path inside the image with "
                    f"--binary or --bin-dir, or set {BIN_DIR_ENV} in the image"
                ) from None
            raise BackendFailed(f"cannot start a container of {self.image!r}: {exc}") from None
        return container


def _env_of(attrs: dict[str, Any]) -> dict[str, str]:
    entries = (attrs.get("Config") or {}).get("Env") or []
    return dict(entry.split("=", 1) for entry in entries if "=" in entry)


def _copy_logs(container: Any, log: Any) -> None:
    for chunk in container.logs(stream=True, follow=True, stdout=True, stderr=True):
        log.write(chunk)
        log.flush()


def _wait(container: Any, timeout_s: float | None) -> tuple[int | None, bool]:
    """(exit status, timed out); a container still running at the timeout is killed."""
    try:
        return int(container.wait(timeout=timeout_s)["StatusCode"]), False
    except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError) as exc:
        if timeout_s is None:  # no timeout was set: the engine itself went away
            raise BackendFailed(f"lost the Docker engine while waiting for the container: {exc}") from None
        container.kill()
        return None, True


def _remove(container: Any) -> None:
    try:
        container.remove(force=True)
    except docker.errors.NotFound:
        pass  # already gone (e.g. removed by the engine)
