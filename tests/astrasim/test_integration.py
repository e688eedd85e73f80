"""Real ASTRA-sim binaries on a generated run directory; skipped unless ASTRA_SIM_BIN_DIR is set.

Prints each backend's iteration time next to the embedded engine's (run `pytest -s` to see it).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from astra_hetero.backends.astrasim.command import FLAVORS
from tests.conftest import make_spec_data, node_group

# The comparisons with ASTRA-sim select the embedded engine's ideal model (ASTRA-sim's own analytical
# collectives: full link rate, path latency per step); the NCCL-like default prices what NCCL achieves.
IDEAL = {"model": "ideal"}

# 8 GPUs (one H100 node, one A100 node), TP2·PP2·DP2: small enough for ns-3 in a test.
SMALL_SPEC = make_spec_data(
    cluster={
        "node_groups": [
            node_group("h100", "h100-sxm"),
            node_group("a100", "a100-80", fabric="nvlink3", nic=200),
        ]
    },
    network={"topology": "single_switch"},
    parallelism={"tp": 2, "pp": 2, "dp": 2, "micro_batch_size": 1, "global_batch_size": 4},
    collectives=IDEAL,
)

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        not os.environ.get("ASTRA_SIM_BIN_DIR"),
        reason="set ASTRA_SIM_BIN_DIR to a directory holding ASTRA-sim binaries",
    ),
]


@pytest.fixture(scope="module")
def embedded_us(tmp_path_factory) -> float:
    from astra_hetero.pipeline import build_run_dir, execute
    from astra_hetero.spec import parse_spec

    run_dir = build_run_dir(parse_spec(SMALL_SPEC), tmp_path_factory.mktemp("embedded"))
    return execute(run_dir.root, "embedded").iteration_time_us


@pytest.mark.parametrize("backend", ["analytical", "analytical-unaware", "ns3"])
def test_real_binary_result_is_written_and_comparable_with_embedded(tmp_path, backend, embedded_us):
    from astra_hetero.pipeline import build_run_dir, execute
    from astra_hetero.results.io import read_result
    from astra_hetero.spec import parse_spec

    binary = Path(os.environ["ASTRA_SIM_BIN_DIR"]) / FLAVORS[backend].binary_name
    if not os.access(binary, os.X_OK):
        pytest.skip(f"{binary} is not an executable file")
    run_dir = build_run_dir(parse_spec(SMALL_SPEC), tmp_path / "run")
    result = execute(run_dir.root, backend, timeout_s=1800)

    assert read_result(run_dir.root) == result
    assert result.num_ranks == 8
    assert [r.rank for r in result.ranks] == list(range(8))
    assert all(r.finish_us > 0 for r in result.ranks)
    assert result.iteration_time_us == pytest.approx(max(r.finish_us for r in result.ranks))
    print(
        f"\n{backend:>20}: {result.iteration_time_us:12.1f} us   embedded: {embedded_us:12.1f} us   "
        f"ratio {result.iteration_time_us / embedded_us:.3f}   warnings: {list(result.warnings)}"
    )


EXAMPLES = Path(__file__).parents[2] / "examples"
# Pipeline and data parallelism across 4 H100 nodes, with ASTRA-sim's one-comm-op-per-NPU rule.
DP_SPEC = {
    "model": {"preset": "gpt3-13b", "num_layers": 8},
    "cluster": {"node_groups": [node_group("h100", "h100-sxm", count=4, gpus_per_node=8)]},
    "network": {"topology": "spine_leaf", "nodes_per_leaf": 4},
    "parallelism": {"tp": 8, "pp": 2, "dp": 2, "global_batch_size": 8, "sequence_parallel": True},
    "collectives": {**IDEAL, "max_in_flight_per_rank": 1},
}


@pytest.mark.parametrize(
    ("case", "tolerance"),
    [
        ("gpt3_13b_16xh100", 0.02),  # homogeneous: the embedded engine's target
        ("pp2-dp2-one-comm-op", 0.02),  # homogeneous, data parallel, ASTRA-sim's issue rule
        ("llama65b_mixed_32gpu", 0.05),  # mixed: the analytical network takes each dimension's bottleneck
    ],
)
def test_embedded_matches_analytical_unaware_on_the_same_run_directory(tmp_path, case, tolerance):
    import shutil

    from astra_hetero.pipeline import build_run_dir, execute
    from astra_hetero.spec import load_spec, parse_spec

    binary = Path(os.environ["ASTRA_SIM_BIN_DIR"]) / FLAVORS["analytical-unaware"].binary_name
    if not os.access(binary, os.X_OK):
        pytest.skip(f"{binary} is not an executable file")
    spec = parse_spec(DP_SPEC) if case == "pp2-dp2-one-comm-op" else load_spec(EXAMPLES / f"{case}.yaml")
    spec = spec.model_copy(update={"collectives": spec.collectives.model_copy(update=IDEAL)})
    ours = build_run_dir(spec, tmp_path / "embedded").root
    theirs = shutil.copytree(ours, tmp_path / "analytical")
    embedded = execute(ours, "embedded", timeline="none").iteration_time_us
    analytical = execute(theirs, "analytical-unaware", timeout_s=1800).iteration_time_us
    difference = analytical / embedded - 1
    print(
        f"\n{case}: embedded {embedded:.1f} us, analytical-unaware {analytical:.1f} us, "
        f"difference {difference:+.2%}"
    )
    assert abs(difference) <= tolerance
