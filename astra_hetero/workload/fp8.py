"""The extra kernels of FP8 training with Transformer Engine (TE), per linear layer of a transformer.

TE keeps activations in BF16 and quantizes each linear layer's GEMM inputs to FP8 (one byte): its
forward GEMM reads the FP8 input and the FP8 weight; the input-gradient GEMM the FP8 output gradient
and the weight; the weight-gradient GEMM the transposes of the FP8 input and output gradient (Hopper's
FP8 GEMMs take only the "TN" layout, so each operand it needs transposed is stored transposed).
What that costs around the GEMMs (TE 1.x/2.x, transformer_engine/pytorch/module/*.py):

  LayerNorm-fed inputs (QKV, MLP up: TE's LayerNormLinear)
      delayed scaling: the norm kernel writes FP8 directly (1 B per element instead of 2); with
      sequence parallelism the FP8 output is what is all-gathered; the backward transposes the
      gathered FP8 input for the weight gradient (fp8_transpose: 2 B per element)
      current scaling: the scale needs the tensor's amax first, so the norm writes BF16, an amax
      kernel reads it (2 B), a cast kernel writes FP8 (3 B), and with sequence parallelism the
      shards' amaxes are all-reduced over TP (one FP32) so every rank casts alike
  other inputs (attention output → projection, activation → MLP down: TE's Linear)
      cast_transpose: reads BF16, writes FP8 and its transpose (4 B per element); current scaling
      reads it once more for the amax (2 B)
  output gradients (every linear layer's backward)
      cast_transpose of the incoming gradient (4 B per output element); current scaling +2 B
  weights
      cast to FP8 and transposed once per iteration (TE caches them over micro-batches): reads BF16,
      writes FP8 and its transpose (4 B per weight); current scaling +2 B for the amax
  delayed scaling's amax reduction
      at the end of every forward and backward pass of a model chunk TE all-reduces the amaxes of
      every FP8 tensor of the pass over the amax group (Megatron: the stage's TP×DP ranks) and updates
      the scales with one fused kernel (`amax_all_reduce_bytes` is its size)

The LM head, attention core, norms and element-wise kernels stay in BF16 (Megatron-core's defaults:
the output layer is not a TE module, `fp8_dot_product_attention` off).
"""

from __future__ import annotations

from astra_hetero.workload.ops import BYTES_FP32, Collective, LayerStep, Op, Shape, memory_op

CAST_TRANSPOSE_BYTES = 4  # read BF16, write FP8 and FP8 transposed
CAST_BYTES = 3  # read BF16, write FP8
TRANSPOSE_BYTES = 2  # read FP8, write FP8 transposed
AMAX_BYTES = 2  # read BF16 once more to find its absolute maximum
FUSED_NORM_SAVING = 1  # the norm writes FP8 instead of BF16
# FP8 tensors per linear layer whose amax TE tracks: forward input, weight, output gradient.
TENSORS_PER_LINEAR = 3
LINEARS_PER_LAYER = 4  # QKV, attention projection, MLP up (or gate+up), MLP down


def _on(x: Shape) -> bool:
    return x.dtypes.fp8


def _current(x: Shape) -> bool:
    return x.dtypes.fp8_recipe == "current"


def norm_saving(x: Shape) -> float:
    """Bytes per element the norm in front of a LayerNorm-fed linear layer saves by writing FP8."""
    return FUSED_NORM_SAVING if _on(x) and not _current(x) else 0.0


def gathered_input_bytes(x: Shape) -> int:
    """Width of a LayerNorm-fed linear layer's input as sequence parallelism all-gathers it."""
    return x.dtypes.gemm_input_bytes if _on(x) else x.dtypes.activation_bytes


def norm_fed_input(x: Shape, name: str) -> list[LayerStep]:
    """Before a LayerNorm-fed linear layer's forward (and its input all-gather)."""
    if not (_on(x) and _current(x)):
        return []
    elements = x.elementwise_tokens * x.h
    reduce = [Collective("all_reduce", BYTES_FP32)] if x.t > 1 and x.sp else []
    return [
        memory_op(f"{name}_fp8_amax", elements, AMAX_BYTES),
        *reduce,
        memory_op(f"{name}_fp8_cast", elements, CAST_BYTES),
    ]


def plain_input(x: Shape, name: str, width: int) -> list[Op]:
    """Before a TE Linear layer's forward: its `width`-wide input cast and transposed."""
    if not _on(x):
        return []
    per_element = CAST_TRANSPOSE_BYTES + (AMAX_BYTES if _current(x) else 0)
    return [memory_op(f"{name}_fp8_cast", x.tokens * width, per_element, kernels=1 + int(_current(x)))]


def output_gradient(x: Shape, name: str, width: int) -> list[Op]:
    """Before a linear layer's backward: its `width`-wide output gradient cast and transposed."""
    if not _on(x):
        return []
    per_element = CAST_TRANSPOSE_BYTES + (AMAX_BYTES if _current(x) else 0)
    return [memory_op(f"{name}_grad_fp8_cast", x.tokens * width, per_element, kernels=1 + int(_current(x)))]


def norm_fed_transpose(x: Shape, name: str) -> list[Op]:
    """Before a LayerNorm-fed layer's weight gradient: the gathered FP8 input transposed."""
    if not _on(x):
        return []
    return [memory_op(f"{name}_fp8_transpose", x.tokens * x.h, TRANSPOSE_BYTES)]


def weight_cast_bytes(x: Shape) -> float:
    """Per parameter and iteration: the FP8 weight copies (0 without FP8). Embedding and LM-head
    weights, which stay BF16, are counted too: an approximation of well under 1 % of the step."""
    if not _on(x):
        return 0.0
    return CAST_TRANSPOSE_BYTES + (AMAX_BYTES if _current(x) else 0)


def amax_all_reduce_bytes(x: Shape, num_layers: int) -> int:
    """Delayed scaling: the FP32 amaxes one pass of `num_layers` layers all-reduces (0 otherwise)."""
    if not _on(x) or _current(x):
        return 0
    return BYTES_FP32 * TENSORS_PER_LINEAR * LINEARS_PER_LAYER * num_layers
