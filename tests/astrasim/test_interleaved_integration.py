"""Interleaved 1F1B run directories on the real ASTRA-sim analytical (congestion-unaware) binary against
the embedded engine, both with ASTRA-sim's one-communication-op-per-NPU rule. Skipped unless
ASTRA_SIM_BIN_DIR is set; run `pytest -m integration -s` to see the figures."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from astra_hetero.backends.astrasim.command import FLAVORS
from astra_hetero.spec.schema import CollectiveSpec
from tests.conftest import node_group

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        not os.environ.get("ASTRA_SIM_BIN_DIR"),
        reason="set ASTRA_SIM_BIN_DIR to a directory holding ASTRA-sim binaries",
    ),
]


# The embedded engine's collective model that mirrors ASTRA-sim's analytical one, where the spec has a
# choice of models (`collectives.model`); before that choice existed it was the only model.
IDEAL = {"model": "ideal"} if "model" in CollectiveSpec.model_fields else {}


def case(nodes: int, tp: int, pp: int, dp: int, **parallelism) -> dict:
    return {
        "model": {"preset": "llama2-13b", "num_layers": 16},
        "cluster": {"node_groups": [node_group("h100", "h100-sxm", count=nodes, gpus_per_node=8)]},
        "network": {"topology": "single_switch"},
        "parallelism": {"tp": tp, "pp": pp, "dp": dp, "global_batch_size": 8 * dp, **parallelism},
        "collectives": {**IDEAL, "max_in_flight_per_rank": 1},
    }


CASES = {
    # one node: p2p and TP on NVLink, data parallel, sequence parallel
    "one-node-tp2-pp2-dp2-v2": case(1, 2, 2, 2, virtual_stages=2, sequence_parallel=True),
    "one-node-tp2-pp4-v4": case(1, 2, 4, 1, virtual_stages=4),
    # two nodes: every stage boundary (and the ring back to stage 0) crosses the network
    "two-nodes-tp8-pp2-v2-distopt": case(2, 8, 2, 1, virtual_stages=2, distributed_optimizer=True),
    "one-node-no-grad-overlap-v2": case(
        1, 2, 2, 2, virtual_stages=2, overlap_grad_reduce=False, sequence_parallel=True
    ),
    "one-node-param-gather-overlap-v2": case(
        1, 2, 2, 2, virtual_stages=2, distributed_optimizer=True, overlap_param_gather=True
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_interleaved_embedded_matches_analytical_unaware(tmp_path, name):
    from astra_hetero.pipeline import build_run_dir, execute
    from astra_hetero.spec import parse_spec

    binary = Path(os.environ["ASTRA_SIM_BIN_DIR"]) / FLAVORS["analytical-unaware"].binary_name
    if not os.access(binary, os.X_OK):
        pytest.skip(f"{binary} is not an executable file")
    ours = build_run_dir(parse_spec(CASES[name]), tmp_path / "embedded").root
    theirs = shutil.copytree(ours, tmp_path / "analytical")
    embedded = execute(ours, "embedded", timeline="none").iteration_time_us
    analytical = execute(theirs, "analytical-unaware", timeout_s=1800).iteration_time_us
    difference = analytical / embedded - 1
    print(
        f"\n{name}: embedded {embedded:.1f} us, analytical-unaware {analytical:.1f} us, "
        f"difference {difference:+.3%}"
    )
    assert abs(difference) <= 0.01
