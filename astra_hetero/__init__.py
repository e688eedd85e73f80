"""astra-hetero: heterogeneity-aware LLM-training simulation on ASTRA-sim and ns-3.

The Python API (see docs/python-api.md): `load_spec`, `simulate`, `plan`, and their `Result` and
`Plan`. They are imported on first use, so that `import astra_hetero` (and the command line's start)
stays light.
"""

from __future__ import annotations

from typing import Any

from astra_hetero.version import __version__

_API = ("load_spec", "simulate", "plan", "Result", "Plan")
__all__ = ["__version__", *_API]


def __getattr__(name: str) -> Any:
    if name in _API:
        from astra_hetero import api

        return getattr(api, name)
    raise AttributeError(f"module 'astra_hetero' has no attribute {name!r}")
