"""An ns-3 study: its config relocated to the run directory's copies, run by the embedded engine under
ASTRA-sim's system layer with ns-3's link model, and by real ns-3 with exactly its files."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from astra_hetero.errors import RunDirError
from astra_hetero.importer.pipeline import import_study
from astra_hetero.importer.study import StudyFiles
from astra_hetero.pipeline import execute
from tests.importer.studies import DATA, SYSTEM

CONFIG = """ENABLE_QCN 1
PACKET_PAYLOAD_SIZE 1000
TOPOLOGY_FILE topo/topology.txt
FLOW_FILE flow.txt
TRACE_FILE trace.txt
TRACE_OUTPUT_FILE out/mix.tr
FCT_OUTPUT_FILE out/fct.txt
PFC_OUTPUT_FILE out/pfc.txt
QLEN_MON_FILE out/qlen.txt
QLEN_MON_START 0
QLEN_MON_END 20000
SIMULATOR_STOP_TIME 40000000000000.00
CC_MODE 1
ALPHA_RESUME_INTERVAL 1
RATE_DECREASE_INTERVAL 4
CLAMP_TARGET_RATE 0
RP_TIMER 900
EWMA_GAIN 0.00390625
FAST_RECOVERY_TIMES 1
RATE_AI 50Mb/s
RATE_HAI 100Mb/s
MIN_RATE 100Mb/s
DCTCP_RATE_AI 1000Mb/s
ERROR_RATE_PER_LINK 0.0000
L2_CHUNK_SIZE 4000
L2_ACK_INTERVAL 1
L2_BACK_TO_ZERO 0
HAS_WIN 1
GLOBAL_T 0
VAR_WIN 1
FAST_REACT 1
U_TARGET 0.95
MI_THRESH 0
INT_MULTI 1
MULTI_RATE 0
SAMPLE_FEEDBACK 0
PINT_LOG_BASE 1.05
PINT_PROB 1.0
NIC_TOTAL_PAUSE_TIME 0
RATE_BOUND 1
ACK_HIGH_PRIO 0
LINK_DOWN 0 0 0
ENABLE_TRACE 0
KMAX_MAP 1 400000000000 3200
KMIN_MAP 1 400000000000 800
PMAX_MAP 1 400000000000 0.2
BUFFER_SIZE 32
"""
TOPOLOGY = "5 1 4\n4\n" + "".join(f"{n} 4 400Gbps 0.0005ms 0\n" for n in range(4))


def ns3_study(root: Path) -> StudyFiles:
    (root / "topo").mkdir(parents=True)
    (root / "config.txt").write_text(CONFIG)
    (root / "topo/topology.txt").write_text(TOPOLOGY)
    (root / "flow.txt").write_text("0\n")
    (root / "trace.txt").write_text("4\n0 1 2 3\n")
    (root / "logical.json").write_text('{"logical-dims": ["4"]}')
    (root / "system.json").write_text(json.dumps(SYSTEM))
    return StudyFiles(
        str(DATA / "astrasim_studies/all_reduce_4npus_1MB/all_reduce"),
        root / "system.json",
        root / "config.txt",
        logical_topology=root / "logical.json",
    )


def test_ns3_config_points_at_the_copies(tmp_path):
    import_study(ns3_study(tmp_path / "study"), tmp_path / "run")
    config = (tmp_path / "run/ns3/config.txt").read_text()
    assert "TOPOLOGY_FILE ns3/topology.txt" in config and "FCT_OUTPUT_FILE ns3/fct.txt" in config
    assert (tmp_path / "run/ns3/topology.txt").read_text() == TOPOLOGY
    result = execute(tmp_path / "run", timeline="none")
    assert result.meta["link_model"].startswith("ns3_packets")
    assert result.warnings[0].startswith("approximation: ") and "ns-3 network" in result.warnings[0]


def test_ns3_config_needs_its_logical_topology(tmp_path):
    files = ns3_study(tmp_path / "study")
    with pytest.raises(
        RunDirError, match=r"config\.txt: an ns-3 network configuration needs --logical-topology"
    ):
        import_study(StudyFiles(files.workload, files.system, files.network), tmp_path / "run")


@pytest.mark.integration
@pytest.mark.skipif(not os.environ.get("ASTRA_SIM_BIN_DIR"), reason="set ASTRA_SIM_BIN_DIR")
def test_ns3_study_on_real_ns3(tmp_path):
    import_study(ns3_study(tmp_path / "study"), tmp_path / "run")
    real = execute(tmp_path / "run", "ns3", timeline="none", bin_dir=os.environ["ASTRA_SIM_BIN_DIR"])
    ours = execute(tmp_path / "run", timeline="none")
    assert ours.iteration_time_us == pytest.approx(real.iteration_time_us, rel=0.05)
