"""The network part built in a forked process beside the workload: the same files as a sequential
build, and an error in the child is raised as the sequential build raises it."""

from __future__ import annotations

import filecmp
import os

import pytest

from astra_hetero import pipeline
from astra_hetero.errors import SpecError
from astra_hetero.side_build import SideBuild, can_fork
from astra_hetero.spec import parse_spec
from tests.conftest import make_spec_data

pytestmark = pytest.mark.skipif(not can_fork(), reason="needs the fork start method")


def _files(root):
    return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, files in os.walk(root) for f in files)


def test_a_side_build_writes_what_a_sequential_build_writes(tmp_path, monkeypatch):
    spec = parse_spec(make_spec_data())
    pipeline.build_run_dir(spec, tmp_path / "plain")
    monkeypatch.setattr(pipeline, "SIDE_BUILD_MIN_GPUS", 1)
    pipeline.build_run_dir(spec, tmp_path / "side")
    plain, side = _files(tmp_path / "plain"), _files(tmp_path / "side")
    assert plain == side and not any(".side-build" in f for f in side)
    ours = [f for f in plain if f != ".astra-hetero.json"]
    _, mismatch, errors = filecmp.cmpfiles(tmp_path / "plain", tmp_path / "side", ours, shallow=False)
    assert not mismatch and not errors


def test_a_failing_side_build_is_built_again_here_and_raises_as_usual(tmp_path):
    calls = []

    def writer(path):
        calls.append(os.getpid())
        raise SpecError("network.num_spines", "too many")

    side = SideBuild(writer, tmp_path)
    with pytest.raises(SpecError, match="too many"):
        side.finish(tmp_path)
    assert calls == [os.getpid()]  # the child's attempt left no trace here; this process raised
    assert not (tmp_path / ".side-build").exists()


def test_a_side_build_moves_its_entries_into_place(tmp_path):
    side = SideBuild(
        lambda path: (path / "ns3").mkdir() or (path / "ns3" / "x.txt").write_text("x"), tmp_path
    )
    side.finish(tmp_path)
    assert (tmp_path / "ns3" / "x.txt").read_text() == "x"
    assert os.listdir(tmp_path) == ["ns3"]
