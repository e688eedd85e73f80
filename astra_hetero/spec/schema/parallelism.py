"""The parallel plan: degrees and options, the device mapping, the layer and micro-batch partition."""

from __future__ import annotations

from typing import Any, Literal

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
    recompute: Literal["none", "selective", "full", "selective_op"] = Field(
        "none",
        description="activation recomputation: selective = Megatron's (the attention core), full = every "
        "layer's forward again, selective_op = torchtitan's per-op policy (saves every second matmul "
        "output, the attention output and the reduce-scatters; recomputes the rest of the layer)",
    )
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
    cp: Count = Field(
        1,
        description="context parallelism: each sequence split over cp GPUs (Megatron-core's ring "
        "attention, load-balanced causal chunks); the CP ranks join the data-parallel gradient sync",
    )
    cp_comm: Literal["p2p", "all_gather"] = Field(
        "p2p",
        description="p2p: KV chunks passed around the CP ring, overlapped with the attention steps; "
        "all_gather: KV all-gathered before attention (and dKV reduce-scattered after its backward)",
    )
    ep: Count = Field(
        1, description="expert parallelism (MoE): experts split over ep GPUs, within the data-parallel ranks"
    )
    etp: Count | None = Field(None, description="expert tensor parallelism (MoE); None = tp")
    moe_token_dispatcher: Literal["alltoall", "allgather"] = Field(
        "alltoall",
        description="MoE token dispatch: all-to-all over the EP group (dispatch and combine), or "
        "all-gather of the tokens and reduce-scatter of the outputs (Megatron-core's two dispatchers)",
    )
    # default true: Megatron-core's MoE guide (megatron/core/transformer/moe/README.md) recommends
    # --moe-grouped-gemm wherever a rank holds several experts; NeMo's Grok-1 recipe sets it false
    moe_grouped_gemm: bool = Field(
        True,
        description="MoE experts as grouped GEMMs (Megatron-core's --moe-grouped-gemm, TEGroupedMLP: one "
        "kernel per expert layer for all local experts); false: SequentialMLP, a loop of one GEMM, one "
        "activation and (FP8) one cast per local expert, each with its own fixed cost and quantization",
    )
    tp_comm_overlap: bool = Field(
        False,
        description="overlap TP all-gathers and reduce-scatters with the GEMMs that use them (Transformer "
        "Engine userbuffers, as Megatron-core's --tp-comm-overlap); needs sequence_parallel",
    )
    overlap_p2p_comm: bool = Field(
        True,
        description="pipeline sends run beside the next compute; false: the rank waits for each send "
        "before its next compute (Megatron-core's blocking batched send/recv)",
    )
    zero_stage: Literal[0, 1, 2, 3] | None = Field(
        None,
        description="sharded data parallelism: 1 = optimizer states (the same as distributed_optimizer), "
        "2 = and gradients, 3 = and parameters (gathered per layer before use); None = from "
        "distributed_optimizer / fsdp",
    )
    fsdp: bool = Field(
        False, description="PyTorch FSDP: ZeRO-3 sharding with FSDP's prefetching (implies zero_stage 3)"
    )

    @model_validator(mode="before")
    @classmethod
    def _sharding(cls, data: Any) -> Any:
        """zero_stage, fsdp and distributed_optimizer name one choice; fill in what the others imply
        and reject what contradicts them (checked on what the user wrote, before defaults)."""
        if not isinstance(data, dict):
            return data
        stage, fsdp, dist = data.get("zero_stage"), data.get("fsdp"), data.get("distributed_optimizer")
        if fsdp is True:
            if stage is not None and stage != 3:
                raise ValueError(
                    f"fsdp: true is ZeRO-3 (parameters sharded); it contradicts zero_stage {stage}"
                )
            stage = 3
        if isinstance(stage, int) and not isinstance(stage, bool):
            if stage == 0 and dist is True:
                raise ValueError(
                    "distributed_optimizer: true shards the optimizer states (ZeRO-1); it contradicts "
                    "zero_stage 0"
                )
            if stage >= 1 and dist is False:
                raise ValueError(
                    f"zero_stage {stage} shards the optimizer states, which distributed_optimizer: false "
                    "turns off; drop one of them"
                )
            data = {**data, "zero_stage": stage}
            if stage >= 1:
                data["distributed_optimizer"] = True
        return data

    @model_validator(mode="after")
    def _options(self) -> ParallelismSpec:
        if self.sharding_stage == 3:
            if self.overlap_param_gather:
                raise ValueError(
                    "overlap_param_gather is the distributed optimizer's; ZeRO-3 gathers each layer's "
                    "parameters before it runs (drop overlap_param_gather)"
                )
            if "overlap_grad_reduce" in self.model_fields_set and not self.overlap_grad_reduce:
                raise ValueError(
                    "ZeRO-3 reduce-scatters each layer's gradients as its backward ends; "
                    "overlap_grad_reduce: false has no meaning there"
                )
        return self

    @property
    def sharding_stage(self) -> int:
        """The ZeRO stage in effect: 0 plain data parallelism ... 3 parameters sharded."""
        if self.zero_stage is not None:
            return self.zero_stage
        return 1 if self.distributed_optimizer else 0

    @property
    def expert_tp(self) -> int:
        return self.etp or self.tp

    @property
    def model_parallel_cell(self) -> int:
        """GPUs of one pipeline cell: the TP groups of a stage's CP ranks (tp · cp)."""
        return self.tp * self.cp


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
    experts: list[str] | None = Field(
        None,
        description="MoE: node groups whose GPUs hold the experts; the other ranks of an EP group "
        "send their tokens there and hold none (None: every rank holds num_experts / ep)",
    )
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
