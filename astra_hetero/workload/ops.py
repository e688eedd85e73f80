"""The operator vocabulary of the cost model: GEMMs with their shapes, memory-bound kernels, fused
attention, and the TP collectives between them; plus the per-rank shape every operator is built from.

An `Op` carries what its time depends on: the GEMM shapes (M, N, K, batch) for matrix products, the
bytes moved for memory-bound kernels, and the sequence length for fused attention. FLOPs and bytes are
per micro-batch and per TP rank; tensor widths follow the shape's `Dtypes` (the constants here are
BF16's, and per-element byte counts elsewhere are written for BF16 and scaled by `Shape.width`).
"""

from __future__ import annotations

from dataclasses import dataclass

from astra_hetero.spec.schema import ModelSpec, ParallelismSpec
from astra_hetero.workload.precision import BF16, DTYPE_BYTES, Dtypes

BYTES_BF16 = DTYPE_BYTES["bf16"]
BYTES_FP32 = DTYPE_BYTES["fp32"]


@dataclass(frozen=True)
class Gemm:
    """C[m, n] = A[m, k] · B[k, n], `batch` times; `c_read_bytes` > 0 when C is accumulated in place
    (Megatron's weight-gradient GEMMs add into the FP32 main gradient). `fmt` is the matmul format
    whose rate it runs at, `operand_bytes` the width of A and B as read."""

    m: int
    n: int
    k: int
    batch: int = 1
    c_bytes: int = BYTES_BF16
    c_read_bytes: int = 0
    fmt: str = "bf16"
    operand_bytes: int = BYTES_BF16

    @property
    def flops(self) -> float:
        return 2.0 * self.m * self.n * self.k * self.batch

    @property
    def bytes(self) -> float:
        operands = self.operand_bytes * (self.m * self.k + self.k * self.n)
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
    fmt: str = "bf16"  # fused attention: the matmul format whose rate it runs at


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


def linear_forward(name: str, tokens: int, d_in: int, d_out: int, dt: Dtypes = BF16) -> Op:
    """y[tokens, d_out] = x[tokens, d_in] · W[d_in, d_out], output in the activation format."""
    return gemm_op(name, Gemm(tokens, d_out, d_in, **_formats(dt)))


def linear_backward(name: str, tokens: int, d_in: int, d_out: int, dt: Dtypes = BF16) -> Op:
    """Input gradient dx = dy · Wᵀ and weight gradient dW += xᵀ · dy into the main gradient
    (Megatron's gradient-accumulation fusion; FP32 unless precision.grads says otherwise)."""
    wgrad = dict(_formats(dt), c_bytes=dt.grad_bytes, c_read_bytes=dt.grad_bytes)
    return gemm_op(name, Gemm(tokens, d_in, d_out, **_formats(dt)), Gemm(d_in, d_out, tokens, **wgrad))


def _formats(dt: Dtypes) -> dict[str, int | str]:
    return {"fmt": dt.matmul, "operand_bytes": dt.gemm_input_bytes, "c_bytes": dt.activation_bytes}


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
    dtypes: Dtypes = BF16
    squared_relu: bool = False  # Nemotron's relu(x)² MLP (two matrices, no biases)
    rope: bool = False
    window: int = 0  # sliding-window attention: keys a query attends at most (0: all before it)

    @property
    def width(self) -> float:
        """Activation width against BF16's: scales per-element byte counts written for BF16."""
        return self.dtypes.activation_bytes / BYTES_BF16

    @property
    def d(self) -> int:
        return self.h // self.a

    @property
    def qkv_width(self) -> int:
        return self.h + 2 * self.kv * self.d

    @property
    def biases(self) -> bool:
        """GPT-style layers (GeLU MLP) carry biases; SwiGLU and squared-ReLU ones do not."""
        return not self.swiglu and not self.squared_relu

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


def shape_of(
    model: ModelSpec, par: ParallelismSpec, attention: str = "fused", dtypes: Dtypes = BF16
) -> Shape:
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
        dtypes=dtypes,
        squared_relu=model.activation == "squared_relu",
        rope=model.rope,
    )
