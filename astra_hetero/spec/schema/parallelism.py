"""The parallel plan: degrees and options, the device mapping, the layer and micro-batch partition."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from astra_hetero.spec.schema.base import Strict
from astra_hetero.spec.types import (
    BatchSize,
    Count,
    Mib,
)


class ParallelismSpec(Strict):
    tp: Count = 1
    pp: Count = 1
    dp: Count = 1
    micro_batch_size: BatchSize = 1
    global_batch_size: BatchSize = Field(description="sequences per iteration, over all replicas")
    schedule: Literal["1f1b", "gpipe"] = "1f1b"
    virtual_stages: Count = Field(
        1,
        description="model chunks per pipeline stage (Megatron-LM's virtual pipeline size); with 1f1b "
        "and more than 1 the schedule is Megatron-LM's interleaved 1F1B",
    )
    sequence_parallel: bool = False
    recompute: Literal["none", "selective", "full"] = "none"
    distributed_optimizer: bool = False
    dp_bucket_mib: Mib = Field(25.0, description="gradient bucket size for overlapped DP sync")
    overlap_grad_reduce: bool = Field(
        True,
        description="reduce gradient buckets during the last backward pass (per model chunk once its "
        "last backward is done, with virtual stages); false: one reduction per chunk after the backward",
    )
    overlap_param_gather: bool = Field(
        False,
        description="distributed optimizer: all-gather each parameter bucket at the start of the "
        "iteration, waited for before its first forward use; false: blocking all-gathers after the "
        "optimizer step (Megatron-LM's default)",
    )
    grad_reduce_in_fp32: bool | None = Field(
        None,
        description="reduce gradients in FP32 (Megatron's default for BF16); None: as precision.grads "
        "says (FP32 unless it says bf16)",
    )
    allow_tp_across_nodes: bool = False


class MappingSpec(Strict):
    """Which node groups serve which pipeline cells (one cell = the TP group of one stage of one replica).

    `grid` names a node group for every cell: one row per pipeline stage, one entry per replica in it.
    `stages` (one name per stage, every replica alike) and `replicas` (one name per replica, every
    stage alike) are shorthands for the grids whose rows or columns repeat one name. Give at most
    one of the three. Without any, GPUs are taken in cluster order with TP innermost, then DP, then PP.
    A cell takes the next `tp` GPUs of its node group, cells taken stage by stage, replica by replica.
    """

    grid: list[list[str]] | None = Field(
        None, description="node group per cell: grid[stage][replica]; pp rows of dp names each"
    )
    stages: list[str] | None = Field(None, description="shorthand: node group per stage")
    replicas: list[str] | None = Field(None, description="shorthand: node group per replica")
    allow_idle_gpus: bool = Field(
        False,
        description="let tp·pp·dp use fewer GPUs than the cluster has; the GPUs no cell takes stay "
        "idle (a trace of one zero-duration node each, marked idle in the manifest and the result)",
    )

    @model_validator(mode="after")
    def _one(self) -> MappingSpec:
        given = [name for name in ("grid", "stages", "replicas") if getattr(self, name) is not None]
        if len(given) > 1:
            raise ValueError(f"give at most one of grid, stages and replicas, not {' and '.join(given)}")
        return self

    def cell_group(self, stage: int, replica: int) -> str | None:
        """The node group named for a cell, or None under the default (cluster-order) mapping."""
        if self.grid is not None:
            return self.grid[stage][replica]
        if self.stages is not None:
            return self.stages[stage]
        if self.replicas is not None:
            return self.replicas[replica]
        return None


Split = Literal["uniform", "auto"] | list[BatchSize]
LayerSplit = Literal["uniform", "auto"] | list[BatchSize] | list[list[BatchSize]]


class PartitionSpec(Strict):
    layers: LayerSplit = Field(
        "uniform",
        description="layers per stage: uniform, auto or a list of pp entries; with virtual stages also "
        "pp·v entries (one per virtual stage, in model order) or pp lists of v (per stage, per chunk)",
    )
    micro_batches: Split = Field(
        "uniform", description="micro-batches per replica: uniform, auto or an explicit list"
    )
