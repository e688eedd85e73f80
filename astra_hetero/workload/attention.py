"""Causal self-attention of one micro-batch on one TP rank, fused or unfused.

Fused (FlashAttention-style, what Megatron runs through Transformer Engine / cuDNN today): one forward
kernel that never writes the score matrix and skips the blocks above the causal diagonal, so it does
the work of s(s+1)/2 query-key pairs; the backward recomputes the scores (five matrix products per
pair instead of the forward's two) and stores only the output and the row log-sum-exp in between.

Unfused (Megatron before fused attention): Q·Kᵀ as a batched GEMM over the full s×s scores (masked
entries are computed too), a fused scale-mask-softmax kernel, dropout on the probabilities, P·V, and
a copy that permutes the context from head-major back to token-major order (Megatron-LM
megatron/model/transformer.py, `context_layer.permute(2, 0, 1, 3).contiguous()`).
Grouped KV heads are expanded to every query head first, so the GEMMs are those of full attention.

Sliding-window (local) attention, `Shape.window` = W: a query attends its W most recent keys, itself
included. The fused kernels skip the blocks outside the band, so they do the work of the attended
pairs only; their short-sequence efficiency follows the band's width (W) rather than s. The unfused
core masks the band inside the full s×s scores, so its cost does not change.
"""

from __future__ import annotations

from dataclasses import replace

from astra_hetero.workload.ops import BYTES_BF16, BYTES_FP32, Gemm, Op, Shape, gemm_op, memory_op

# Per score element: softmax reads scores and writes probabilities; its backward reads the incoming
# gradient and the probabilities and writes the score gradient. Dropout writes a 1-byte mask.
SOFTMAX_BYTES = {"fwd": 2 * BYTES_BF16, "bwd": 3 * BYTES_BF16}
DROPOUT_BYTES = {"fwd": 2 * BYTES_BF16 + 1, "bwd": 2 * BYTES_BF16 + 1}
FUSED_BACKWARD_KERNELS = 3  # dot(dO, O) preprocessing, the main kernel, dQ conversion (FlashAttention-2)
# Matrix products per (query, key) pair: forward Q·Kᵀ and P·V; backward recomputes Q·Kᵀ, then dP, dV, dQ, dK.
FORWARD_PRODUCTS, BACKWARD_PRODUCTS = 2, 5


def causal_pairs(s: int, window: int = 0) -> int:
    """Query-key pairs a causal kernel computes: query i attends keys max(0, i − W + 1)..i, i.e.
    min(i + 1, W) of them (all i + 1 without a window)."""
    if window <= 0 or window >= s:
        return s * (s + 1) // 2
    return window * (window + 1) // 2 + (s - window) * window


def fused_attention(x: Shape, attention_pass: str, name: str = "attention") -> Op:
    heads, kv_heads, d = x.a // x.t, x.kv // x.t, x.d
    products = FORWARD_PRODUCTS if attention_pass == "fwd" else BACKWARD_PRODUCTS
    flops = 2.0 * d * products * causal_pairs(x.s, x.window) * x.b * heads
    token_rows = x.b * x.s * d * x.dtypes.activation_bytes  # one head's Q, K, V, O or gradient
    lse = x.b * heads * x.s * BYTES_FP32
    if attention_pass == "fwd":  # read Q, K, V; write O and the log-sum-exp
        data = token_rows * (2 * heads + 2 * kv_heads) + lse
        kernels = 1
    else:  # read Q, K, V, O, dO and the LSE; write dQ, dK, dV; FP32 dQ accumulator; rowsum(dO·O)
        data = token_rows * (4 * heads + 4 * kv_heads) + 3 * lse + 2 * x.b * x.s * d * heads * BYTES_FP32
        kernels = FUSED_BACKWARD_KERNELS
    return Op(
        name,
        flops,
        float(data),
        "attention",
        kernels=kernels,
        seq_len=min(x.s, x.window) if x.window else x.s,
        attention_pass=attention_pass,
        fmt=x.dtypes.attention_matmul,
        attention_kernel=x.attention_kernel,
    )


def _core_gemm(x: Shape, m: int, n: int, k: int, batch: int) -> Gemm:
    """A batched GEMM of the unfused core, in the activation format (BF16 under FP8 recipes)."""
    width = x.dtypes.activation_bytes
    return Gemm(m, n, k, batch, c_bytes=width, fmt=x.dtypes.attention_matmul, operand_bytes=width)


def unfused_forward(x: Shape) -> list[Op]:
    batch = x.b * x.a // x.t
    scores = float(batch * x.s * x.s)
    return [
        gemm_op("attn_score", _core_gemm(x, x.s, x.s, x.d, batch)),
        memory_op("softmax", scores, SOFTMAX_BYTES["fwd"] * x.width, flops=5.0),
        memory_op("attn_dropout", scores, DROPOUT_BYTES["fwd"] * x.width, flops=1.0, random=True),
        gemm_op("attn_context", _core_gemm(x, x.s, x.d, x.s, batch)),
        # [b·heads, s, d] → [s, b, heads·d] for the output projection: permute(...).contiguous()
        memory_op("attn_context_copy", float(x.tokens * x.h // x.t), 2 * x.dtypes.activation_bytes),
    ]


def unfused_backward(x: Shape) -> list[Op]:
    """In backward order: P·V's two gradients, dropout, softmax, Q·Kᵀ's two gradients."""
    batch = x.b * x.a // x.t
    scores = float(batch * x.s * x.s)
    return [
        gemm_op("attn_context", _core_gemm(x, x.s, x.s, x.d, batch), _core_gemm(x, x.s, x.d, x.s, batch)),
        memory_op("attn_dropout", scores, DROPOUT_BYTES["bwd"] * x.width, flops=1.0),
        memory_op("softmax", scores, SOFTMAX_BYTES["bwd"] * x.width, flops=3.0),
        gemm_op("attn_score", _core_gemm(x, x.s, x.d, x.s, batch), _core_gemm(x, x.s, x.d, x.s, batch)),
    ]


def attention_forward(x: Shape) -> list[Op]:
    return [fused_attention(x, "fwd")] if x.fused_attention else unfused_forward(x)


def attention_backward(x: Shape, selective_recompute: bool) -> list[Op]:
    """The backward of the core attention, preceded by its recomputation under selective recompute
    (Megatron checkpoints exactly this part of the layer)."""
    recompute = []
    if selective_recompute:
        recompute = [replace(op, name=f"recompute_{op.name}") for op in attention_forward(x)]
    core = [fused_attention(x, "bwd")] if x.fused_attention else unfused_backward(x)
    return recompute + core
