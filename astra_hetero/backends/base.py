"""The backend interface and its string-keyed registry.

A backend takes a run directory and returns a `RunResult`. The embedded engine and the ASTRA-sim
drivers are peers behind this interface; the CLI only ever calls `create_backend(name, **options)`.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from astra_hetero.errors import BackendUnavailable
from astra_hetero.results.model import RunOutput


@runtime_checkable
class Backend(Protocol):
    name: str

    def run(self, run_dir: Path) -> RunOutput:
        """Simulate `run_dir` (read-only apart from `logs/`); return its result and timeline spans.

        Raise BackendUnavailable / BackendFailed / RunDirError on failure; never return a partial result.
        The caller writes `result.json` and `trace.json`.
        """
        ...


BackendFactory = Callable[..., Backend]

# name -> "module:factory"; modules are imported on demand so that a backend's optional
# dependencies (docker SDK, ray) are only needed when that backend is asked for.
_REGISTRY: dict[str, str] = {
    "embedded": "astra_hetero.backends.embedded.backend:EmbeddedBackend",
    "analytical": "astra_hetero.backends.astrasim.backend:analytical_aware",
    "analytical-unaware": "astra_hetero.backends.astrasim.backend:analytical_unaware",
    "ns3": "astra_hetero.backends.astrasim.backend:ns3",
}


def backend_names() -> list[str]:
    return list(_REGISTRY)


def create_backend(name: str, **options: Any) -> Backend:
    target = _REGISTRY.get(name)
    if target is None:
        raise BackendUnavailable(f"unknown backend {name!r}; valid: {', '.join(_REGISTRY)}")
    module_name, factory_name = target.split(":")
    factory: BackendFactory = getattr(import_module(module_name), factory_name)
    return factory(**options)
