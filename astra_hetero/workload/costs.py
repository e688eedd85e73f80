"""Operator-level cost model of a decoder-only transformer, per micro-batch and per TP rank.

Each layer's forward and backward pass is a list of operators with FLOPs and bytes moved;
`timing.py` turns an operator into time on a given device.

Conventions: BF16 activations and weights (2 bytes); backward GEMMs cost twice the forward (input
gradient + weight gradient); attention is the unfused formulation (scores materialised), which is
what the memory model assumes too.
"""

from __future__ import annotations

from dataclasses import dataclass

from astra_hetero.spec.schema import ModelSpec, ParallelismSpec

BYTES_BF16 = 2


@dataclass(frozen=True)
class Op:
    name: str
    flops: float
    bytes: float


@dataclass(frozen=True)
class Collective:
    """A TP collective inside a layer (a marker between fused compute segments)."""

    kind: str  # "all_reduce" | "all_gather" | "reduce_scatter"
    bytes: int


LayerStep = Op | Collective


@dataclass(frozen=True)
class Shape:
    b: int  # micro-batch size
    s: int
    h: int
    a: int
    kv: int
    f: int
    v: int
    t: int
    sp: bool
    swiglu: bool

    @property
    def d(self) -> int:
        return self.h // self.a

    @property
    def qkv_width(self) -> int:
        return self.h + 2 * self.kv * self.d

    @property
    def tokens(self) -> int:
        return self.b * self.s

    @property
    def elementwise_tokens(self) -> float:
        """Norms, dropout and residuals run on the sequence shard when sequence parallelism is on."""
        return self.tokens / self.t if self.sp else self.tokens


def shape_of(model: ModelSpec, par: ParallelismSpec) -> Shape:
    return Shape(
        b=par.micro_batch_size,
        s=model.seq_len,
        h=model.hidden_size,
        a=model.num_heads,
        kv=model.num_kv_heads,
        f=model.ffn_size,
        v=model.vocab_size,
        t=par.tp,
        sp=par.sequence_parallel,
        swiglu=model.activation == "swiglu",
    )


def _gemm(name: str, m: float, k: float, n: float) -> Op:
    return Op(name, 2.0 * m * k * n, BYTES_BF16 * (m * k + k * n + m * n))


def _elementwise(name: str, elements: float, flops_per_element: float, tensors: float) -> Op:
    return Op(name, flops_per_element * elements, BYTES_BF16 * tensors * elements)


def _attention_core(x: Shape) -> list[Op]:
    heads = x.a / x.t
    scores = x.b * heads * x.s * x.s
    head_tokens = x.tokens * x.h / x.t
    return [
        Op("attn_score", 2.0 * x.b * x.s * x.s * x.h / x.t, BYTES_BF16 * (2 * head_tokens + scores)),
        Op("softmax", 5.0 * scores, BYTES_BF16 * 2 * scores + scores),  # + 1-byte dropout mask
        Op("attn_context", 2.0 * x.b * x.s * x.s * x.h / x.t, BYTES_BF16 * (scores + 2 * head_tokens)),
    ]


def _mlp(x: Shape) -> list[Op]:
    f = x.f / x.t
    if x.swiglu:
        return [
            _gemm("mlp_gate_up", x.tokens, x.h, 2 * f),
            _elementwise("swiglu", x.tokens * f, 4.0, 3),
            _gemm("mlp_down", x.tokens, f, x.h),
        ]
    return [
        _gemm("mlp_up", x.tokens, x.h, f),
        _elementwise("gelu", x.tokens * f, 8.0, 2),
        _gemm("mlp_down", x.tokens, f, x.h),
    ]


def _tp_pair(x: Shape, before: bool) -> list[Collective]:
    """The collective(s) that bracket a tensor-parallel block: AG before / RS after with SP, else AR after."""
    if x.t == 1:
        return []
    size = int(BYTES_BF16 * x.tokens * x.h)
    if x.sp:
        return [Collective("all_gather" if before else "reduce_scatter", size)]
    return [] if before else [Collective("all_reduce", size)]


def layer_forward(x: Shape) -> list[LayerStep]:
    norm = x.elementwise_tokens * x.h
    return [
        _elementwise("norm_attn", norm, 5.0, 2),
        *_tp_pair(x, before=True),
        _gemm("qkv_proj", x.tokens, x.h, x.qkv_width / x.t),
        *_attention_core(x),
        _gemm("attn_out_proj", x.tokens, x.h / x.t, x.h),
        *_tp_pair(x, before=False),
        _elementwise("residual_attn", norm, 2.0, 3),
        _elementwise("norm_mlp", norm, 5.0, 2),
        *_tp_pair(x, before=True),
        *_mlp(x),
        *_tp_pair(x, before=False),
        _elementwise("residual_mlp", norm, 2.0, 3),
    ]


def _backward(op: Op) -> Op:
    # Input gradient and weight gradient for GEMMs; gradient kernels of elementwise ops read and
    # write about twice the data of the forward.
    return Op(op.name, 2.0 * op.flops, 2.0 * op.bytes)


def layer_backward(x: Shape, recompute: str) -> list[LayerStep]:
    """Reverse of the forward, with the TP collectives mirrored (AR after each column-parallel block)."""
    steps: list[LayerStep] = []
    if recompute == "selective":
        steps += [Op(f"recompute_{op.name}", op.flops, op.bytes) for op in _attention_core(x)]
    for step in reversed(layer_forward(x)):
        if isinstance(step, Collective):
            mirrored = {
                "all_reduce": "all_reduce",
                "reduce_scatter": "all_gather",
                "all_gather": "reduce_scatter",
            }[step.kind]
            steps.append(Collective(mirrored, step.bytes))
        else:
            steps.append(_backward(step))
    return _move_ar_to_block_starts(steps, x)


def _move_ar_to_block_starts(steps: list[LayerStep], x: Shape) -> list[LayerStep]:
    """Without SP the backward all-reduce follows the column-parallel GEMM (qkv / first MLP GEMM),
    not the row-parallel one; reversing the forward puts it at the wrong end, so rebuild the order."""
    if x.t == 1 or x.sp:
        return steps
    ops = [s for s in steps if isinstance(s, Op)]
    out: list[LayerStep] = []
    size = int(BYTES_BF16 * x.tokens * x.h)
    for op in ops:
        out.append(op)
        if op.name in ("mlp_up", "mlp_gate_up", "qkv_proj"):
            out.append(Collective("all_reduce", size))
    return out


def embedding_forward(x: Shape) -> list[Op]:
    return [_elementwise("embedding", x.elementwise_tokens * x.h, 0.0, 2)]


def embedding_backward(x: Shape) -> list[Op]:
    return [_elementwise("embedding_grad", x.elementwise_tokens * x.h, 1.0, 3)]


def head_forward(x: Shape) -> list[Op]:
    logits = x.tokens * x.v / x.t
    return [
        _elementwise("final_norm", x.elementwise_tokens * x.h, 5.0, 2),
        _gemm("lm_head", x.tokens, x.h, x.v / x.t),
        _elementwise("cross_entropy", logits, 5.0, 2),
    ]


def head_backward(x: Shape) -> list[Op]:
    return [_backward(op) for op in reversed(head_forward(x))]


@dataclass(frozen=True)
class ParameterCounts:
    per_layer: int
    embedding: int  # token (+ position) embedding
    head: int  # LM head weights that are not tied to the embedding
    final_norm: int

    def total(self, num_layers: int) -> int:
        return self.per_layer * num_layers + self.embedding + self.head + self.final_norm


def stage_parameters(
    model: ModelSpec, par: ParallelismSpec, stage: int, num_layers: int
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
    return (num_layers * counts.per_layer + extra) / par.tp, extra / par.tp


def parameter_counts(model: ModelSpec) -> ParameterCounts:
    h, f, d = model.hidden_size, model.ffn_size, model.head_dim
    qkv = h * (h + 2 * model.num_kv_heads * d)
    attn = qkv + h * h
    mlp = (3 if model.activation == "swiglu" else 2) * h * f
    norm = 2 * h if model.norm == "layernorm" else h
    biases = 0
    if model.activation == "gelu":  # GPT-style layers carry biases
        biases = (h + 2 * model.num_kv_heads * d) + h + f + h
    per_layer = attn + mlp + 2 * norm + biases
    embedding = model.vocab_size * h + (model.seq_len * h if model.learned_position_embeddings else 0)
    head = 0 if model.tied_embeddings else model.vocab_size * h
    return ParameterCounts(per_layer, embedding, head, norm)
