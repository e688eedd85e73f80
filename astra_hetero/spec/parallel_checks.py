"""Cross-section checks of context parallelism, mixture-of-experts placement and TP overlap.

Each rule is Megatron-core's own (its argument checks and parallel_state's group construction), so a
spec that passes describes a job Megatron-core would start.
"""

from __future__ import annotations

from astra_hetero.errors import SpecError
from astra_hetero.spec.schema import Spec


def check_modern_parallelism(spec: Spec) -> None:
    _check_context_parallel(spec)
    _check_experts(spec)
    _check_tp_overlap(spec)
    _check_lockstep(spec)


def _check_lockstep(spec: Spec) -> None:
    """Replicas whose collectives meet inside every pass or after every micro-batch (an expert group
    wider than a cell; ZeRO-2 and -3) run the same micro-batches: `auto` keeps them equal, a list must."""
    par = spec.parallelism
    wide_experts = spec.model.moe is not None and par.ep * par.expert_tp > par.model_parallel_cell
    if not (wide_experts or par.sharding_stage >= 2):
        return
    why = (
        f"an expert group of ep·etp = {par.ep * par.expert_tp} GPUs spans replicas"
        if wide_experts
        else f"ZeRO-{par.sharding_stage} reduces every micro-batch's gradients over the replicas"
    )
    batches = spec.partition.micro_batches
    total = par.global_batch_size // par.micro_batch_size
    if isinstance(batches, list) and len(set(batches)) > 1:
        raise SpecError("partition.micro_batches", f"{why}: every replica must run as many micro-batches")
    if batches == "auto" and total % par.dp:
        raise SpecError(
            "partition.micro_batches",
            f"{why}, so auto splits the {total} micro-batches evenly, which dp={par.dp} does not divide",
        )


def _check_context_parallel(spec: Spec) -> None:
    par, model = spec.parallelism, spec.model
    if par.cp == 1:
        return
    if spec.compute.attention != "fused":
        raise SpecError(
            "parallelism.cp",
            "context parallelism runs fused attention kernels (Transformer Engine); set "
            "compute.attention: fused",
        )
    if model.attention_window is not None:
        raise SpecError(
            "parallelism.cp",
            "context parallelism is modelled for full causal attention; this model has an "
            "attention_window (sliding-window layers)",
        )
    chunks = 2 * par.cp  # every CP rank takes two of 2·cp chunks: one early, one late (load balance)
    if model.seq_len % chunks:
        raise SpecError(
            "parallelism.cp",
            f"cp={par.cp} splits each sequence into 2·cp = {chunks} chunks, which must divide "
            f"model.seq_len={model.seq_len}",
        )
    if par.sequence_parallel and (model.seq_len // par.cp) % par.tp:
        raise SpecError(
            "parallelism.sequence_parallel",
            f"the {model.seq_len // par.cp} tokens of a CP rank must split evenly over tp={par.tp}",
        )


def _check_experts(spec: Spec) -> None:
    par, moe = spec.parallelism, spec.model.moe
    if moe is None:
        for name, given in (("ep", par.ep != 1), ("etp", par.etp is not None)):
            if given:
                raise SpecError(f"parallelism.{name}", "needs a mixture-of-experts model (model.moe)")
        if spec.mapping.experts is not None:
            raise SpecError("mapping.experts", "needs a mixture-of-experts model (model.moe)")
        return
    if moe.num_experts % par.ep:
        raise SpecError(
            "parallelism.ep", f"ep={par.ep} does not divide model.moe.num_experts={moe.num_experts}"
        )
    etp = par.expert_tp
    if moe.expert_ffn_size % etp:
        raise SpecError(
            "parallelism.etp", f"etp={etp} does not divide model.moe.expert_ffn_size={moe.expert_ffn_size}"
        )
    per_stage = par.tp * par.cp * par.dp
    if per_stage % (par.ep * etp):
        raise SpecError(
            "parallelism.ep",
            f"ep·etp = {par.ep}·{etp} must divide the {per_stage} GPUs of a pipeline stage (tp·cp·dp): "
            "expert groups are formed within the data-parallel ranks",
        )
    if par.tp > 1 and not par.sequence_parallel:
        raise SpecError(
            "parallelism.sequence_parallel",
            "MoE layers with tp > 1 need sequence_parallel (as Megatron-core requires)",
        )
    if spec.mapping.experts is not None and par.sharding_stage == 3:
        raise SpecError(
            "mapping.experts",
            "placing experts is not modelled with ZeRO-3 (whose gathered units assume every rank's share)",
        )


def _check_tp_overlap(spec: Spec) -> None:
    par = spec.parallelism
    if par.tp_comm_overlap and not par.sequence_parallel:
        raise SpecError(
            "parallelism.tp_comm_overlap",
            "overlaps the all-gathers and reduce-scatters of sequence parallelism: needs sequence_parallel "
            "(and tp > 1), as Megatron-core requires",
        )
