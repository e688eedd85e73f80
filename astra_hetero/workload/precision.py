"""Bytes per element of every tensor class, from the spec's precision section.

One place answers "how wide is this tensor": activations and the messages built from them (TP
collectives, pipeline sends), GEMM operands, weights, gradients (and the DP reduction), optimizer
state. Everything that used a hard-coded BF16 width asks a `Dtypes` instead.

The recipes follow Megatron-LM / NeMo with Transformer Engine:
  bf16, fp16   16-bit activations and weights; GEMMs in that format
  fp8          Transformer Engine keeps activations and weights in BF16 and casts the inputs of each
               linear layer to FP8 (E4M3/E5M2, 1 byte) for its forward, input-gradient and
               weight-gradient GEMMs; attention, norms and the LM head stay in BF16
  tf32, fp32   FP32 activations and weights; GEMMs on TF32 tensor cores or FP32 ALUs
Gradients live in a buffer of `grads` width and are reduced across DP in it. The optimizer holds a
master copy of the weights (unless they are FP32 already) and Adam's two moments, all in
`optimizer_states` width: FP32 is Megatron's default (12 B per parameter); BF16 is NeMo's distributed
Adam with `dtype: bf16` (apex DistributedFusedAdam with store_params: a BF16 parameter shard plus two
BF16 moments, 6 B per parameter).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from astra_hetero.spec.schema import ParallelismSpec, Spec
from astra_hetero.spec.schema.precision import WIDE_COMPUTE, PrecisionSpec, resolved_grads

DTYPE_BYTES = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "fp8": 1}
ADAM_MOMENTS = 2


@dataclass(frozen=True)
class Dtypes:
    """The width of each tensor class; plain data (hashable: operator shapes carry it)."""

    compute: str = "bf16"
    params: str = "bf16"
    grads: str = "fp32"
    optimizer_states: str = "fp32"
    fp8_recipe: str | None = None  # "delayed" | "current" with compute fp8

    @classmethod
    def from_spec(cls, spec: Spec) -> Dtypes:
        return cls.from_sections(spec.precision, spec.parallelism)

    @classmethod
    def from_sections(cls, precision: PrecisionSpec, parallelism: ParallelismSpec) -> Dtypes:
        """`precision.grads` unset follows `parallelism.grad_reduce_in_fp32` (the spec checks that
        both, when given, agree)."""
        grads = resolved_grads(precision, parallelism.grad_reduce_in_fp32)
        recipe = precision.fp8_recipe or ("delayed" if precision.compute == "fp8" else None)
        return cls(precision.compute, precision.resolved_params, grads, precision.optimizer_states, recipe)

    @property
    def fp8(self) -> bool:
        return self.compute == "fp8"

    @property
    def activation(self) -> str:
        """Format of activations between GEMMs, of what the layer stores and of what TP/PP send."""
        if self.compute in WIDE_COMPUTE:
            return "fp32"
        return "fp16" if self.compute == "fp16" else "bf16"

    @property
    def activation_bytes(self) -> int:
        return DTYPE_BYTES[self.activation]

    @property
    def gemm_input_bytes(self) -> int:
        """Bytes per element of a GEMM's A and B operands as the kernel reads them."""
        return DTYPE_BYTES[self.compute]

    @property
    def matmul(self) -> str:
        """The catalog rate a linear layer's GEMMs run at."""
        return self.compute

    @property
    def attention_matmul(self) -> str:
        """The rate the attention core runs at: TE runs it in BF16 under FP8 recipes; FP32 tensors
        run it at the FP32 recipe's matmul rate."""
        return "bf16" if self.fp8 else self.compute

    @property
    def param_bytes(self) -> int:
        """Weights as stored and as the distributed optimizer all-gathers them."""
        return DTYPE_BYTES[self.params]

    @property
    def grad_bytes(self) -> int:
        return DTYPE_BYTES[self.grads]

    @property
    def optimizer_state_bytes(self) -> int:
        """One optimizer state tensor (an Adam moment, or the master copy) per parameter."""
        return DTYPE_BYTES[self.optimizer_states]

    @property
    def master_bytes(self) -> int:
        """The optimizer's copy of the weights: none when the weights are FP32 themselves."""
        return 0 if self.params == "fp32" else self.optimizer_state_bytes

    @property
    def optimizer_bytes(self) -> int:
        """Optimizer memory per parameter it updates: master copy plus Adam's moments."""
        return self.master_bytes + ADAM_MOMENTS * self.optimizer_state_bytes

    @property
    def without_fp8(self) -> Dtypes:
        """The same recipe for a layer Transformer Engine leaves in BF16 (the LM head)."""
        return replace(self, compute="bf16", fp8_recipe=None) if self.fp8 else self


def adam_step_bytes(dt: Dtypes) -> int:
    """Bytes per parameter of a fused Adam step: reads the gradient, the weights of record (the
    master copy, or the FP32 weights themselves) and both moments, writes the weights of record and
    the moments back, and with a master copy writes the model's weights from it."""
    record = dt.master_bytes or dt.param_bytes
    moments = ADAM_MOMENTS * dt.optimizer_state_bytes
    model_copy = dt.param_bytes if dt.master_bytes else 0
    return dt.grad_bytes + 2 * (record + moments) + model_copy


BF16 = Dtypes()
