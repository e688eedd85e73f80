"""Small shared clusters built in code, so each test states the network and placement it reasons about."""

from __future__ import annotations

import copy
from typing import Any

from tests.conftest import TINY_MODEL, node_group

# The uplink rate of the clusters below: 400 Gbit/s = 50 bytes per ns.
UPLINK_BYTES_PER_NS = 50.0


def dp_job(name: str, nodes: dict[str, list[Any]] | None, **extra: Any) -> dict[str, Any]:
    """A job of two data-parallel replicas of one GPU each; gradients reduced after the backward (one
    blocking all-reduce), so two such jobs started together reduce at the same instant."""
    job: dict[str, Any] = {
        "name": name,
        "model": copy.deepcopy(TINY_MODEL),
        "parallelism": {"tp": 1, "pp": 1, "dp": 2, "global_batch_size": 2, "overlap_grad_reduce": False},
        **extra,
    }
    if nodes is not None:
        job["nodes"] = nodes
    return job


def two_leaves(oversubscription: float, jobs: list[dict[str, Any]], **sections: Any) -> dict[str, Any]:
    """Two leaves of two one-GPU nodes (node groups `x` on the first leaf, `y` on the second), 400G NICs,
    spine-leaf at the given oversubscription (2.0: one 400G uplink per leaf for two 400G NICs), the
    ideal collective model (ASTRA-sim's analytical one)."""
    return {
        "name": "two-leaves",
        "cluster": {
            "node_groups": [
                node_group("x", "h100-sxm", count=2, gpus_per_node=1),
                node_group("y", "h100-sxm", count=2, gpus_per_node=1),
            ]
        },
        "network": {"topology": "spine_leaf", "nodes_per_leaf": 2, "oversubscription": oversubscription},
        "collectives": {"model": "ideal"},
        "jobs": jobs,
        **sections,
    }


def spread(oversubscription: float = 2.0, **sections: Any) -> dict[str, Any]:
    """Jobs a and b each with one replica on each leaf: their gradient all-reduces cross the spine."""
    return two_leaves(
        oversubscription,
        [dp_job("a", {"x": [0], "y": [0]}), dp_job("b", {"x": [1], "y": [1]})],
        **sections,
    )


def packed(oversubscription: float = 2.0) -> dict[str, Any]:
    """Job a on the first leaf, b on the second: nothing crosses the spine."""
    return two_leaves(oversubscription, [dp_job("a", {"x": [0, 1]}), dp_job("b", {"y": [0, 1]})])
