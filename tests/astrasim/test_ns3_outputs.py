"""ns-3's flow-completion and PFC files, read into per-run figures."""

from __future__ import annotations

from pathlib import Path

import pytest

from astra_hetero.backends.astrasim.ns3_outputs import read_ns3_outputs
from astra_hetero.errors import RunDirError

DATA = Path(__file__).parent.parent / "data" / "ns3_outputs"


def run_dir(tmp_path, fct: str | None, pfc: str | None = None) -> Path:
    (tmp_path / "ns3").mkdir()
    if fct is not None:
        (tmp_path / "ns3/fct.txt").write_text(fct)
    if pfc is not None:
        (tmp_path / "ns3/pfc.txt").write_text(pfc)
    return tmp_path


def test_flow_slowdowns_from_a_real_flow_file(tmp_path):
    text = (DATA / "fct_8gpu_h100_a100.txt").read_text()
    flows = [line.split() for line in text.splitlines()]
    stats = read_ns3_outputs(run_dir(tmp_path, text, ""))
    sizes = [int(f[4]) for f in flows]
    slowdowns = [int(f[6]) / int(f[7]) for f in flows]
    assert (stats.num_flows, stats.total_bytes, stats.pfc_pauses) == (12, sum(sizes), 0)
    assert stats.mean_slowdown == pytest.approx(
        sum(s * x for s, x in zip(sizes, slowdowns, strict=True)) / sum(sizes)
    )
    assert stats.p99_slowdown == max(slowdowns)  # 12 flows: the 99th percentile is the largest
    assert 1.5 < stats.mean_slowdown < 2  # half the bytes crossed the NICs at twice their standalone time


def test_pfc_pauses_count_the_pause_frames_not_the_resumes(tmp_path):
    # ns-3 `get_pfc`: time node node_type if_index type (1 pause, 0 resume)
    pfc = "1000 19 1 3 1\n1800 19 1 3 0\n2500 14 0 1 1\n"
    stats = read_ns3_outputs(run_dir(tmp_path, "0b000001 0b000101 10000 100 1000 0 2000 1000\n", pfc))
    assert stats.pfc_pauses == 2


def test_no_flow_file_means_another_backend_ran(tmp_path):
    assert read_ns3_outputs(run_dir(tmp_path, None)) is None


@pytest.mark.parametrize(
    ("fct", "pfc", "name"),
    [
        ("0b000001 0b000101 10000\n", None, "fct.txt:1"),
        ("", "1000 19 1 3 2\n", "pfc.txt:1"),
    ],
)
def test_malformed_lines_name_the_file_and_line(tmp_path, fct, pfc, name):
    with pytest.raises(RunDirError) as error:
        read_ns3_outputs(run_dir(tmp_path, fct, pfc))
    assert name in str(error.value)
