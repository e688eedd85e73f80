"""The version the tool records (provenance, --version, Docker tags) is the one the package is built with."""

from __future__ import annotations

from pathlib import Path

import pytest

import astra_hetero
from astra_hetero.version import __version__


def test_the_recorded_version_is_pyprojects():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    project = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"]
    assert __version__ == project["version"] == astra_hetero.__version__
