"""What "the folded simulation equals the plain one" means, as one assertion used by the folding tests."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from astra_hetero.backends.embedded.backend import EmbeddedBackend
from astra_hetero.pipeline import build_run_dir
from astra_hetero.results.model import RunResult
from astra_hetero.spec import parse_spec


def simulate_both(run_dir: Path) -> tuple[RunResult, RunResult]:
    folded = EmbeddedBackend(timeline=False).run(run_dir).result
    plain = EmbeddedBackend(timeline=False, fold=False).run(run_dir).result
    return folded, plain


def assert_same_simulation(folded: RunResult, plain: RunResult) -> None:
    """Iteration time, every rank's breakdown, and the collectives (each folded record counted
    `instances` times) agree; the folded result still lists every rank."""
    assert folded.iteration_time_us == pytest.approx(plain.iteration_time_us, rel=1e-9)
    assert [r.rank for r in folded.ranks] == [r.rank for r in plain.ranks] == list(range(plain.num_ranks))
    for mine, theirs in zip(folded.ranks, plain.ranks, strict=True):
        for field in ("finish_us", "compute_us", "exposed_comm_us", "idle_us"):
            assert getattr(mine, field) == pytest.approx(getattr(theirs, field), rel=1e-9, abs=1e-3), (
                f"rank {mine.rank} {field}"
            )
        assert (mine.gpu, mine.stage, mine.replica, mine.node) == (
            theirs.gpu,
            theirs.stage,
            theirs.replica,
            theirs.node,
        )
    assert _records(folded) == _records(plain)
    # the same communication model, and under the NCCL model the same algorithm/protocol choices
    for key in ("collective_model", "collective_algorithm", "collective_protocol", "nccl_choices"):
        assert folded.meta.get(key) == plain.meta.get(key), key
    assert folded.warnings == plain.warnings


def _records(result: RunResult) -> Counter:
    counts: Counter = Counter()
    for c in result.collectives:
        counts[(c.type, c.bytes, c.name, round(c.start_us, 3), round(c.end_us, 3), c.num_ranks)] += (
            c.instances
        )
    return counts


def symmetric_job(
    root: Path, topology: str = "spine_leaf", micro_batches: int = 4, collective_model: str = "nccl"
) -> Path:
    """GPT-3 13B cut to 4 layers on four 4-GPU H100 nodes, TP4 · PP2 · DP2: ranks 0-7 are stage 0
    (replica 0: 0-3, replica 1: 4-7), 8-15 stage 1. `collective_model`: the spec's collectives.model."""
    data = {
        "name": "symmetric",
        "model": {"preset": "gpt3-13b", "num_layers": 4},
        "cluster": {
            "node_groups": [
                {
                    "name": "h100",
                    "count": 4,
                    "gpus_per_node": 4,
                    "gpu": "h100-sxm",
                    "intra_node_fabric": "nvlink4",
                    "nic": 400,
                }
            ]
        },
        "network": {"topology": topology} | ({"nodes_per_leaf": 2} if topology == "spine_leaf" else {}),
        "parallelism": {
            "tp": 4,
            "pp": 2,
            "dp": 2,
            "micro_batch_size": 1,
            "global_batch_size": 2 * micro_batches,
        },
        "collectives": {"model": collective_model},
    }
    return build_run_dir(parse_spec(data), root, per_rank=True).root
