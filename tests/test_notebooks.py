"""The Python API examples in examples/notebooks/ run as plain scripts, from any directory, and print
what they promise."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

NOTEBOOKS = Path(__file__).parents[1] / "examples/notebooks"
PROMISES = {
    "simulate_and_compare.py": ("per iteration", "tokens/s", "by GPU type"),
    "search_a_plan.py": ("#1 tp4", "best plan", "the spec's own plan"),
}


def test_every_notebook_is_listed():
    assert sorted(p.name for p in NOTEBOOKS.glob("*.py")) == sorted(PROMISES)


@pytest.mark.parametrize("name", sorted(PROMISES))
def test_a_notebook_runs_as_a_script(tmp_path, name):
    done = subprocess.run(
        [sys.executable, str(NOTEBOOKS / name)], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    for promised in PROMISES[name]:
        assert promised in done.stdout
    assert list(tmp_path.iterdir()) == []  # nothing written where it ran
