"""Imported studies on the real ASTRA-sim binary; skipped unless ASTRA_SIM_BIN_DIR is set.

The real binary runs the imported directory with exactly the study's files; the embedded engine,
with its defaults, must agree within 2 % (it agrees to the cycle on these).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from astra_hetero.importer.pipeline import import_study
from astra_hetero.importer.study import StudyFiles
from astra_hetero.pipeline import execute
from tests.importer.studies import DATA, stg_study

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        not os.environ.get("ASTRA_SIM_BIN_DIR"),
        reason="set ASTRA_SIM_BIN_DIR to a directory holding ASTRA-sim binaries",
    ),
]
RING_4NPUS = "topology: [ Ring ]\nnpus_count: [ 4 ]\nbandwidth: [ 50.0 ]\nlatency: [ 500.0 ]\n"


def _both(run: Path) -> tuple[list[float], list[float]]:
    bin_dir = os.environ["ASTRA_SIM_BIN_DIR"]
    real = execute(run, "analytical-unaware", timeline="none", bin_dir=bin_dir)
    ours = execute(run, timeline="none")
    return [r.finish_us for r in real.ranks], [r.finish_us for r in ours.ranks]


def test_stg_study_on_real_astrasim_and_embedded(tmp_path):
    import_study(stg_study(tmp_path / "study"), tmp_path / "run")
    real, ours = _both(tmp_path / "run")
    assert real[0] == 12029.010 and real[15] == 7271.046  # the study's own numbers
    assert ours == pytest.approx(real, rel=0.02)


def test_microbenchmark_on_real_astrasim_and_embedded(tmp_path):
    from tests.importer.studies import SYSTEM

    (tmp_path / "network.yml").write_text(RING_4NPUS)
    (tmp_path / "system.json").write_text(__import__("json").dumps(SYSTEM))
    files = StudyFiles(
        str(DATA / "astrasim_studies/all_reduce_4npus_1MB/all_reduce"),
        tmp_path / "system.json",
        tmp_path / "network.yml",
    )
    import_study(files, tmp_path / "run")
    real, ours = _both(tmp_path / "run")
    assert real == [43.0] * 4 and ours == real


def test_compute_factor_overlay_on_real_astrasim_and_embedded(tmp_path):
    """Half the NPUs at half speed: the overlay writes their durations into the traces, so real
    ASTRA-sim runs the heterogeneous study too, and the two agree."""
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text('npu_groups:\n  - {npus: "8-15", compute_factor: 0.5}\n')
    import_study(stg_study(tmp_path / "study"), tmp_path / "run", overlay=overlay)
    real, ours = _both(tmp_path / "run")
    assert ours == pytest.approx(real, rel=0.02)
    assert max(real) > 12029.010 * 1.2  # the slow stage now sets the pace


def test_pytorch_converter_traces_on_real_astrasim_and_embedded(tmp_path):
    """The converter's traces less their METADATA node (ASTRA-sim 518bd51 aborts on it): host operators
    on the CPU beside the GPU's kernels, as ASTRA-sim runs them."""
    from tests.importer.pytorch_traces import convert, without_metadata
    from tests.importer.test_pytorch import study

    prefix = without_metadata(convert(tmp_path / "traces"), 2, tmp_path / "plain")
    import_study(study(tmp_path, prefix), tmp_path / "run")
    real, ours = _both(tmp_path / "run")
    assert ours == real
