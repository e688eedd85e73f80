"""The host side of a training framework (`compute.framework`, `spec/catalog/frameworks.yaml`): the
CPU's cost to launch each kernel, and fixed costs per micro-batch and per iteration.

The CPU issues kernels ahead of the GPU; a run of kernels between two waits (a fused compute segment)
takes the longer of its GPU time and its launches, `kernels × launch_us`: short kernels starve the GPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources

import yaml

FRAMEWORKS = ("megatron-core", "deepspeed", "fsdp")


@dataclass(frozen=True)
class HostCosts:
    launch_ns: float  # CPU time per kernel
    micro_batch_ns: float  # per micro-batch and stage
    step_ns: float  # per iteration

    def segment_ns(self, gpu_ns: float, kernels: int) -> float:
        """A run of `kernels` kernels taking `gpu_ns` on the GPU, launched by this host."""
        return max(gpu_ns, kernels * self.launch_ns)


NO_HOST = HostCosts(0.0, 0.0, 0.0)


@cache
def host_costs(framework: str) -> HostCosts:
    text = resources.files("astra_hetero.spec").joinpath("catalog/frameworks.yaml").read_text()
    data = yaml.safe_load(text)
    if framework not in data:
        raise ValueError(f"unknown framework {framework!r}; known: {', '.join(data)}")
    entry = data[framework]
    return HostCosts(
        float(entry["launch_us"]) * 1e3, float(entry["micro_batch_us"]) * 1e3, float(entry["step_us"]) * 1e3
    )
