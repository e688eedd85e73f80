"""The operator vocabulary of the cost model: GEMMs with their shapes, memory-bound kernels, fused
attention, and the TP collectives between them; plus the per-rank shape every operator is built from.

An `Op` carries what its time depends on: the GEMM shapes (M, N, K, batch) for matrix products, the
bytes moved for memory-bound kernels, and the sequence length for fused attention. FLOPs and bytes are
per micro-batch and per TP rank, BF16 (2-byte) tensors unless a field says otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass

from astra_hetero.spec.schema import ModelSpec, ParallelismSpec

BYTES_BF16 = 2
BYTES_FP32 = 4


@dataclass(frozen=True)
class Gemm:
    """C[m, n] = A[m, k] · B[k, n], `batch` times; `c_read_bytes` > 0 when C is accumulated in place
    (Megatron's weight-gradient GEMMs add into the FP32 main gradient)."""

    m: int
    n: int
    k: int
    batch: int = 1
    c_bytes: int = BYTES_BF16
    c_read_bytes: int = 0

    @property
    def flops(self) -> float:
        return 2.0 * self.m * self.n * self.k * self.batch

    @property
    def bytes(self) -> float:
        operands = BYTES_BF16 * (self.m * self.k + self.k * self.n)
        return float(self.batch * (operands + (self.c_bytes + self.c_read_bytes) * self.m * self.n))


@dataclass(frozen=True)
class Op:
    """One operator of a pass. `kind` picks the timing model: "gemm" (its `gemms`, one kernel each),
    "memory" (`bytes` at achievable bandwidth, `kernels` launches) or "attention" (fused attention of
    `seq_len` tokens, `attention_pass` "fwd" or "bwd")."""

    name: str
    flops: float
    bytes: float
    kind: str = "memory"
    gemms: tuple[Gemm, ...] = ()
    kernels: int = 1
    seq_len: int = 0
    attention_pass: str = ""
    random: bool = False  # draws a Philox random number per element (dropout masks): see timing.py


@dataclass(frozen=True)
class Collective:
    """A TP collective inside a pass (a marker between fused compute segments)."""

    kind: str  # "all_reduce" | "all_gather" | "reduce_scatter"
    bytes: int


LayerStep = Op | Collective


def gemm_op(name: str, *gemms: Gemm) -> Op:
    return Op(name, sum(g.flops for g in gemms), sum(g.bytes for g in gemms), "gemm", tuple(gemms))


def memory_op(
    name: str,
    elements: float,
    bytes_per_element: float,
    kernels: int = 1,
    flops: float = 0.0,
    random: bool = False,
) -> Op:
    return Op(name, flops * elements, bytes_per_element * elements, "memory", kernels=kernels, random=random)


def linear_forward(name: str, tokens: int, d_in: int, d_out: int) -> Op:
    """y[tokens, d_out] = x[tokens, d_in] · W[d_in, d_out]."""
    return gemm_op(name, Gemm(tokens, d_out, d_in))


def linear_backward(name: str, tokens: int, d_in: int, d_out: int) -> Op:
    """Input gradient dx = dy · Wᵀ and weight gradient dW += xᵀ · dy into the FP32 main gradient
    (Megatron's gradient-accumulation fusion)."""
    return gemm_op(
        name,
        Gemm(tokens, d_in, d_out),
        Gemm(d_in, d_out, tokens, c_bytes=BYTES_FP32, c_read_bytes=BYTES_FP32),
    )


@dataclass(frozen=True)
class Shape:
    """Everything an operator's size depends on, for one micro-batch on one TP rank."""

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
    fused_attention: bool = True

    @property
    def d(self) -> int:
        return self.h // self.a

    @property
    def qkv_width(self) -> int:
        return self.h + 2 * self.kv * self.d

    @property
    def biases(self) -> bool:
        """GPT-style layers (GeLU MLP) carry biases; gated (SwiGLU) ones do not."""
        return not self.swiglu

    @property
    def local_kernels(self) -> bool:
        """Megatron-LM's own layer implementation (before Transformer Engine): the one that runs the
        unfused attention core, with its separate bias, layout-copy and bias-gradient kernels."""
        return not self.fused_attention

    @property
    def tokens(self) -> int:
        return self.b * self.s

    @property
    def elementwise_tokens(self) -> float:
        """Norms, dropout and residuals run on the sequence shard when sequence parallelism is on."""
        return self.tokens / self.t if self.sp else self.tokens


def shape_of(model: ModelSpec, par: ParallelismSpec, attention: str = "fused") -> Shape:
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
        fused_attention=attention == "fused",
    )
