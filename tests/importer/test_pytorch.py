"""Traces from PyTorch's Chakra converter (made by running mlc-chakra's converter, see
pytorch_traces.py): they import and run, host operators beside the GPU's kernels."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from astra_hetero.errors import RunDirError
from astra_hetero.importer.pipeline import import_study
from astra_hetero.importer.study import StudyFiles
from astra_hetero.pipeline import execute
from tests.importer.pytorch_traces import convert, without_metadata
from tests.importer.studies import SYSTEM

SWITCH = "topology: [ Switch ]\nnpus_count: [ {n} ]\nbandwidth: [ 100.0 ]\nlatency: [ 500.0 ]\n"


def study(root: Path, prefix: Path, num_ranks: int = 2) -> StudyFiles:
    (root / "network.yml").write_text(SWITCH.format(n=num_ranks))
    (root / "system.json").write_text(json.dumps(SYSTEM))
    return StudyFiles(str(prefix), root / "system.json", root / "network.yml")


def test_converter_traces_import_and_run(tmp_path):
    prefix = convert(tmp_path / "traces", layers=3, gemm_us=150)
    import_study(study(tmp_path, prefix), tmp_path / "run")
    result = execute(tmp_path / "run", timeline="none")
    # the GPU's compute is its kernels: 3 GEMMs of 150 µs; the host's aten::mm launches (12 µs, 13 on
    # rank 1) run on the CPU beside them, and the 4 MiB all-reduce hides under the GEMMs
    assert [r.compute_us for r in result.ranks] == [450.0, 450.0]
    assert [r.finish_us for r in result.ranks] == pytest.approx([12 + 450 + 0.001, 13 + 450 + 0.001])
    manifest = json.loads((tmp_path / "run/manifest.json").read_text())
    assert manifest["astrasim"]["comm_group_configuration"] is None


def test_process_groups_come_from_the_metadata_node(tmp_path):
    prefix = convert(tmp_path / "traces", num_ranks=4, groups={"1": [0, 1], "2": [2, 3]}, pg_name="1")
    with pytest.raises(
        RunDirError, match=r"pytorch\.2\.et: uses comm group 1, which .* defines without rank 2"
    ):
        import_study(study(tmp_path, prefix, 4), tmp_path / "bad")
    prefix = convert(tmp_path / "ok", num_ranks=4, groups={"1": [0, 1], "2": [2, 3]}, pg_name="rank")
    import_study(study(tmp_path, prefix, 4), tmp_path / "run")
    groups = json.loads((tmp_path / "run/workload/comm_groups.json").read_text())
    assert groups == {"1": [0, 1], "2": [2, 3]}
    assert (
        "METADATA"
        in json.loads((tmp_path / "run/import.json").read_text())["derived"]["workload/comm_groups.json"]
    )
    assert execute(tmp_path / "run", timeline="none").iteration_time_us > 0


def test_real_binaries_are_refused_where_astrasim_would_abort(tmp_path):
    prefix = convert(tmp_path / "traces")
    import_study(study(tmp_path, prefix), tmp_path / "run")
    with pytest.raises(RunDirError, match=r"METADATA node .* ASTRA-sim 518bd51 aborts"):
        execute(tmp_path / "run", "analytical-unaware", timeline="none")


def test_without_the_metadata_node_the_same_run(tmp_path):
    prefix = convert(tmp_path / "traces")
    import_study(study(tmp_path, prefix), tmp_path / "with")
    plain = without_metadata(prefix, 2, tmp_path / "plain")
    import_study(study(tmp_path, plain), tmp_path / "without")
    with_metadata = execute(tmp_path / "with", timeline="none")
    assert execute(tmp_path / "without", timeline="none").ranks == with_metadata.ranks
