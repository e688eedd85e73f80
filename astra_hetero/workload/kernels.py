"""Memory-bound kernels by kind: the measured bandwidth and fixed cost of each kind on a GPU
architecture (`spec/catalog/kernels.yaml`, every figure with its source).

A memory-bound operator whose name belongs to a kind, on an architecture the catalog measured, takes
`kernels × fixed_us + max(bytes / rate, row chain)` (timing.py): `rate` is the kind's achieved
bandwidth, a fraction of the GPU's streaming rate hbm_tbps × memory_efficiency — its L2 rate when the
kernel's bytes fit the architecture's L2-resident size, its DRAM rate otherwise — and the row chain,
for kinds that run one thread block per row, is the serial time of one block over its row
(`row_us` per 1024 elements) times the waves its blocks run in: a kernel cannot end before its
longest block, which is what bounds a kernel of fewer rows than the GPU holds blocks. Any other
operator keeps the GPU's `memory_efficiency` and `kernel_overhead_us` (timing.py). Every GEMM on such
an architecture pays the `gemm` kind's fixed cost and streams its operands, when memory-bound, at its
rate (gemm.py).
A calibration (`profile`) table overrides all of it.
"""

from __future__ import annotations

import math
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
KINDS = ("norm", "apex_norm", "activation", "rope", "elementwise", "embedding", "gemm")
ARCHITECTURE_KEYS = ("l2_resident_mib",)
# elements of a row one thread block walks per step: vLLM's row kernels (rms_norm, act_and_mul,
# rotary_embedding) launch one block of min(row, 1024) threads per token (csrc/layernorm_kernels.cu,
# csrc/activation_kernels.cu; rotary: 512 threads over element pairs, the same 1024 elements a step)
ROW_STEP_ELEMENTS = 1024
# resident threads and thread blocks per SM, compute capability 8.0 and 9.0 (CUDA C++ Programming
# Guide, "Features and Technical Specifications"): an SM runs at most 2048 threads in 32 blocks at once,
# so a row kernel's blocks run in waves of num_sms × min(32, 2048 // threads)
THREADS_PER_SM, BLOCKS_PER_SM = 2048, 32


@dataclass(frozen=True)
class KernelKind:
    bandwidth_fraction: float | None  # of the GPU's streaming rate (hbm × memory_efficiency); None: 1
    fixed_us: float
    l2_bandwidth_fraction: float | None = None  # the same, bytes within l2_resident_mib; None: as DRAM
    row_us: float | None = None  # one block's time per ROW_STEP_ELEMENTS of its row; None: no floor
    l2_resident_mib: float = 0.0  # the architecture's: largest working set that stays in L2

    def bandwidth_fraction_at(self, nbytes: float) -> float:
        """Achieved fraction of the streaming rate for a kernel moving `nbytes`."""
        if self.l2_bandwidth_fraction is not None and nbytes <= self.l2_resident_mib * 2**20:
            return self.l2_bandwidth_fraction
        return self.bandwidth_fraction or 1.0

    def row_chain_us(self, row_elements: int, rows: int = 1, num_sms: int | None = None) -> float:
        """Serial time of `rows` thread blocks, one per row of `row_elements`, run in waves of as
        many as the GPU's SMs hold at once (one wave without an SM count); 0 without a row model."""
        if self.row_us is None or row_elements <= 0:
            return 0.0
        steps = -(-row_elements // ROW_STEP_ELEMENTS)
        waves = 1
        if num_sms is not None and rows > 0:
            threads = min(row_elements, ROW_STEP_ELEMENTS)
            waves = -(-rows // (num_sms * min(BLOCKS_PER_SM, THREADS_PER_SM // threads)))
        return waves * steps * self.row_us


@cache
def kernel_catalog() -> dict[str, dict[str, KernelKind]]:
    """architecture -> kind -> measured figures."""
    return parse_kernel_catalog(
        resources.files("astra_hetero.spec").joinpath("catalog/kernels.yaml").read_text()
    )


def parse_kernel_catalog(text: str) -> dict[str, dict[str, KernelKind]]:
    """kernels.yaml's text -> architecture -> kind -> figures; ValueError naming what is wrong."""
    catalog: dict[str, dict[str, KernelKind]] = {}
    for architecture, kinds in yaml.safe_load(text).items():
        unknown = sorted(set(kinds) - set(KINDS) - set(ARCHITECTURE_KEYS))
        if unknown:
            raise ValueError(
                f"kernels.yaml: {architecture}: unknown kinds {unknown}; known: {', '.join(KINDS)}"
            )
        l2_mib = float(kinds.get("l2_resident_mib", 0.0))
        for kind, k in kinds.items():
            if kind in KINDS and k.get("l2_bandwidth_fraction", math.inf) < k.get("bandwidth_fraction", 1.0):
                raise ValueError(
                    f"kernels.yaml: {architecture}.{kind}: l2_bandwidth_fraction below bandwidth_fraction "
                    "(data found in L2 is never slower than from DRAM)"
                )
        catalog[architecture] = {
            kind: KernelKind(
                _optional(k, "bandwidth_fraction"),
                float(k["fixed_us"]),
                _optional(k, "l2_bandwidth_fraction"),
                _optional(k, "row_us"),
                l2_mib,
            )
            for kind, k in kinds.items()
            if kind in KINDS
        }
    return catalog


def _optional(record: dict, key: str) -> float | None:
    return float(record[key]) if key in record else None


def kernel_kind(architecture: str, op_name: str, kernel: str = "") -> KernelKind | None:
    """The measured figures for operator `op_name` on `architecture`, or None where there are none.
    `kernel` names the implementation's own kind (e.g. apex's LayerNorm for Megatron's own layer);
    where the architecture has no measurement of it, the operator's kind by name stands in."""
    measured = kernel_catalog().get(architecture, {})
    if kernel and kernel in measured:
        return measured[kernel]
    kind = KIND_OF.get(op_name)
    return measured.get(kind) if kind else None


def gemm_kind(architecture: str) -> KernelKind | None:
    """The measured fixed cost and streaming rate of GEMMs on `architecture`, or None."""
    return kernel_catalog().get(architecture, {}).get("gemm")
