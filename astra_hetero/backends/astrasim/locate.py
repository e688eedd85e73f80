"""Find an ASTRA-sim binary on this machine; never build one.

Search order: an explicit path (`binary`), a directory option (`bin_dir`), the environment variable
`ASTRA_SIM_BIN_DIR`, then `PATH`. When nothing matches, the error lists every place that was tried.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from astra_hetero.errors import BackendUnavailable

BIN_DIR_ENV = "ASTRA_SIM_BIN_DIR"


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def locate_binary(
    name: str,
    binary: str | None = None,
    bin_dir: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> Path:
    """Return the absolute path of the binary called `name`.

    An explicit `binary` is authoritative: if it is not an executable file, the search stops there
    rather than silently falling back to some other build.
    """
    environ = os.environ if environ is None else environ
    if binary is not None:
        path = Path(binary).expanduser()
        if _executable(path):
            return path.resolve()
        raise BackendUnavailable(f"--binary {binary}: not an executable file")
    tried: list[str] = []
    for label, directory in (("--bin-dir", bin_dir), (f"${BIN_DIR_ENV}", environ.get(BIN_DIR_ENV))):
        if not directory:
            tried.append(f"{label} (not set)")
            continue
        candidate = Path(directory).expanduser() / name
        if _executable(candidate):
            return candidate.resolve()
        tried.append(f"{label}: {candidate} (not an executable file)")
    found = shutil.which(name, path=environ.get("PATH", ""))
    if found:
        return Path(found).resolve()
    tried.append("PATH (no match)")
    raise BackendUnavailable(
        f"ASTRA-sim binary {name!r} not found; looked in: "
        + "; ".join(tried)
        + f". Point astra-hetero at a build with --binary, --bin-dir or {BIN_DIR_ENV}, or use --docker IMAGE"
    )
