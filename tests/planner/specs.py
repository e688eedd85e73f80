"""Small plan specs built in code: two GPU types, at most 16 GPUs, a model small enough that a
simulation takes a fraction of a second."""

from __future__ import annotations

import copy
from typing import Any

from tests.conftest import TINY_MODEL, node_group

SMALL_MODEL = {**TINY_MODEL, "num_layers": 4}
# the same shape with four routed experts of 1024 (top-2) in every layer
MOE_MODEL = {
    **SMALL_MODEL,
    "activation": "swiglu",
    "moe": {"num_experts": 4, "top_k": 2, "expert_ffn_size": 1024},
}


def plan_data(search: dict[str, Any] | None = None, **sections: Any) -> dict[str, Any]:
    """8 GPUs: one node of 4 H100 and one of 4 A100; a 4-layer model; 8 sequences per iteration."""
    data: dict[str, Any] = {
        "name": "plan-small",
        "model": copy.deepcopy(SMALL_MODEL),
        "cluster": {
            "node_groups": [
                node_group("h100", "h100-sxm", count=1, gpus_per_node=4),
                node_group("a100", "a100-80", count=1, gpus_per_node=4, fabric="nvlink3", nic=200),
            ]
        },
        "network": {"topology": "spine_leaf", "nodes_per_leaf": 2},
        "parallelism": {"global_batch_size": 8},
        "search": {"refine_top": 0, "baseline": False, **(search or {})},
    }
    data.update(sections)
    return data


# One set of options but the virtual stages (1, or 2 where pp ≥ 2: the interleaved schedule): the
# space is then grids × splits over tp ∈ {2, 4} (about a hundred candidates).
NARROW = {
    "tp": [2, 4],
    "micro_batch_size": 1,
    "schedule": "1f1b",
    "sequence_parallel": False,
    "recompute": "none",
    "distributed_optimizer": False,
    "tp_comm_overlap": False,
}
