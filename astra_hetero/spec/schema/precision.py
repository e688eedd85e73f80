"""The precision section: the number format of the GEMMs and of every tensor class that takes memory."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from astra_hetero.spec.schema.base import Strict

ComputeFormat = Literal["bf16", "fp16", "fp8", "tf32", "fp32"]
COMPUTE_FORMATS: tuple[str, ...] = ("bf16", "fp16", "fp8", "tf32", "fp32")
WIDE_COMPUTE = ("tf32", "fp32")  # FP32 tensors; tf32 only rounds the matmul inputs


class PrecisionSpec(Strict):
    """Mixed-precision recipe. `compute` is the GEMM input format: bf16/fp16 (16-bit tensors), fp8
    (Transformer Engine: FP8 GEMMs between BF16 tensors), tf32 (FP32 tensors, TF32 tensor-core
    matmuls) or fp32 (FP32 everywhere, no tensor cores). Unset dtypes follow the usual recipe."""

    compute: ComputeFormat = Field("bf16", description="GEMM input format")
    params: Literal["bf16", "fp16", "fp32"] | None = Field(
        None,
        description="model weights as the forward reads them (None: fp32 with tf32/fp32 compute, fp16 "
        "with fp16, else bf16); below fp32 the optimizer keeps a master copy",
    )
    grads: Literal["fp32", "bf16"] | None = Field(
        None,
        description="main-gradient buffer and its data-parallel reduction (None: fp32, or the 16-bit "
        "weights' width when parallelism.grad_reduce_in_fp32 is false)",
    )
    optimizer_states: Literal["fp32", "bf16"] = Field(
        "fp32",
        description="Adam moments and master weights (bf16: NeMo's distributed Adam with dtype bf16)",
    )
    fp8_recipe: Literal["delayed", "current"] | None = Field(
        None,
        description="fp8 only: Transformer Engine scaling: delayed (amax history, one amax all-reduce "
        "per pass; default) or current (per-tensor amax computed before each cast)",
    )

    @model_validator(mode="after")
    def _consistent(self) -> PrecisionSpec:
        if self.compute in WIDE_COMPUTE and self.params not in (None, "fp32"):
            raise ValueError(
                f"compute {self.compute} runs on FP32 tensors; params must be fp32, not {self.params}"
            )
        if self.fp8_recipe is not None and self.compute != "fp8":
            raise ValueError(f"fp8_recipe needs compute: fp8 (compute is {self.compute})")
        return self

    @property
    def resolved_params(self) -> str:
        if self.params is not None:
            return self.params
        if self.compute in WIDE_COMPUTE:
            return "fp32"
        return "fp16" if self.compute == "fp16" else "bf16"


def resolved_grads(precision: PrecisionSpec, grad_reduce_in_fp32: bool | None) -> str:
    """The gradient buffer's format: `precision.grads`; else FP32, or with grad_reduce_in_fp32 false the
    weights' own width (Megatron allocates the buffer in the parameters' dtype then)."""
    if precision.grads is not None:
        return precision.grads
    if grad_reduce_in_fp32 is False and precision.resolved_params != "fp32":
        return "bf16"
    return "fp32"
