"""The operator vocabulary of the cost model: GEMMs with their shapes, memory-bound kernels, fused
attention, and the TP collectives between them; plus the per-rank shape every operator is built from.

An `Op` carries what its time depends on: the GEMM shapes (M, N, K, batch) for matrix products, the
bytes moved for memory-bound kernels, and the sequence length for fused attention. FLOPs and bytes are
per micro-batch and per TP rank; tensor widths follow the shape's `Dtypes` (the constants here are
BF16's, and per-element byte counts elsewhere are written for BF16 and scaled by `Shape.width`).

Communication inside a pass is a `Collective` on a comm-group role ("tp" by default; "cp", "ep",
"etp", "moe" for the newer parallelisms) or a `Transfer` to a ring neighbour. Work that overlaps with
communication is a `Concurrent` group: its nodes (operators, `Piece`s of one, collectives, transfers)
wait only for the nodes they name, so a GEMM split in chunks can run beside the collective that feeds
it, or an attention step beside the transfer of the next step's keys and values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from astra_hetero.spec.schema import ModelSpec, ParallelismSpec
from astra_hetero.workload.precision import BF16, DTYPE_BYTES, Dtypes
from astra_hetero.workload.routing import busiest_load

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
    attention_kernel: str = "cudnn"  # fused attention: the kernel (compute.attention_kernel)
    row_elements: int = 0  # memory-bound, one thread block per row: elements per row (0: not row-wise)
    rows: int = 0  # and the number of rows (thread blocks)
    kernel: str = ""  # memory-bound: the kernel catalog's kind for this implementation ("": by name)


@dataclass(frozen=True)
class Collective:
    """A collective inside a pass (a marker between fused compute segments). `bytes` is the full
    buffer (an all-gather's output)."""

    kind: str  # "all_reduce" | "all_gather" | "reduce_scatter" | "all_to_all"
    bytes: int
    group: str = "tp"  # comm-group role: "tp" | "cp" | "ep" | "etp" | "moe"


@dataclass(frozen=True)
class Transfer:
    """A point-to-point message inside a pass to or from a ring neighbour (`peer` role, e.g.
    "cp_next"); `slot` numbers it within its block, from which the graph makes a unique tag."""

    direction: str  # "send" | "recv"
    peer: str
    bytes: int
    slot: int


@dataclass(frozen=True)
class Piece:
    """A share of one operator's work run as a node of its own (a chunk of a GEMM, one step of ring
    attention): its time, FLOPs and bytes are `fraction` of the operator's."""

    op: Op
    fraction: float
    label: str


Node = Op | Piece | Collective | Transfer


@dataclass(frozen=True)
class Concurrent:
    """Steps that may overlap: node i waits for the nodes `deps[i]` (earlier indices), or, when that
    is empty, for whatever precedes the group. What follows waits for the nodes nothing inside waits
    for. Compute nodes still run one at a time on the GPU, in node order."""

    name: str
    nodes: tuple[Node, ...]
    deps: tuple[tuple[int, ...], ...]

    def __post_init__(self) -> None:
        if len(self.deps) != len(self.nodes) or any(
            not 0 <= d < i for i, deps in enumerate(self.deps) for d in deps
        ):
            raise ValueError(f"{self.name}: every node may wait only for earlier nodes of the group")

    @property
    def exits(self) -> tuple[int, ...]:
        waited = {d for deps in self.deps for d in deps}
        return tuple(i for i in range(len(self.nodes)) if i not in waited)


LayerStep = Op | Collective | Concurrent


def gemm_op(name: str, *gemms: Gemm) -> Op:
    return Op(name, sum(g.flops for g in gemms), sum(g.bytes for g in gemms), "gemm", tuple(gemms))


def memory_op(
    name: str,
    elements: float,
    bytes_per_element: float,
    kernels: int = 1,
    flops: float = 0.0,
    random: bool = False,
    row_elements: int = 0,
    kernel: str = "",
) -> Op:
    return Op(
        name,
        flops * elements,
        bytes_per_element * elements,
        "memory",
        kernels=kernels,
        random=random,
        row_elements=row_elements,
        rows=math.ceil(elements / row_elements) if row_elements > 0 else 0,
        kernel=kernel,
    )


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
    hd: int = 0  # head width; 0 = h / a
    cp: int = 1  # context parallelism: this rank holds 1/cp of every sequence
    cp_comm: str = "p2p"
    moe: MoeShape | None = None
    tp_overlap: bool = False  # TP collectives overlapped with their GEMMs (tp_comm_overlap)
    tp_overlap_method: str = "userbuffers"  # how (tp_overlap_method): tp_overlap.py
    # TP layers as torch's DTensor ColwiseParallel/RowwiseParallel (compute.framework: fsdp): autograd
    # keeps the gathered input of a column-parallel linear, so its backward does not re-gather it
    torch_tp: bool = False
    attention_kernel: str = "cudnn"  # compute.attention_kernel: cudnn | flash2

    @property
    def width(self) -> float:
        """Activation width against BF16's: scales per-element byte counts written for BF16."""
        return self.dtypes.activation_bytes / BYTES_BF16

    @property
    def d(self) -> int:
        return self.hd or self.h // self.a

    @property
    def q_width(self) -> int:
        """Width of all query heads (= h unless the model sets head_dim apart)."""
        return self.a * self.d

    @property
    def qkv_width(self) -> int:
        return self.q_width + 2 * self.kv * self.d

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
        """Tokens of one micro-batch on this rank: its 1/cp share of every sequence."""
        return self.b * self.s // self.cp

    @property
    def elementwise_tokens(self) -> float:
        """Norms, dropout and residuals run on the sequence shard when sequence parallelism is on."""
        return self.tokens / self.t if self.sp else self.tokens


@dataclass(frozen=True)
class MoeShape:
    """What a rank's MoE layer depends on (see workload/moe.py)."""

    experts: int
    top_k: int
    ffn: int  # one expert's inner width
    shared_ffn: int  # shared experts' total inner width (0: none)
    ep: int
    etp: int
    load: float  # the busiest EP rank's routed tokens over the even share (>= 1): every rank's pace
    dispatcher: str  # "alltoall" | "allgather"
    hosts: int = 0  # mapping.experts: ranks of an expert group holding experts (0: all of them)
    holds: bool = True  # whether this rank holds experts
    grouped_gemm: bool = True  # parallelism.moe_grouped_gemm: one grouped kernel, else one per expert

    @property
    def holders(self) -> int:
        return self.hosts or self.ep

    @property
    def local_experts(self) -> int:
        return self.experts // self.holders if self.holds else 0


def shape_of(
    model: ModelSpec,
    par: ParallelismSpec,
    attention: str = "fused",
    dtypes: Dtypes = BF16,
    expert_hosts: tuple[int, bool] = (0, True),
    attention_kernel: str = "cudnn",
    framework: str = "megatron-core",
) -> Shape:
    """`expert_hosts`: (holders per expert group, whether this rank is one) under mapping.experts."""
    moe = None
    if model.moe is not None:
        moe = MoeShape(
            experts=model.moe.num_experts,
            top_k=model.moe.top_k,
            ffn=model.moe.expert_ffn_size,
            shared_ffn=model.moe.shared_experts * model.moe.expert_ffn_size,
            ep=par.ep,
            etp=par.expert_tp,
            load=busiest_load(model.moe, par.ep),
            dispatcher=par.moe_token_dispatcher,
            hosts=expert_hosts[0],
            holds=expert_hosts[1],
            grouped_gemm=par.moe_grouped_gemm,
        )
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
        hd=model.head_width,
        cp=par.cp,
        cp_comm=par.cp_comm,
        moe=moe,
        tp_overlap=par.tp_comm_overlap,
        tp_overlap_method=par.tp_overlap_method,
        torch_tp=framework == "fsdp",
        attention_kernel=attention_kernel,
    )
