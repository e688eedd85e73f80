"""A Megatron-core MoE layer on one rank: router, token permutation, dispatch, grouped expert GEMMs,
combine, unpermutation, and the shared experts (megatron/core/transformer/moe/).

Tokens enter as the rank's sequence-parallel shard (T = tokens / tp; Megatron-core requires sequence
parallelism for MoE with TP). With the all-to-all dispatcher (`MoEAlltoAllTokenDispatcher`):
  router        logits = x·W_r [T, E], score function and top-k, and the load-balancing (auxiliary)
                loss (Megatron-core's default `aux_loss`): an FP32 softmax of the logits, the tokens per
                expert summed over the sequence-parallel shards (an all-reduce of E FP32 counts over TP)
  permute       the T·k (token, expert) copies gathered into expert order
  dispatch      all-to-all over the EP group: T·k·h BF16 values per rank (each rank keeps 1/ep)
  expert TP     with etp > 1, all-gather over the expert-TP group (etp times the tokens)
  sort          received chunks regrouped by local expert (more than one local expert)
  experts       fc1 [h → 2F/etp (gated) or F/etp], the activation, fc2 [F/etp → h] per local expert:
                with `parallelism.moe_grouped_gemm` one grouped GEMM for all local experts (TEGroupedMLP),
                without it Megatron-core's SequentialMLP: a Python loop over the local experts, each a
                GEMM kernel of its own rows (its own fixed cost, tile and wave quantization), its own
                activation kernel and, under FP8, its own casts
  ... then the same way back: unsort, reduce-scatter over expert TP, the combine all-to-all (T·k·h per
  rank), unpermute (the copies scaled by their router probabilities and summed per token).
With the all-gather dispatcher (`MoEAllGatherTokenDispatcher`) every rank gathers the tokens (and their
routing) of its ep·etp expert group, runs its experts on the ones routed to them and reduce-scatters
the result.

Routing imbalance (`routing.py`) scales the expert work and the dispatch/combine volume by the busiest
EP rank's load. Tokens travel and are stored in the activation format (`Shape.dtypes`); the expert
GEMMs run in the compute format (Transformer Engine's grouped GEMMs take FP8 like its other linear
layers). Byte counts per element of the memory-bound kernels, written for BF16 and scaled by
`Shape.width`. Token permutation is Megatron-core's unfused PyTorch code (moe_utils.permute /
unpermute; the fused TE kernels of `moe_permute_fusion` came later and are off by default): a row
gather (`index_select`) forward and a scatter-add backward, timed as the kernel catalog's measured
row-gather kind (`embedding`, PyTorch's index_select / index_add, kernels.py):
  router scores   read the FP32 logits, write probabilities and the top-k mask and indices: 12 B
  aux loss        per score: the FP32 softmax (read 4, write 4) and its sum over tokens (read 4): 12 B
  permute         gather each copied row (read and write): 4 B; its backward scatter-adds rows back: 6 B
  sort / unsort   read and write (a copy of the chunks in a new order): 4 B
  unpermute       scale each copy by its probability (read, write: 4 B; backward: the copy's gradient
                  read and written and the probability's gradient reduced from gradient and copy: 8 B),
                  then zero the tokens' rows and scatter-add the scaled copies into them (read the
                  copy, read and write the row: 6 B, 2 kernels; backward: a row gather, 4 B)
"""

from __future__ import annotations

import math

from astra_hetero.workload import fp8
from astra_hetero.workload.ops import (
    BYTES_FP32,
    Collective,
    Gemm,
    LayerStep,
    MoeShape,
    Op,
    Shape,
    gemm_op,
    linear_backward,
    linear_forward,
    memory_op,
)

ROUTER_BYTES = {"fwd": 12, "bwd": 12}
PERMUTE_BYTES = {"fwd": 4, "bwd": 6}
SORT_BYTES = 4
UNPERMUTE_BYTES = {"fwd": 6, "bwd": 4}
UNPERMUTE_SCALE_BYTES = {"fwd": 4, "bwd": 8}
AUX_LOSS_BYTES = {"fwd": 12, "bwd": 8}
GATED_BYTES = {"fwd": 6, "bwd": 10}  # SwiGLU per output element, as the dense MLP's
GELU_BYTES = {"fwd": 4, "bwd": 6}
ROUTING_BYTES_PER_SCORE = BYTES_FP32 + 1  # the all-gather dispatcher also gathers probabilities and mask


def moe_forward(x: Shape, shared: list[LayerStep]) -> list[LayerStep]:
    """The MoE layer's forward on one rank; `shared`: the shared experts' dense MLP block (with its TP
    collectives), run after the routed experts as Megatron-core does without shared-expert overlap."""
    m = _moe(x)
    tokens, h = _tokens(x), x.h
    steps: list[LayerStep] = [  # the router GEMM stays in the activation format (FP32 scores)
        linear_forward("router", tokens, h, m.experts, x.dtypes.without_fp8),
        memory_op("router_topk", tokens * m.experts, ROUTER_BYTES["fwd"], kernels=3, flops=4.0),
        *_aux_loss(x, "fwd"),
    ]
    steps += _dispatch(x, "fwd")
    steps += _experts_forward(x)
    steps += _combine(x, "fwd")
    return steps + shared


def moe_backward(x: Shape, shared: list[LayerStep]) -> list[LayerStep]:
    """The forward reversed: the gradient of a dispatch is a combine and vice versa."""
    m = _moe(x)
    tokens, h = _tokens(x), x.h
    steps = list(shared)
    steps += _dispatch_of_gradients(x)
    steps += _experts_backward(x)
    steps += _combine_of_gradients(x)
    return steps + [
        *_aux_loss(x, "bwd"),
        memory_op("router_topk", tokens * m.experts, ROUTER_BYTES["bwd"], kernels=2, flops=4.0),
        linear_backward("router", tokens, h, m.experts, x.dtypes.without_fp8),
    ]


def _aux_loss(x: Shape, phase: str) -> list[LayerStep]:
    """The load-balancing loss (switch_load_balancing_loss_func): FP32 softmax scores, tokens per
    expert summed over the sequence-parallel shards (forward; an all-reduce of E FP32 counts over
    TP), and their gradient (backward)."""
    m = _moe(x)
    op = memory_op(
        "router_aux_loss", _tokens(x) * m.experts, AUX_LOSS_BYTES[phase], kernels=4 if phase == "fwd" else 2
    )
    if phase == "fwd" and x.t > 1:
        return [op, Collective("all_reduce", BYTES_FP32 * m.experts, "tp")]
    return [op]


def _moe(x: Shape) -> MoeShape:
    if x.moe is None:
        raise ValueError("not a MoE shape")
    return x.moe


def _tokens(x: Shape) -> int:
    """Tokens entering the layer on this rank: the sequence-parallel shard (or all, without TP)."""
    return x.tokens // x.t if x.t > 1 else x.tokens


def expert_tokens(x: Shape) -> float:
    """(token, expert) copies this rank's experts process per micro-batch: its own copies' share of
    its expert group's, times etp (the expert-TP all-gather), at the busiest rank's load — ep/h times
    that on one of h holders under mapping.experts, none on a rank without experts."""
    m = _moe(x)
    if not m.holds:
        return 0.0
    return _tokens(x) * m.top_k * m.etp * m.load * m.ep / m.holders


def _copies_bytes(x: Shape) -> int:
    """One all-to-all's buffer on a rank: its T·k token copies (at the busiest rank's load); under
    mapping.experts what a holder receives, ep/h times that (the even stand-in of an uneven exchange)."""
    m = _moe(x)
    return int(x.dtypes.activation_bytes * _tokens(x) * m.top_k * m.load * x.h * m.ep / m.holders)


def _gathered_bytes(x: Shape, with_routing: bool) -> int:
    """The all-gather dispatcher's buffer: every token of the ep·etp expert group."""
    m = _moe(x)
    per_token = x.dtypes.activation_bytes * x.h + (ROUTING_BYTES_PER_SCORE * m.experts if with_routing else 0)
    return int(m.ep * m.etp * _tokens(x) * per_token)


def _dispatch(x: Shape, phase: str) -> list[LayerStep]:
    """Tokens from their owners to their experts (forward), as `phase` names the byte counts."""
    m = _moe(x)
    copies = _tokens(x) * m.top_k
    if m.dispatcher == "allgather":
        gathered = [Collective("all_gather", _gathered_bytes(x, True), "moe")] if m.ep * m.etp > 1 else []
        return [*gathered, memory_op("moe_permute", expert_tokens(x) * x.h, PERMUTE_BYTES[phase] * x.width)]
    steps: list[LayerStep] = [memory_op("moe_permute", copies * x.h, PERMUTE_BYTES[phase] * x.width)]
    if m.ep > 1:
        steps.append(Collective("all_to_all", _copies_bytes(x), "ep"))
    if m.etp > 1:
        steps.append(Collective("all_gather", _expert_rows_bytes(x), "etp"))
    if m.ep > 1 and m.local_experts > 1 and m.holds:
        steps.append(memory_op("moe_sort_chunks", expert_tokens(x) * x.h, SORT_BYTES * x.width))
    return steps


def _combine(x: Shape, phase: str) -> list[LayerStep]:
    """Expert outputs back to their tokens' owners, scaled and summed."""
    m = _moe(x)
    copies = _tokens(x) * m.top_k
    if m.dispatcher == "allgather":
        scatter = [Collective("reduce_scatter", _gathered_bytes(x, False), "moe")] if m.ep * m.etp > 1 else []
        unpermute = memory_op("moe_unpermute", expert_tokens(x) * x.h, UNPERMUTE_BYTES[phase] * x.width)
        return [_unpermute_scale(x, expert_tokens(x), phase), unpermute, *scatter]
    steps: list[LayerStep] = []
    if m.ep > 1 and m.local_experts > 1 and m.holds:
        steps.append(memory_op("moe_unsort_chunks", expert_tokens(x) * x.h, SORT_BYTES * x.width))
    if m.etp > 1:
        steps.append(Collective("reduce_scatter", _expert_rows_bytes(x), "etp"))
    if m.ep > 1:
        steps.append(Collective("all_to_all", _copies_bytes(x), "ep"))
    return steps + [
        _unpermute_scale(x, copies, phase),
        memory_op(
            "moe_unpermute",
            copies * x.h,
            UNPERMUTE_BYTES[phase] * x.width,
            kernels=2 if phase == "fwd" else 1,
        ),
    ]


def _unpermute_scale(x: Shape, copies: float, phase: str) -> Op:
    """Each copy scaled by its router probability (unfused: a kernel before the scatter-add)."""
    return memory_op("moe_unpermute_scale", copies * x.h, UNPERMUTE_SCALE_BYTES[phase] * x.width)


def _expert_rows_bytes(x: Shape) -> int:
    """The copies this rank's experts process, in the activation format (the expert-TP buffer)."""
    return int(x.dtypes.activation_bytes * expert_tokens(x) * x.h)


def _dispatch_of_gradients(x: Shape) -> list[LayerStep]:
    """The backward of the combine: output gradients travel to the experts like tokens do."""
    forward = _combine(x, "bwd")
    return [_mirror(step) for step in reversed(forward)]


def _combine_of_gradients(x: Shape) -> list[LayerStep]:
    forward = _dispatch(x, "bwd")
    return [_mirror(step) for step in reversed(forward)]


def _mirror(step: LayerStep) -> LayerStep:
    """A collective's gradient: all-gather ↔ reduce-scatter; an all-to-all stays one."""
    if isinstance(step, Collective):
        kind = {"all_gather": "reduce_scatter", "reduce_scatter": "all_gather"}.get(step.kind, step.kind)
        return Collective(kind, step.bytes, step.group)
    return step


def _expert_widths(x: Shape) -> tuple[int, int]:
    """(fc1 output width, fc2 input width) of one expert on this rank."""
    m = _moe(x)
    inner = m.ffn // m.etp
    return (2 * inner if x.swiglu else inner), inner


def _grouped(name: str, x: Shape, d_in: int, d_out: int, backward: bool) -> Op:
    """One GEMM per local expert, each on its share of the rank's token copies: one grouped kernel
    (batch = local experts) per GEMM kind, or with `moe_grouped_gemm` off one kernel per expert."""
    m, dt = _moe(x), x.dtypes
    rows = math.ceil(expert_tokens(x) / m.local_experts)
    formats = {"fmt": dt.matmul, "operand_bytes": dt.gemm_input_bytes, "c_bytes": dt.activation_bytes}
    wgrad = {**formats, "c_bytes": dt.grad_bytes, "c_read_bytes": dt.grad_bytes}
    kinds = (
        [(rows, d_out, d_in, formats)]
        if not backward
        else [(rows, d_in, d_out, formats), (d_in, d_out, rows, wgrad)]
    )
    if m.grouped_gemm:
        return gemm_op(name, *(Gemm(a, b, c, m.local_experts, **f) for a, b, c, f in kinds))
    return gemm_op(name, *(Gemm(a, b, c, 1, **f) for _ in range(m.local_experts) for a, b, c, f in kinds))


def _fp8_cast(x: Shape, name: str, elements: float) -> list[Op]:
    """Under FP8, a grouped GEMM's input (or output gradient) cast and transposed per local expert,
    as Transformer Engine does for its other linear layers (see fp8.py for the byte counts)."""
    if not x.dtypes.fp8:
        return []
    current = x.dtypes.fp8_recipe == "current"
    per_element = fp8.CAST_TRANSPOSE_BYTES + (fp8.AMAX_BYTES if current else 0)
    kernels = _moe(x).local_experts * (1 + int(current))
    return [memory_op(f"{name}_fp8_cast", elements, per_element, kernels=kernels)]


def _activation_kernels(x: Shape) -> int:
    """The experts' activation: one kernel over all copies after a grouped GEMM, one per expert in
    SequentialMLP's loop."""
    m = _moe(x)
    return 1 if m.grouped_gemm else m.local_experts


def _expert_ops(x: Shape) -> tuple[int, int, float, tuple[str, dict[str, int]]] | None:
    """(fc1 width, inner width, copies processed, activation kernel) of this rank's experts, None
    on a rank without experts."""
    if not _moe(x).holds:
        return None
    fc1, inner = _expert_widths(x)
    activation = ("expert_swiglu", GATED_BYTES) if x.swiglu else ("expert_gelu", GELU_BYTES)
    return fc1, inner, expert_tokens(x), activation


def _experts_forward(x: Shape) -> list[LayerStep]:
    found = _expert_ops(x)
    if found is None:
        return []
    fc1, inner, rows, (kernel, per_element) = found
    return [
        *_fp8_cast(x, "expert_fc1", rows * x.h),
        _grouped("expert_fc1", x, x.h, fc1, backward=False),
        memory_op(
            kernel,
            rows * inner,
            per_element["fwd"] * x.width,
            _activation_kernels(x),
            4.0 if x.swiglu else 8.0,
        ),
        *_fp8_cast(x, "expert_fc2", rows * inner),
        _grouped("expert_fc2", x, inner, x.h, backward=False),
    ]


def _experts_backward(x: Shape) -> list[LayerStep]:
    found = _expert_ops(x)
    if found is None:
        return []
    fc1, inner, rows, (kernel, per_element) = found
    return [
        *_fp8_cast(x, "expert_fc2_grad", rows * x.h),
        _grouped("expert_fc2", x, inner, x.h, backward=True),
        memory_op(kernel, rows * inner, per_element["bwd"] * x.width, _activation_kernels(x), flops=8.0),
        *_fp8_cast(x, "expert_fc1_grad", rows * fc1),
        _grouped("expert_fc1", x, x.h, fc1, backward=True),
    ]


def expert_parameters_per_layer(num_experts: int, hidden: int, ffn: int, gated: bool) -> int:
    """Weights of all routed experts of one layer (no biases, as Megatron-core's grouped experts)."""
    return num_experts * (3 if gated else 2) * hidden * ffn


def moe_activation_bytes(x: Shape) -> float:
    """What a MoE layer stores for its backward, per micro-batch on one rank (its routed part; the
    shared experts count as a dense MLP), as Megatron-core saves it since "Memory efficient token
    permutation" (NVIDIA/Megatron-LM 2659630, April 2025, Megatron-core 0.13): the router's input and
    FP32 scores; per routed copy its FP32 routing probability, which the expert's activation applies
    (so the unpermutation is a plain sum that saves nothing), the expert's input, its fc1 output and its
    fc2 input (the grouped GEMMs' and the weighted activation's saved tensors). The permutation saves
    only its index map (its backward is the inverse permutation), so the permuted copies are stored
    once, as the experts' saved inputs. (Before that change the unpermutation weighed the expert
    outputs by the probabilities and kept them: T·k·h more.)"""
    m, w = _moe(x), x.dtypes.activation_bytes
    tokens = _tokens(x)
    fc1, inner = _expert_widths(x)
    routing = tokens * (w * x.h + BYTES_FP32 * m.experts)
    # the grouped GEMMs' saved inputs are in their operand format (FP8 under an FP8 recipe)
    per_copy = x.dtypes.gemm_input_bytes * (x.h + inner) + w * fc1 + BYTES_FP32
    return routing + expert_tokens(x) * per_copy
