"""The cluster section: node groups of GPUs, their intra-node fabric and NICs."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from astra_hetero.comm.catalog import known_architectures
from astra_hetero.spec.catalog import fabric_catalog, gpu_catalog, normalize_key
from astra_hetero.spec.schema.base import Strict, _merge_preset
from astra_hetero.spec.types import (
    Count,
    Efficiency,
    Gbps,
    GbytesPerS,
    Gib,
    KernelOverheadUs,
    LatencyNs,
    Megahertz,
    Multiplier,
    SmallCount,
    TbytesPerS,
    Tflops,
    Watts,
)


class GpuSpec(Strict):
    """A GPU type: a catalog preset, optionally with any number overridden.

    Its identity (`type_key`, the label in manifests and results, and the key of its cost model) is
    its own name when that differs from the preset's, else the preset key; a cluster may not hold two
    GPUs with one label but different numbers (see `ClusterSpec`).
    """

    preset: str | None = None
    name: str
    bf16_tflops: Tflops = Field(description="dense BF16 peak, TFLOP/s")
    hbm_tbps: TbytesPerS = Field(description="device memory bandwidth, TB/s")
    memory_gib: Gib
    compute_efficiency: Efficiency = Field(
        description="achievable fraction of bf16_tflops on large GEMMs (measured MAMF / peak)"
    )
    memory_efficiency: Efficiency = Field(description="achievable fraction of hbm_tbps")
    compute_multiplier: Multiplier = Field(
        1.0, description="scales both throughputs, e.g. 0.5 = half as fast as the preset it starts from"
    )
    architecture: str = Field(
        description="GPU generation (volta, ampere, ada, hopper, blackwell, cdna3): NCCL tunes by it"
    )
    num_sms: SmallCount | None = Field(
        None, description="SMs / compute units: GEMM tile and wave quantization (None: not modelled)"
    )
    boost_clock_mhz: Megahertz | None = Field(None, description="clock of the vendor's peak figure")
    sustained_fraction: Efficiency = Field(
        1.0,
        description="share of the burst compute rates held through a long saturated run (power-limit "
        "clock); multiplies compute_efficiency and the attention efficiencies",
    )
    tdp_w: Watts | None = Field(
        None, description="board power the vendor's figures and the catalog's rates hold at (datasheet), W"
    )
    power_limit_w: Watts | None = Field(
        None,
        description="a power cap below tdp_w (nvidia-smi -pl): compute rates scale by the clock it "
        "leaves, (power_limit_w / tdp_w)^(1/3); memory rates do not",
    )
    kernel_overhead_us: KernelOverheadUs = Field(
        1.0, description="fixed cost of every kernel (launch gap and ramp), microseconds"
    )
    attention_fwd_efficiency: Efficiency | None = Field(
        None,
        description="fused attention forward at long sequences, fraction of bf16_tflops "
        "(None: compute_efficiency x 0.84, the A100's FlashAttention-2/MAMF ratio)",
    )
    attention_bwd_efficiency: Efficiency | None = Field(
        None, description="fused attention backward, fraction of bf16_tflops (None: forward x 0.87)"
    )
    fp16_tflops: Tflops | None = Field(None, description="dense FP16 tensor peak (None: bf16_tflops)")
    fp8_tflops: Tflops | None = Field(None, description="dense FP8 tensor peak (None: no FP8 GEMMs)")
    tf32_tflops: Tflops | None = Field(None, description="dense TF32 tensor peak (None: no TF32)")
    fp32_tflops: Tflops | None = Field(None, description="FP32 (non-tensor) peak (None: unknown)")
    fp8_efficiency: Efficiency | None = Field(
        None, description="achievable fraction of fp8_tflops on large GEMMs (None: compute_efficiency)"
    )
    tf32_efficiency: Efficiency | None = Field(
        None, description="achievable fraction of tf32_tflops (None: compute_efficiency)"
    )
    fp32_efficiency: Efficiency | None = Field(
        None, description="achievable fraction of fp32_tflops (None: compute_efficiency)"
    )

    @model_validator(mode="before")
    @classmethod
    def _preset(cls, data: Any) -> Any:
        return _merge_preset(data, gpu_catalog(), "gpu")

    @field_validator("power_limit_w")
    @classmethod
    def _power_limit_within_tdp(cls, value: float | None, info: ValidationInfo) -> float | None:
        if value is None:
            return value
        tdp = info.data.get("tdp_w")
        if tdp is None:
            raise ValueError("needs tdp_w, the board power the GPU's rates hold at")
        if value > tdp:
            raise ValueError(
                f"{value:g} W is above tdp_w {tdp:g} W: a cap can only lower the board power the "
                "GPU's rates were measured at"
            )
        return value

    @field_validator("architecture")
    @classmethod
    def _known_architecture(cls, value: str) -> str:
        if value not in known_architectures():
            raise ValueError(f"unknown architecture {value!r}; known: {', '.join(known_architectures())}")
        return value

    @property
    def type_key(self) -> str:
        """The GPU's label: its own name when it has one of its own, else the preset key."""
        if self.preset is not None and self.name == gpu_catalog()[self.preset].name:
            return self.preset
        return normalize_key(self.name)

    @property
    def power_clock_fraction(self) -> float:
        """The share of its clock a GPU capped at `power_limit_w` keeps: dynamic power goes as f·V² and,
        in the DVFS range, V with f, so power ∝ f³ (an approximation: leakage and memory power are
        left out). 1 without a cap. See docs/compute-model.md, "Power limits"."""
        if self.power_limit_w is None or self.tdp_w is None:
            return 1.0
        return (self.power_limit_w / self.tdp_w) ** (1 / 3)

    @property
    def sustained_compute_fraction(self) -> float:
        """The share of the burst compute rates held through a long run, under the power cap if any."""
        return self.sustained_fraction * self.power_clock_fraction

    @property
    def effective_flops_per_ns(self) -> float:
        """Sustained achievable BF16 matmul rate: peak × MAMF fraction × sustained × multiplier."""
        return self.effective_matmul_flops_per_ns("bf16")

    def matmul_tflops(self, fmt: str) -> float | None:
        """Dense peak of the matmul format `fmt` (bf16, fp16, fp8, tf32, fp32); None: not supported."""
        peaks = {
            "bf16": self.bf16_tflops,
            "fp16": self.fp16_tflops or self.bf16_tflops,
            "fp8": self.fp8_tflops,
            "tf32": self.tf32_tflops,
            "fp32": self.fp32_tflops,
        }
        return peaks[fmt]

    def matmul_efficiency(self, fmt: str) -> float:
        """Achievable fraction of `fmt`'s peak on large GEMMs (BF16's MAMF fraction where the
        catalog has no measurement for the format)."""
        own = {"fp8": self.fp8_efficiency, "tf32": self.tf32_efficiency, "fp32": self.fp32_efficiency}
        return own.get(fmt) or self.compute_efficiency

    def effective_matmul_flops_per_ns(self, fmt: str) -> float:
        peak = self.matmul_tflops(fmt)
        if peak is None:
            raise ValueError(f"{self.name} has no {fmt} matmul rate")
        sustained = self.sustained_compute_fraction * self.compute_multiplier
        return peak * 1e3 * self.matmul_efficiency(fmt) * sustained

    @property
    def effective_bytes_per_ns(self) -> float:
        return self.hbm_tbps * 1e3 * self.memory_efficiency * self.compute_multiplier


class FabricSpec(Strict):
    """The intra-node interconnect of a node group: per-GPU, per-direction bandwidth."""

    preset: str | None = None
    name: str = "custom"
    kind: Literal["nvlink", "pcie", "xgmi"] = Field(
        description="link family: sets the achievable fraction and hop latency in the NCCL model"
    )
    gbytes_per_s: GbytesPerS
    latency_ns: LatencyNs

    @model_validator(mode="before")
    @classmethod
    def _preset(cls, data: Any) -> Any:
        return _merge_preset(data, fabric_catalog(), "intra_node_fabric")


_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(g|gb|gbps|gbit/s|gbe)?\s*$", re.IGNORECASE)


class NicSpec(Strict):
    """Scale-out NICs of one node: `400`, `"400G"` or `{gbps: 400, count: 8}`."""

    gbps: Gbps
    count: Count | None = Field(None, description="NICs per node; default one per GPU")
    latency_ns: LatencyNs = Field(
        100.0, description="GPU-to-NIC hop; kept non-zero so no ns-3 link has zero delay"
    )

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        if isinstance(data, bool):
            raise ValueError("expected a NIC speed such as 400 or '400G'")
        if isinstance(data, int | float):
            return {"gbps": data}
        if isinstance(data, str):
            match = _RATE.match(data)
            if not match:
                raise ValueError(f"cannot read NIC speed {data!r}; write e.g. 400 or '400G'")
            return {"gbps": float(match.group(1))}
        return data


class ScaleUpDomainSpec(Strict):
    """Nodes whose GPUs share one scale-up switch fabric (GB200 NVL72: 18 trays of 4 GPUs on one
    NVLink switch fabric). The group's `intra_node_fabric` is that fabric: every GPU of a domain links
    to the domain's switch at the fabric's per-GPU rate; NICs stay per node. An integer is `{gpus: n}`."""

    gpus: Count = Field(description="GPUs per domain: a multiple of gpus_per_node")

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        if isinstance(data, bool):
            raise ValueError("expected {gpus: n} or a GPU count")
        return {"gpus": data} if isinstance(data, int) else data


class NodeGroupSpec(Strict):
    name: str | None = None
    count: Count = Field(description="number of nodes")
    gpus_per_node: Count
    gpu: GpuSpec
    intra_node_fabric: FabricSpec
    nic: NicSpec
    scale_up_domain: ScaleUpDomainSpec | None = Field(
        None, description="nodes joined by one scale-up fabric (None: each node is its own domain)"
    )

    @model_validator(mode="after")
    def _whole_domains(self) -> NodeGroupSpec:
        domain = self.scale_up_domain
        if domain is not None:
            if domain.gpus % self.gpus_per_node:
                raise ValueError(
                    f"scale_up_domain.gpus={domain.gpus} is not a multiple of gpus_per_node="
                    f"{self.gpus_per_node} (a domain holds whole nodes)"
                )
            if self.num_gpus % domain.gpus:
                raise ValueError(
                    f"the group's {self.num_gpus} GPUs do not split into domains of {domain.gpus}; "
                    f"give count a multiple of {domain.gpus // self.gpus_per_node}"
                )
        return self

    @property
    def num_gpus(self) -> int:
        return self.count * self.gpus_per_node

    @property
    def scale_up_gpus(self) -> int:
        """GPUs on one scale-up fabric: a domain's, else a node's."""
        return self.scale_up_domain.gpus if self.scale_up_domain is not None else self.gpus_per_node

    @property
    def nodes_per_domain(self) -> int:
        return self.scale_up_gpus // self.gpus_per_node

    @property
    def nics_per_node(self) -> int:
        return self.nic.count or self.gpus_per_node


class ClusterSpec(Strict):
    node_groups: list[NodeGroupSpec] = Field(min_length=1)

    @model_validator(mode="after")
    def _names(self) -> ClusterSpec:
        # Unnamed groups are called group<i>; that default must not collide with a given name, or a
        # mapping naming it would draw GPUs from both groups.
        names = self.group_names
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            where = [
                f"node_groups[{i}]" + ("" if g.name is not None else " (unnamed)")
                for i, g in enumerate(self.node_groups)
                if names[i] in dupes
            ]
            raise ValueError(
                f"node group names must be unique; {', '.join(where)} are all called "
                f"{' / '.join(repr(d) for d in dupes)} (unnamed groups are called group<index>)"
            )
        return self

    @model_validator(mode="after")
    def _gpu_labels(self) -> ClusterSpec:
        """One label, one GPU: results, TP-group checks and calibration rows are keyed by the label."""
        seen: dict[str, tuple[int, GpuSpec]] = {}
        for index, group in enumerate(self.node_groups):
            label = group.gpu.type_key
            first = seen.setdefault(label, (index, group.gpu))
            if first[1] != group.gpu:
                raise ValueError(
                    f"node_groups[{index}].gpu is labelled {label!r} like node_groups[{first[0]}].gpu but "
                    f"has different numbers ({_differences(first[1], group.gpu)}); give it a name of its "
                    f"own, e.g. {{preset: {group.gpu.preset or label}, name: my-{label}, ...}}"
                )
        return self

    @property
    def group_names(self) -> list[str]:
        return [g.name or f"group{i}" for i, g in enumerate(self.node_groups)]

    @property
    def num_gpus(self) -> int:
        return sum(g.num_gpus for g in self.node_groups)

    @property
    def num_nodes(self) -> int:
        return sum(g.count for g in self.node_groups)

    @property
    def num_scale_up_domains(self) -> int:
        """Nodes, counting the nodes of one scale-up domain once."""
        return sum(g.num_gpus // g.scale_up_gpus for g in self.node_groups)


def _differences(a: GpuSpec, b: GpuSpec) -> str:
    left, right = a.model_dump(), b.model_dump()
    return ", ".join(f"{k} {left[k]} vs {right[k]}" for k in left if left[k] != right[k])
