"""Shared fixtures: small specs built in code, so every test states the cluster it reasons about."""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

# Property tests run a fixed, modest set of examples so that the suite is deterministic and fast on
# CI's two cores; `HYPOTHESIS_PROFILE=explore` searches more widely (and randomly) when hunting bugs.
settings.register_profile(
    "ci",
    max_examples=100,
    derandomize=True,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("explore", max_examples=2000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# The specs shipped in examples/ (one file per job); experiments.yaml there is the experiments list,
# not a spec.
EXAMPLE_SPECS = sorted(
    p for p in (Path(__file__).parents[1] / "examples").glob("*.yaml") if p.name != "experiments.yaml"
)


def budget(examples: int) -> int:
    """A property's example count under the CI profile, scaled with the loaded profile's."""
    return max(1, examples * settings.default.max_examples // 100)


TINY_MODEL: dict[str, Any] = {
    "num_layers": 8,
    "hidden_size": 1024,
    "num_heads": 16,
    "num_kv_heads": 16,
    "ffn_size": 4096,
    "activation": "gelu",
    "vocab_size": 32000,
    "seq_len": 1024,
}


def node_group(
    name: str, gpu: str, count: int = 1, gpus_per_node: int = 4, fabric: str = "nvlink4", nic: Any = 400
) -> dict[str, Any]:
    return {
        "name": name,
        "count": count,
        "gpus_per_node": gpus_per_node,
        "gpu": gpu,
        "intra_node_fabric": fabric,
        "nic": nic,
    }


def make_spec_data(**overrides: Any) -> dict[str, Any]:
    """A 16-GPU mixed cluster (two H100 nodes, two A100 nodes, 4 GPUs each), TP2·PP2·DP4.

    Keyword overrides replace whole top-level sections.
    """
    data: dict[str, Any] = {
        "name": "tiny-mixed",
        "model": copy.deepcopy(TINY_MODEL),
        "cluster": {
            "node_groups": [
                node_group("h100", "h100-sxm", count=2),
                node_group("a100", "a100-80", count=2, fabric="nvlink3", nic=200),
            ]
        },
        "network": {"topology": "spine_leaf", "nodes_per_leaf": 2},
        "parallelism": {"tp": 2, "pp": 2, "dp": 4, "micro_batch_size": 1, "global_batch_size": 16},
    }
    data.update(overrides)
    return data


@pytest.fixture
def spec_data() -> dict[str, Any]:
    return make_spec_data()


@pytest.fixture
def spec(spec_data: dict[str, Any]):
    from astra_hetero.spec import parse_spec

    return parse_spec(spec_data)
