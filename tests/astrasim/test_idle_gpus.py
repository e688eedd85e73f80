"""A plan that leaves GPUs idle runs on the real ASTRA-sim binaries: each idle rank's trace holds one
compute node of zero duration (a trace without nodes aborts ASTRA-sim's feeder), and those ranks
finish at once (ASTRA-sim counts one cycle). Skipped unless ASTRA_SIM_BIN_DIR is set."""

from __future__ import annotations

import os

import pytest

from astra_hetero import pipeline
from astra_hetero.spec import parse_spec
from tests.conftest import make_spec_data, node_group

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        not os.environ.get("ASTRA_SIM_BIN_DIR"),
        reason="set ASTRA_SIM_BIN_DIR to a directory holding ASTRA-sim binaries",
    ),
]

# 8 GPUs, the grid uses 6: one A100 cell of TP2 stays idle
IDLE_SPEC = make_spec_data(
    cluster={
        "node_groups": [
            node_group("h100", "h100-sxm"),
            node_group("a100", "a100-80", fabric="nvlink3", nic=200),
        ]
    },
    network={"topology": "single_switch"},
    parallelism={"tp": 2, "pp": 3, "dp": 1, "micro_batch_size": 1, "global_batch_size": 4},
    mapping={"grid": [["h100"], ["h100"], ["a100"]], "allow_idle_gpus": True},
)


@pytest.mark.parametrize("backend", ["analytical-unaware", "ns3"])
def test_idle_ranks_finish_at_zero_on_real_astra_sim(tmp_path, backend):
    run_dir = pipeline.build_run_dir(parse_spec(IDLE_SPEC), tmp_path / "run").root
    result = pipeline.execute(
        run_dir, backend, timeline="none", bin_dir=os.environ["ASTRA_SIM_BIN_DIR"], timeout_s=600
    )
    embedded = pipeline.execute(run_dir, "embedded", timeline="none")
    idle = [r for r in result.ranks if r.stage is None]
    assert [r.rank for r in idle] == [6, 7]
    assert all(r.finish_us <= 0.001 and r.compute_us <= 0.001 for r in idle)  # at most one cycle
    assert result.iteration_time_us == pytest.approx(embedded.iteration_time_us, rel=0.25)
    print(f"\n{backend}: {result.iteration_time_us:.1f} us; embedded {embedded.iteration_time_us:.1f} us")
