"""Memory-bound kernels by kind: the measured bandwidth and fixed cost of each kind on a GPU
architecture (`spec/catalog/kernels.yaml`, every figure with its source).

A memory-bound operator whose name belongs to a kind, on an architecture the catalog measured, takes
`kernels × fixed_us + bytes / (bandwidth_fraction × hbm_tbps × memory_efficiency)`; any other keeps the GPU's
`memory_efficiency` and `kernel_overhead_us` (timing.py). Every GEMM on such an architecture pays the
`gemm` kind's fixed cost and streams its operands, when memory-bound, at its rate (gemm.py).
A calibration (`profile`) table overrides all of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources

import yaml

# operator names of workload/costs.py -> kernel kind
KIND_OF = {
    "norm_attn": "norm",
    "norm_mlp": "norm",
    "final_norm": "norm",
    "gelu": "activation",
    "swiglu": "activation",
    "squared_relu": "activation",
    "rope": "rope",
    "residual_attn": "elementwise",
    "residual_mlp": "elementwise",
    "embedding": "embedding",
    "expert_swiglu": "activation",
    "expert_gelu": "activation",
    # MoE token permutation (moe.py): unfused PyTorch row gathers and scatter-adds (index_select,
    # scatter_add_), the kernels the embedding lookup and its backward are made of; the chunk sort and
    # the probability scaling are plain copies / element-wise products
    "moe_permute": "embedding",
    "moe_unpermute": "embedding",
    "moe_sort_chunks": "elementwise",
    "moe_unsort_chunks": "elementwise",
    "moe_unpermute_scale": "elementwise",
}
KINDS = ("norm", "activation", "rope", "elementwise", "embedding", "gemm")


@dataclass(frozen=True)
class KernelKind:
    bandwidth_fraction: float | None  # of the GPU's streaming rate (hbm × memory_efficiency); None: 1
    fixed_us: float


@cache
def kernel_catalog() -> dict[str, dict[str, KernelKind]]:
    """architecture -> kind -> measured figures."""
    text = resources.files("astra_hetero.spec").joinpath("catalog/kernels.yaml").read_text()
    catalog: dict[str, dict[str, KernelKind]] = {}
    for architecture, kinds in yaml.safe_load(text).items():
        unknown = sorted(set(kinds) - set(KINDS))
        if unknown:
            raise ValueError(
                f"kernels.yaml: {architecture}: unknown kinds {unknown}; known: {', '.join(KINDS)}"
            )
        catalog[architecture] = {
            kind: KernelKind(
                float(k["bandwidth_fraction"]) if "bandwidth_fraction" in k else None, float(k["fixed_us"])
            )
            for kind, k in kinds.items()
        }
    return catalog


def kernel_kind(architecture: str, op_name: str) -> KernelKind | None:
    """The measured figures for operator `op_name` on `architecture`, or None where there are none."""
    kind = KIND_OF.get(op_name)
    return kernel_catalog().get(architecture, {}).get(kind) if kind else None


def gemm_kind(architecture: str) -> KernelKind | None:
    """The measured fixed cost and streaming rate of GEMMs on `architecture`, or None."""
    return kernel_catalog().get(architecture, {}).get("gemm")
