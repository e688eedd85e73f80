"""How the simulated job runs: the collective model, the compute formulation, and a cut-down scope."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from astra_hetero.spec.schema.base import Strict
from astra_hetero.spec.types import (
    BatchSize,
    Count,
    Slowdown,
)

NcclScope = Literal["intra_node", "inter_node"]


class NcclTestsTable(Strict):
    """One nccl-tests output: a path, or `{path, collective, node_group}`."""

    path: str = Field(description="output of all_reduce_perf (or friends), relative to the spec")
    collective: Literal["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv"] | None = (
        Field(None, description="what it measured; default: read from the output or the file name")
    )
    node_group: str | None = Field(
        None, description="applies only to communicators whose ranks all lie in this node group"
    )

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        return {"path": data} if isinstance(data, str) else data


class CollectiveSpec(Strict):
    """How the embedded engine prices communication. `model: nccl` (default) follows NCCL: per
    collective and size its algorithm and protocol, latencies and achievable bandwidth; `model: ideal`
    is ASTRA-sim's analytical model (full link rate, path latency per step)."""

    model: Literal["nccl", "ideal"] = "nccl"
    algorithm: Literal["auto", "ring", "tree", "nvls", "nvls_tree", "hierarchical"] = Field(
        "auto",
        description="nccl: auto (NCCL's choice by size) or force ring | tree | nvls | nvls_tree for "
        "all-reduce (like NCCL_ALGO); ideal: hierarchical (auto) or ring",
    )
    protocol: Literal["auto", "ll", "ll128", "simple"] = Field(
        "auto", description="nccl only: force one protocol (like NCCL_PROTO)"
    )
    nccl_tests: dict[NcclScope, list[NcclTestsTable]] = Field(
        default_factory=dict,
        description="measured nccl-tests tables that override the modelled bandwidth, by scope: "
        "intra_node (communicators inside one node) or inter_node",
    )
    max_in_flight_per_rank: Count | None = Field(
        None,
        description="collectives/sends one rank may run at once in the embedded engine; None = no limit "
        "(separate NCCL streams overlap); 1 = ASTRA-sim's rule (one communication op per NPU)",
    )

    @field_validator("nccl_tests", mode="before")
    @classmethod
    def _lists(cls, data: Any) -> Any:
        if isinstance(data, dict):
            return {k: v if isinstance(v, list) else [v] for k, v in data.items()}
        return data

    @model_validator(mode="after")
    def _fits_model(self) -> CollectiveSpec:
        if self.model == "ideal":
            if self.algorithm not in ("auto", "ring", "hierarchical"):
                raise ValueError(
                    f"algorithm {self.algorithm} is NCCL's; the ideal model runs ring or hierarchical"
                )
            if self.protocol != "auto" or self.nccl_tests:
                raise ValueError("protocol and nccl_tests need model: nccl")
        elif self.algorithm == "hierarchical":
            raise ValueError(
                "algorithm hierarchical is the ideal model's; set model: ideal, or use NCCL's "
                "auto, ring, tree, nvls or nvls_tree"
            )
        return self

    @property
    def resolved_algorithm(self) -> str:
        """The algorithm the run directory records: the ideal model's default is hierarchical."""
        return "hierarchical" if self.model == "ideal" and self.algorithm == "auto" else self.algorithm


class ComputeSpec(Strict):
    """How the training framework computes (the operator formulations the cost model times)."""

    attention: Literal["fused", "unfused"] = Field(
        "fused",
        description="fused: FlashAttention-style kernels (no score matrix, recompute in the backward); "
        "unfused: scores materialised with a fused softmax, as Megatron ran before fused attention",
    )
    attention_kernel: Literal["cudnn", "flash2"] = Field(
        "cudnn",
        description="the kernel fused attention runs (Transformer Engine's backends): cudnn = cuDNN's "
        "fused attention, the catalog's figures; flash2 = the flash-attn package (NVTE_FUSED_ATTN=0), "
        "which on Hopper reaches 0.62 of cuDNN's rate (workload/timing.py); elsewhere the catalog's "
        "figures are FlashAttention-2's own or estimates and apply to both",
    )
    framework: Literal["megatron-core", "deepspeed", "fsdp"] = Field(
        "megatron-core",
        description="the training framework: its CPU cost per kernel launch (the GPU starves on kernels "
        "shorter than their launches) and its fixed costs per micro-batch and per iteration "
        "(spec/catalog/frameworks.yaml)",
    )
    comm_overlap_slowdown: Slowdown = Field(
        0.0,
        description="compute kernels take (1 + this) times as long while a communication kernel of "
        "their GPU runs beside them (they share its SMs and memory bandwidth); 0 = no contention. Off "
        "by default: published measurements depend on the GPU, NCCL's channel count and the kernels",
    )


class ScopeSpec(Strict):
    """A cut-down iteration for expensive backends (packet-level ns-3): the plan is made for the whole
    model and batch (partition, memory check), then each stage keeps only its first layers and each
    replica only its first micro-batches. Gradient sync then covers only the layers kept."""

    layers_per_stage: Count | None = Field(
        None, description="transformer layers kept on each pipeline stage (at most its planned share)"
    )
    micro_batches_per_replica: BatchSize | None = Field(
        None, description="micro-batches each data-parallel replica runs (at most its planned share)"
    )

    @model_validator(mode="after")
    def _not_empty(self) -> ScopeSpec:
        if self.layers_per_stage is None and self.micro_batches_per_replica is None:
            raise ValueError("give layers_per_stage and/or micro_batches_per_replica (or drop `scope`)")
        return self
