"""Operator-level cost model of a decoder-only transformer, per micro-batch and per TP rank.

Each pass is the list of operators Megatron-LM launches, in order, with the TP collectives between
them: every GEMM with its (M, N, K) shape, every memory-bound kernel with the bytes it moves, and the
attention core fused or unfused (`attention.py`). `timing.py` turns an operator into time on a GPU.

Byte counts per element follow the kernels Megatron runs (BF16 activations, FP32 main gradients):
  norm (LayerNorm/RMSNorm)   forward reads x, writes y: 4 B; backward reads dy and x, writes dx, and
                             adds the residual branch's gradient: 12 B (plus the weight-grad reduction)
  bias-dropout-add           forward reads x and the residual, writes y and a 1-byte mask: 7 B;
                             backward reads dy and the mask, writes dx: 5 B
  GeLU (bias fused)          4 B forward, 6 B backward; SwiGLU per output element 6 B / 10 B
  squared ReLU (Nemotron)    Megatron-core's `torch.pow(F.relu(x), 2)`, unfused: relu then pow, each
                             reading and writing the tensor (8 B, 2 kernels); backward through pow and
                             relu reads the gradient and the saved relu output twice (12 B, 3 kernels)
  RoPE                       Transformer Engine's fused rotary kernel, once for Q and once for K: reads
                             and writes each (4 B per element) in both passes
  cross-entropy (vocab-parallel, megatron/core/tensor_parallel/cross_entropy.py): the logits are cast
                             to FP32 (6 B), max-reduced (4 B), shifted, exponentiated, summed and
                             normalised in place (28 B); backward scales the saved softmax (8 B) and
                             casts the gradient back to BF16 (6 B)
  Megatron-LM's own layer implementation (the one with the unfused attention core, before Transformer
  Engine; megatron/model/transformer.py and mpu/layers.py, 2020-2022) runs a few kernels more:
  QKV bias add               the column-parallel QKV GEMM is `matmul` then `output + bias`: 4 B per
                             output element; its backward sums the bias gradient over tokens (2 B)
  bias gradients             the row-parallel biases (added in bias-dropout-add) and the GeLU bias get
                             their gradient from autograd's sum over tokens: 2 B per element read
  QKV gradient concatenation the Q, K, V gradients come out of the batched GEMMs as three tensors and
                             are concatenated into the QKV output's gradient: 4 B per element
  norm backward              apex's LayerNorm backward reads dy and x twice (one kernel for the
                             γ/β partial sums, one for dx): 16 B instead of 12
  Transformer Engine fuses these into its GEMM epilogues and norm kernels.
  Adam step                  reads grad, master weight, m, v (16 B), writes master, m, v (12 B) and the
                             BF16 weight (2 B); the gradient norm for clipping reads the FP32 gradient
                             (4 B); the FP32 gradient buffer is zeroed every iteration (4 B, unsharded)
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from itertools import product

from astra_hetero.spec.schema import ModelSpec, ParallelismSpec
from astra_hetero.workload import fp8
from astra_hetero.workload.attention import DROPOUT_BYTES
from astra_hetero.workload.context_parallel import core_attention_backward, core_attention_forward
from astra_hetero.workload.moe import expert_parameters_per_layer, moe_backward, moe_forward
from astra_hetero.workload.ops import (
    BYTES_BF16,
    BYTES_FP32,
    Collective,
    Concurrent,
    LayerStep,
    Op,
    Piece,
    Shape,
    linear_backward,
    linear_forward,
    memory_op,
    shape_of,
)
from astra_hetero.workload.precision import BF16, Dtypes, adam_step_bytes

__all__ = ["BYTES_BF16", "Collective", "LayerStep", "Op", "Shape", "shape_of"]

NORM_BYTES = {"fwd": 4, "bwd": 12}
LOCAL_NORM_BWD_BYTES = 16  # apex LayerNorm: dy and x read by both backward kernels
BIAS_ADD_BYTES, BIAS_GRAD_BYTES, CONCAT_BYTES = 4, 2, 4
FINAL_NORM_BWD_BYTES = 6  # no residual branch to add
NORM_BWD_KERNELS = 3  # input gradient, weight-gradient partials, their reduction
BIAS_DROPOUT_ADD_BYTES = {"fwd": 7, "bwd": 5}
GELU_BYTES = {"fwd": 4, "bwd": 6}
SWIGLU_BYTES = {"fwd": 6, "bwd": 10}
SQUARED_RELU = {"fwd": (8, 2, 2.0), "bwd": (12, 3, 3.0)}  # bytes per element, kernels, FLOPs
ROPE_BYTES, ROPE_FLOPS = 4, 3.0
CROSS_ENTROPY_MAX_BYTES, CROSS_ENTROPY_BYTES, CROSS_ENTROPY_BWD_BYTES = 10, 28, 14
# Optimizer-phase operators are sized per million parameters (calibration rows use the same unit).
OPTIMIZER_UNIT_PARAMS = 1_000_000
ADAM_FLOPS, GRAD_NORM_BYTES, ZERO_GRAD_BYTES = 10, 4, 4  # Adam's bytes: precision.adam_step_bytes


def _tp_enter(x: Shape, width: int | None = None) -> list[Collective]:
    """Before a column-parallel block: all-gather of the sequence shards with SP, nothing without.
    `width`: bytes per element gathered (default: the activation format's)."""
    if x.t == 1 or not x.sp:
        return []
    return [Collective("all_gather", _activation_bytes(x, width))]


def _tp_exit(x: Shape) -> list[Collective]:
    """After a row-parallel block: reduce-scatter with SP, all-reduce without."""
    if x.t == 1:
        return []
    return [Collective("reduce_scatter" if x.sp else "all_reduce", _activation_bytes(x))]


def _regather(x: Shape, width: int | None = None) -> list[Collective]:
    """With SP a column-parallel layer keeps only its sequence shard of the input for the backward and
    all-gathers it again there for the weight gradient (Megatron-LM mpu/layers.py
    LinearWithGradAccumulationAndAsyncCommunication.backward, 2022; Transformer Engine's Linear and
    LayerNormLinear likewise). Megatron launches it beside the input-gradient GEMM; the engine runs
    TP collectives blocking, as Calculon's reproduction of Korthikanti et al.'s Table 5 counts it
    (calculon-ai/calculon validation/seqsel/tab5: seq_par_ag_redo, tensor_par_overlap none)."""
    return [Collective("all_gather", _activation_bytes(x, width))] if x.t > 1 and x.sp else []


def _activation_bytes(x: Shape, width: int | None = None) -> int:
    return (width or x.dtypes.activation_bytes) * x.tokens * x.h


def _mlp_forward(x: Shape) -> list[Op]:
    f, t, dt = x.f // x.t, x.tokens, x.dtypes
    first = ("mlp_gate_up", 2 * f) if x.swiglu else ("mlp_up", f)
    return [
        linear_forward(first[0], t, x.h, first[1], dt),
        _activation(x, "fwd"),
        *fp8.plain_input(x, "mlp_down", f),
        linear_forward("mlp_down", t, f, x.h, dt),
    ]


def _mlp_block_forward(x: Shape, gathered: int | None) -> list[LayerStep]:
    """The MLP with the TP collectives around it: dense, or the MoE layer with its shared experts
    (`gathered`: bytes per element the sequence-parallel all-gather moves)."""
    if x.moe is None:
        return [*fp8.norm_fed_input(x, "mlp_up"), *_tp_enter(x, gathered), *_mlp_forward(x), *_tp_exit(x)]
    shared = replace(x, f=x.moe.shared_ffn)
    dense = [
        *fp8.norm_fed_input(shared, "mlp_up"),
        *_tp_enter(x, gathered),
        *_mlp_forward(shared),
        *_tp_exit(x),
    ]
    return moe_forward(x, dense if x.moe.shared_ffn else [])


def _mlp_block_backward(x: Shape, grad_enter: list[LayerStep]) -> list[LayerStep]:
    if x.moe is None:
        return [*grad_enter, *_mlp_backward(x), *_tp_exit(x)]
    shared = replace(x, f=x.moe.shared_ffn)
    return moe_backward(x, [*grad_enter, *_mlp_backward(shared), *_tp_exit(x)] if x.moe.shared_ffn else [])


def _mlp_backward(x: Shape) -> list[Op]:
    f, t, dt = x.f // x.t, x.tokens, x.dtypes
    first = ("mlp_gate_up", 2 * f) if x.swiglu else ("mlp_up", f)
    return [
        *fp8.output_gradient(x, "mlp_down", x.h),
        linear_backward("mlp_down", t, f, x.h, dt),
        _activation(x, "bwd"),
        *_local(x, memory_op("mlp_up_bias_grad", t * f, BIAS_GRAD_BYTES, flops=1.0)),
        *_regather(x, fp8.gathered_input_bytes(x)),
        *fp8.output_gradient(x, first[0], first[1]),
        *fp8.norm_fed_transpose(x, first[0]),
        linear_backward(first[0], t, x.h, first[1], dt),
    ]


def _activation(x: Shape, phase: str) -> Op:
    """The MLP's activation over the rank's t × f/tp outputs."""
    elements = x.tokens * (x.f // x.t)
    if x.squared_relu:
        per_element, kernels, flops = SQUARED_RELU[phase]
        return memory_op("squared_relu", elements, per_element * x.width, kernels, flops=flops)
    if x.swiglu:
        return memory_op(
            "swiglu", elements, SWIGLU_BYTES[phase] * x.width, flops=4.0 if phase == "fwd" else 8.0
        )
    return memory_op("gelu", elements, GELU_BYTES[phase] * x.width, flops=8.0)


def _rope(x: Shape) -> list[Op]:
    """Rotary embeddings on the rank's query and key heads (the same in both passes)."""
    if not x.rope:
        return []
    elements = x.tokens * (x.a + x.kv) // x.t * x.d
    return [memory_op("rope", elements, ROPE_BYTES * x.width, kernels=2, flops=ROPE_FLOPS)]


def layer_forward(x: Shape) -> list[LayerStep]:
    norm, dt = x.elementwise_tokens * x.h, x.dtypes
    norm_bytes = NORM_BYTES["fwd"] * x.width - fp8.norm_saving(x)
    residual_bytes = BIAS_DROPOUT_ADD_BYTES["fwd"] * x.width
    gathered = fp8.gathered_input_bytes(x)
    return [
        memory_op("norm_attn", norm, norm_bytes, flops=5.0, kernel=_norm_kernel(x)),
        *fp8.norm_fed_input(x, "qkv_proj"),
        *_tp_enter(x, gathered),
        linear_forward("qkv_proj", x.tokens, x.h, x.qkv_width // x.t, dt),
        *_local(x, memory_op("qkv_bias", x.tokens * x.qkv_width // x.t, BIAS_ADD_BYTES, flops=1.0)),
        *_rope(x),
        *core_attention_forward(x),
        *fp8.plain_input(x, "attn_out_proj", x.q_width // x.t),
        linear_forward("attn_out_proj", x.tokens, x.q_width // x.t, x.h, dt),
        *_tp_exit(x),
        memory_op("residual_attn", norm, residual_bytes, flops=2.0, random=True),
        memory_op("norm_mlp", norm, norm_bytes, flops=5.0, kernel=_norm_kernel(x)),
        *_mlp_block_forward(x, gathered),
        memory_op("residual_mlp", norm, residual_bytes, flops=2.0, random=True),
    ]


def _local(x: Shape, *ops: Op) -> list[Op]:
    """Kernels only Megatron-LM's own (pre-Transformer-Engine) biased layers run."""
    return list(ops) if x.local_kernels and x.biases else []


def _norm_kernel(x: Shape) -> str:
    """Megatron-LM's own layer normalises with apex's FusedLayerNorm (kernel catalog kind
    `apex_norm`); Transformer Engine's norms take the `norm` kind."""
    return "apex_norm" if x.local_kernels else ""


def _norm_backward(x: Shape, name: str) -> Op:
    per_element = (LOCAL_NORM_BWD_BYTES if x.local_kernels else NORM_BYTES["bwd"]) * x.width
    return memory_op(
        name, x.elementwise_tokens * x.h, per_element, NORM_BWD_KERNELS, flops=8.0, kernel=_norm_kernel(x)
    )


def op_sac_recompute(x: Shape) -> list[LayerStep]:
    """What torchtitan's per-op selective activation checkpointing (`recompute: selective_op`;
    torchtitan's selective_ac_option "op", parallelize_llama.py `_save_list` and `_custom_policy`,
    2024-12 to 2025-06) recomputes at the start of a layer's backward: the layer's forward but the
    operators whose outputs it saves — the attention core (SDPA's outputs, the context-parallel
    exchange inside it too), the sequence-parallel reduce-scatters, and every aten.mm output but
    every second one. In a Llama block the matrix products run wq, wk, wv, wo, w1, w3, w2 (separate
    nn.Linear modules), so wk, wo and w3 are recomputed (a non-gated MLP: wk, wo and its down
    projection). Under FP8 the linears run aten._scaled_mm, which the save list does not hold: every
    linear is recomputed. Norms, RoPE, the activation, residual adds, FP8 casts and the TP all-gathers
    in front of column-parallel linears are recomputed (not in the list)."""
    core = core_attention_forward(x)
    dt = x.dtypes
    if dt.fp8:
        products: dict[str, list[LayerStep]] = {}
    else:
        k_proj = linear_forward("k_proj", x.tokens, x.h, x.kv * x.d // x.t, dt)
        products = {"qkv_proj": [k_proj], "mlp_up": []}
        if x.swiglu:  # w1 (saved), w3 (recomputed), w2 (saved)
            products["mlp_gate_up"] = [linear_forward("mlp_up", x.tokens, x.h, x.f // x.t, dt)]
            products["mlp_down"] = []
    steps: list[LayerStep] = []
    for step in layer_forward(x):
        if step in core or (isinstance(step, Collective) and step.kind == "reduce_scatter"):
            continue
        replaced = products.get(step.name, [step]) if isinstance(step, Op) else [step]
        steps += [replace(s, name=f"recompute_{s.name}") if isinstance(s, Op) else s for s in replaced]
    return steps


def layer_backward(x: Shape, recompute: str) -> list[LayerStep]:
    """The forward reversed. Collectives mirror the forward's: the gradient of an all-reduce after a
    row-parallel block needs none, the input gradient of a column-parallel block is all-reduced (or
    reduce-scattered with SP, where the forward's reduce-scatter becomes an all-gather).
    `selective_op` first recomputes what op_sac_recompute lists."""
    norm, dt = x.elementwise_tokens * x.h, x.dtypes
    grad_enter = [Collective("all_gather", _activation_bytes(x))] if x.t > 1 and x.sp else []
    qkv = x.tokens * x.qkv_width // x.t
    residual_bytes = BIAS_DROPOUT_ADD_BYTES["bwd"] * x.width
    return [
        *(op_sac_recompute(x) if recompute == "selective_op" else []),
        memory_op("residual_mlp", norm, residual_bytes, flops=1.0),
        *_local(x, memory_op("mlp_down_bias_grad", norm, BIAS_GRAD_BYTES, flops=1.0)),
        *_mlp_block_backward(x, grad_enter),
        _norm_backward(x, "norm_mlp"),
        memory_op("residual_attn", norm, residual_bytes, flops=1.0),
        *_local(x, memory_op("attn_out_bias_grad", norm, BIAS_GRAD_BYTES, flops=1.0)),
        *grad_enter,
        *fp8.output_gradient(x, "attn_out_proj", x.h),
        linear_backward("attn_out_proj", x.tokens, x.q_width // x.t, x.h, dt),
        *core_attention_backward(x, recompute == "selective"),
        *_rope(x),
        *_local(
            x,
            memory_op("qkv_grad_concat", qkv, CONCAT_BYTES),
            memory_op("qkv_bias_grad", qkv, BIAS_GRAD_BYTES, flops=1.0),
        ),
        *_regather(x, fp8.gathered_input_bytes(x)),
        *fp8.output_gradient(x, "qkv_proj", x.qkv_width // x.t),
        *fp8.norm_fed_transpose(x, "qkv_proj"),
        linear_backward("qkv_proj", x.tokens, x.h, x.qkv_width // x.t, dt),
        *_tp_exit(x),
        _norm_backward(x, "norm_attn"),
    ]


def embedding_forward(x: Shape) -> list[LayerStep]:
    """Vocab-parallel lookup (each TP rank its vocabulary shard, then summed across TP), dropout."""
    return [
        memory_op("embedding", x.tokens * x.h, 2 * x.dtypes.activation_bytes, kernels=2),
        *_tp_exit(x),
        memory_op(
            "embedding_dropout", x.elementwise_tokens * x.h, DROPOUT_BYTES["fwd"] * x.width, random=True
        ),
    ]


def embedding_backward(x: Shape) -> list[LayerStep]:
    """Dropout's gradient, then the dense gradient of the vocabulary shard: zeroed, scatter-added
    from the tokens' gradients, and added into the FP32 main gradient (12 B per table entry)."""
    table = x.v / x.t * x.h
    grad_enter = [Collective("all_gather", _activation_bytes(x))] if x.t > 1 and x.sp else []
    main_grad = 3 * x.dtypes.grad_bytes  # zeroed, scatter-added into, added to the main gradient
    return [
        memory_op("embedding_dropout", x.elementwise_tokens * x.h, DROPOUT_BYTES["bwd"] * x.width),
        *grad_enter,
        memory_op("embedding_grad", 1.0, table * main_grad + x.tokens * x.h * 10 * x.width, kernels=4),
    ]


def head_forward(x: Shape) -> list[LayerStep]:
    """Final norm, LM head GEMM over the vocabulary shard, vocab-parallel cross-entropy (three FP32
    all-reduces of one value per token across TP: max logit, target logit, sum of exponentials)."""
    logits = x.tokens * (x.v // x.t)
    per_token = [Collective("all_reduce", BYTES_FP32 * x.tokens)] if x.t > 1 else []
    return [
        memory_op(
            "final_norm",
            x.elementwise_tokens * x.h,
            NORM_BYTES["fwd"] * x.width,
            flops=5.0,
            kernel=_norm_kernel(x),
        ),
        *_tp_enter(x),
        linear_forward("lm_head", x.tokens, x.h, x.v // x.t, x.dtypes.without_fp8),
        memory_op("cross_entropy_max", logits, CROSS_ENTROPY_MAX_BYTES, kernels=2, flops=1.0),
        *per_token,
        memory_op("cross_entropy", logits, CROSS_ENTROPY_BYTES, kernels=4, flops=4.0),
        *per_token,
        *per_token,
    ]


def head_backward(x: Shape) -> list[LayerStep]:
    logits = x.tokens * (x.v // x.t)
    return [
        memory_op("cross_entropy", logits, CROSS_ENTROPY_BWD_BYTES, kernels=2, flops=2.0),
        *_regather(x),
        linear_backward("lm_head", x.tokens, x.h, x.v // x.t, x.dtypes.without_fp8),
        *_tp_exit(x),
        memory_op(
            "final_norm",
            x.elementwise_tokens * x.h,
            FINAL_NORM_BWD_BYTES * x.width,
            NORM_BWD_KERNELS,
            flops=8.0,
            kernel=_norm_kernel(x),
        ),
    ]


def optimizer_ops(x: Shape | None = None) -> tuple[list[Op], list[Op]]:
    """(operators over the rank's optimizer shard, operators over all its parameters), each sized for
    OPTIMIZER_UNIT_PARAMS parameters: gradient norm and Adam step run on the shard the rank updates
    (1/dp of it with the distributed optimizer); the gradient buffer is zeroed whole, and under FP8
    every weight is cast to its FP8 copies once per iteration. Widths follow `x`'s dtypes (the
    constants above are those of BF16 weights, FP32 gradients and FP32 optimizer state)."""
    n = float(OPTIMIZER_UNIT_PARAMS)
    dt = x.dtypes if x is not None else BF16
    weight_cast = fp8.weight_cast_bytes(x) if x is not None else 0.0
    full = [memory_op("zero_grad", n, ZERO_GRAD_BYTES * dt.grad_bytes / BYTES_FP32)]
    if weight_cast:
        full.append(memory_op("fp8_weight_cast", n, weight_cast))
    return (
        [
            memory_op("grad_norm", n, GRAD_NORM_BYTES * dt.grad_bytes / BYTES_FP32, flops=2.0),
            memory_op("optimizer_step", n, adam_step_bytes(dt), flops=ADAM_FLOPS),
        ],
        full,
    )


@dataclass(frozen=True)
class ParameterCounts:
    per_layer: int
    embedding: int  # token (+ position) embedding
    head: int  # LM head weights that are not tied to the embedding
    final_norm: int
    experts_per_layer: int = 0  # the routed experts of one MoE layer (split over ep·etp ranks)

    def total(self, num_layers: int) -> int:
        layers = (self.per_layer + self.experts_per_layer) * num_layers
        return layers + self.embedding + self.head + self.final_norm


def stage_parameters(
    model: ModelSpec,
    par: ParallelismSpec,
    stage: int,
    num_layers: int,
    expert_hosts: tuple[int, bool] = (0, True),
) -> tuple[float, float]:
    """(parameters on one TP rank of `stage`, of which not in transformer layers).

    The first stage holds the embedding, the last the final norm and LM head — and, with tied
    embeddings split across stages, its own copy of the embedding.
    """
    counts = parameter_counts(model)
    extra = 0.0
    if stage == 0:
        extra += counts.embedding
    if stage == par.pp - 1:
        extra += counts.head + counts.final_norm
        if model.tied_embeddings and par.pp > 1:
            extra += counts.embedding
    experts = num_layers * expert_parameters_on_rank(model, par, expert_hosts)
    return (num_layers * counts.per_layer + extra) / par.tp + experts, extra / par.tp


def expert_parameters_on_rank(
    model: ModelSpec, par: ParallelismSpec, expert_hosts: tuple[int, bool] = (0, True)
) -> float:
    """Routed-expert weights of one MoE layer on one rank: num_experts/ep experts, each 1/etp of it;
    under mapping.experts (`expert_hosts`: holders per expert group, whether this rank is one)
    num_experts/holders on a holder, none elsewhere."""
    hosts, holds = expert_hosts
    if not holds:
        return 0.0
    return parameter_counts(model).experts_per_layer / ((hosts or par.ep) * par.expert_tp)


def parameter_counts(model: ModelSpec) -> ParameterCounts:
    """Weights by part of the model. A MoE layer's dense part (`per_layer`, split over TP) holds its
    attention, norms, router and shared experts; its routed experts are `experts_per_layer`."""
    h, d, gated = model.hidden_size, model.head_width, model.activation == "swiglu"
    q = model.num_heads * d
    attn = h * (q + 2 * model.num_kv_heads * d) + q * h
    norm = 2 * h if model.norm == "layernorm" else h
    experts = 0
    if model.moe is None:
        f = model.ffn_size
        mlp = (3 if gated else 2) * h * f
    else:
        f = model.moe.shared_experts * model.moe.expert_ffn_size
        mlp = (3 if gated else 2) * h * f + h * model.moe.num_experts  # shared experts, router
        experts = expert_parameters_per_layer(model.moe.num_experts, h, model.moe.expert_ffn_size, gated)
    biases = 0
    if model.activation == "gelu":  # GPT-style layers carry biases
        biases = (q + 2 * model.num_kv_heads * d) + h + f + h
    per_layer = attn + mlp + 2 * norm + biases
    embedding = model.vocab_size * h + (model.seq_len * h if model.learned_position_embeddings else 0)
    head = 0 if model.tied_embeddings else model.vocab_size * h
    return ParameterCounts(per_layer, embedding, head, norm, experts)


PHASES = ("fwd", "bwd", "step")


@lru_cache(maxsize=64)
def operators(x: Shape) -> dict[str, dict[str, Op]]:
    """Every operator the model can emit at shape `x` (selective recompute included), by phase and name."""
    forward = [*layer_forward(x), *embedding_forward(x), *head_forward(x)]
    backward = [*layer_backward(x, "selective"), *embedding_backward(x), *head_backward(x)]
    shard, full = optimizer_ops(x)
    by_phase = {"fwd": forward, "bwd": backward, "step": [*shard, *full]}
    return {phase: {op.name: op for op in _ops_of(steps)} for phase, steps in by_phase.items()}


def _ops_of(steps: list[LayerStep]) -> list[Op]:
    """The operators of a pass, those inside concurrent groups included (a piece stands for its op)."""
    found: list[Op] = []
    for step in steps:
        nodes = step.nodes if isinstance(step, Concurrent) else (step,)
        for node in nodes:
            if isinstance(node, Piece):
                node = node.op
            if isinstance(node, Op):
                found.append(node)
    return found


def operator_names() -> dict[str, frozenset[str]]:
    """Operator names of every formulation (fused and unfused attention, GeLU, SwiGLU and squared
    ReLU, RoPE, BF16 and FP8 under either scaling), by phase."""
    names: dict[str, set[str]] = {phase: set() for phase in PHASES}
    recipes = (BF16, Dtypes(compute="fp8", fp8_recipe="delayed"), Dtypes(compute="fp8", fp8_recipe="current"))
    mlps = ({"swiglu": True}, {"swiglu": False}, {"swiglu": False, "squared_relu": True})
    for fused, mlp, dt in product((True, False), mlps, recipes):
        x = Shape(1, 8, 8, 2, 2, 16, 16, t=2, sp=True, fused_attention=fused, dtypes=dt, rope=True, **mlp)
        for phase, ops in operators(x).items():
            names[phase] |= set(ops)
    return {phase: frozenset(n) for phase, n in names.items()}
