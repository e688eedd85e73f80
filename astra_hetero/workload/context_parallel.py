"""Core attention with context parallelism, as Megatron-core runs it through Transformer Engine
(transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py).

Each sequence is cut into 2·cp chunks and CP rank i holds chunks i and 2·cp − 1 − i, so that every rank
does the same share of the causal work: with chunks of c tokens, its local step (its own keys, causal)
covers 2c² + c query-key pairs and each of the cp − 1 other steps 2c² (two query chunks against the
earlier rank's first chunk, or its late chunk against both of a later rank's), in all
(s² + s) / (2·cp) = causal_pairs(s) / cp pairs.

- `cp_comm: p2p` (`AttnFuncWithCPAndKVP2P`): the keys and values travel around the CP ring. Forward: at
  step i the rank sends the KV it holds to the next rank while it attends to it, cp − 1 transfers of its
  own KV size, and merges each step's partial output into the running one (log-sum-exp correction).
  Backward: the ring runs the other way, the KV again (cp − 1 times) and the accumulated dKV with it (from
  step 1 on, cp − 1 times), so 2·(cp − 1) KV-sized transfers; the dKV that ends the ring is waited for.
- `cp_comm: all_gather` (`AttnFuncWithCPAndKVAllGather`): the KV is all-gathered over the CP group before
  the forward and again before the backward, whose dKV is reduce-scattered; nothing overlaps.

- `cp_comm: torch_all_gather`: PyTorch's experimental `context_parallel` with its "allgather" rotate
  method, as torchtitan runs it (read at pytorch/pytorch torch/distributed/tensor/experimental/
  _attention.py, commits f2127dbd and 0123248a — the structure torch 2.6 / nightly 1963fc8 of
  2024-12 shipped; the exact December file was not readable here — and torchtitan 9dec370):
  - SDPA sees the keys and values with every query head: torchtitan's Attention expands grouped KV
    heads with `repeat_kv` before `F.scaled_dot_product_attention` (models/llama/model.py), so the
    KV exchanged is a/t heads wide, not kv/t (`sdpa_kv_heads`).
  - Forward (`_templated_ring_attention`): one all-gather of the rank's concatenated K and V
    (`_AllGatherRotater`, the activation dtype), then cp SDPA calls, one per source rank: step 0 one
    causal call over the rank's two chunks concatenated (the causal mask over the concatenation is
    exactly the pairs needed, 2c² + c), each later step one non-causal call (all query rows against
    the source's first chunk, or the second query chunk against both source chunks; 2c² pairs), so
    no masked work beyond Megatron's. After each later step `_SDPAMerger` corrects the running
    output in FP32 (`convert_to_f32` defaults to True); compiled, that is one fused kernel reading
    the FP32 running output and the step's BF16 output and writing FP32 (10 B per element), and the
    result is cast back to BF16 at the end (6 B).
  - Backward (`_templated_ring_attention_backward`): the KV is all-gathered again (a new rotater),
    cp SDPA backward calls, dQ and dKV accumulated in FP32 (`accum_dtype`; 10 B per element per
    step: FP32 accumulator and BF16 step gradient read, FP32 written), and the dKV passed to the
    next rank after *every* step (cp transfers) by `_AllToAllRotater` (`permute_tensor`), whatever
    the rotate method, in FP32; the last one is waited for before the gradients are cast to BF16.
  - Exposure: under torch.compile (the rows, and torchtitan's per-block compile) a functional
    collective traced into the graph is waited for at once (`_functional_collectives.
    _maybe_wrap_tensor`: `wait_tensor` when `_are_we_tracing()`), and Inductor does not move the
    waits by default (`reorder_for_compute_comm_overlap` off), so the all-gathers and every dKV
    transfer stand between the attention steps: nothing overlaps.

Byte counts of the merge kernels per output element: forward correction reads the step's output and
the running FP32 output and writes it back (10 B); backward accumulates dQ and dKV (6 B per element).
"""

from __future__ import annotations

from dataclasses import replace

from astra_hetero.workload.attention import attention_backward, attention_forward, fused_attention
from astra_hetero.workload.ops import (
    BYTES_FP32,
    Collective,
    Concurrent,
    LayerStep,
    Node,
    Op,
    Piece,
    Shape,
    Transfer,
    memory_op,
)

OUT_CORRECTION_BYTES = 10
GRAD_ACCUMULATION_BYTES = 6
# torch's context_parallel: FP32 accumulation of dQ and dKV per step (read the FP32 accumulator and
# the step's BF16 gradient, write FP32), and the casts of the merged output / gradients to BF16.
TORCH_GRAD_ACCUMULATION_BYTES = 10
TORCH_CAST_BYTES = 6
SEND, RECV = "send", "recv"
NEXT, PREV = "cp_next", "cp_prev"
# Transfers one attention block may hold (forward ring, its recomputation, backward ring): the graph
# numbers a block's tags in steps of this many per CP degree.
SLOTS_PER_CP_RANK = 8


def core_attention_forward(x: Shape) -> list[LayerStep]:
    if x.cp == 1:
        return list(attention_forward(x))
    if x.cp_comm == "all_gather":
        return [Collective("all_gather", x.cp * kv_bytes(x), "cp"), rank_attention(x, "fwd")]
    if x.cp_comm == "torch_all_gather":
        return _torch_forward(x, "attention")
    return [_forward_ring(x, "attention", first_slot=0)]


def core_attention_backward(x: Shape, selective_recompute: bool) -> list[LayerStep]:
    if x.cp == 1:
        return list(attention_backward(x, selective_recompute))
    recompute: list[LayerStep] = []
    if x.cp_comm == "torch_all_gather":
        if selective_recompute:
            recompute = _torch_forward(x, "recompute_attention")
        return [*recompute, *_torch_backward(x, first_slot=4 * x.cp)]
    if x.cp_comm == "all_gather":
        if selective_recompute:
            recompute = [replace(rank_attention(x, "fwd"), name="recompute_attention")]
        return [
            Collective("all_gather", x.cp * kv_bytes(x), "cp"),
            *recompute,
            rank_attention(x, "bwd"),
            Collective("reduce_scatter", x.cp * kv_bytes(x), "cp"),
        ]
    if selective_recompute:
        recompute = [_forward_ring(x, "recompute_attention", first_slot=2 * x.cp)]
    return [*recompute, _backward_ring(x, first_slot=4 * x.cp)]


def kv_bytes(x: Shape) -> int:
    """Keys and values of this rank's tokens (its 1/cp of the sequence), in the activation format."""
    return 2 * x.dtypes.activation_bytes * x.tokens * (x.kv // x.t) * x.d


def sdpa_kv_heads(x: Shape) -> int:
    """KV heads per TP rank as the attention kernel receives them: torch's context parallelism
    (through torchtitan) gets them repeated to every query head; Transformer Engine keeps them grouped."""
    return x.a // x.t if x.cp_comm == "torch_all_gather" else x.kv // x.t


def sdpa_kv_bytes(x: Shape, element_bytes: int | None = None) -> int:
    """K and V of this rank's tokens as the CP exchange carries them (default: the activation format)."""
    width = x.dtypes.activation_bytes if element_bytes is None else element_bytes
    return 2 * width * x.tokens * sdpa_kv_heads(x) * x.d


def step_fractions(cp: int, s: int) -> list[float]:
    """Share of the rank's causal work done at each ring step (its own chunks first)."""
    c = s // (2 * cp)
    local, other = 2 * c * c + c, 2 * c * c
    total = local + (cp - 1) * other
    return [local / total] + [other / total] * (cp - 1)


def rank_attention(x: Shape, attention_pass: str) -> Op:
    """This rank's whole attention work: 1/cp of the causal pairs of the full sequence, run as kernels
    on sequences of s / cp tokens (one per ring step)."""
    whole = fused_attention(replace(x, cp=1), attention_pass)
    return replace(
        whole,
        flops=whole.flops / x.cp,
        bytes=whole.bytes / x.cp,
        kernels=whole.kernels * x.cp,
        seq_len=x.s // x.cp,
    )


class _Group:
    """A concurrent group under construction: nodes with the earlier nodes they wait for."""

    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self.deps: list[tuple[int, ...]] = []

    def add(self, node: Node, *waits: int) -> int:
        """Append `node`, waiting for `waits` (-1: nothing; none at all: what precedes the group)."""
        self.nodes.append(node)
        self.deps.append(tuple(w for w in waits if w >= 0))
        return len(self.nodes) - 1

    def done(self, name: str) -> Concurrent:
        return Concurrent(name, tuple(self.nodes), tuple(self.deps))


def _forward_ring(x: Shape, name: str, first_slot: int) -> Concurrent:
    cp, size = x.cp, kv_bytes(x)
    work = rank_attention(x, "fwd")
    merge = memory_op(f"{name}_correction", x.tokens * x.q_width / x.t, OUT_CORRECTION_BYTES * x.width)
    group = _Group()
    recv = step = -1
    for i, fraction in enumerate(step_fractions(cp, x.s)):
        if i < cp - 1:  # pass on the KV held now (its own at step 0) while attending to it
            group.add(Transfer(SEND, NEXT, size, first_slot + i), recv)
            next_recv = group.add(Transfer(RECV, PREV, size, first_slot + i), recv)
        step = group.add(Piece(work, fraction, f"{name}_step{i}"), step, recv)
        if i > 0:
            step = group.add(merge, step)
        recv = next_recv if i < cp - 1 else -1
    return group.done(name)


def _backward_ring(x: Shape, first_slot: int) -> Concurrent:
    cp, size = x.cp, kv_bytes(x)
    work = rank_attention(x, "bwd")
    accumulate = memory_op(
        "attention_grad_accumulation",
        x.tokens * (x.q_width + 2 * x.kv * x.d) / x.t,
        GRAD_ACCUMULATION_BYTES * x.width,
    )
    group = _Group()
    recv = step = -1
    for i, fraction in enumerate(step_fractions(cp, x.s)):
        # step i passes on the KV it holds (not at the last step) and the dKV summed so far (not at
        # the first), in the backward ring's direction
        message = size * ((i < cp - 1) + (i > 0))
        group.add(Transfer(SEND, PREV, message, first_slot + i), recv, step)
        next_recv = group.add(Transfer(RECV, NEXT, message, first_slot + i), recv)
        step = group.add(Piece(work, fraction, f"attention_bwd_step{i}"), step, recv)
        step = group.add(accumulate, step)
        recv = next_recv
    return group.done("attention_bwd")


def _torch_forward(x: Shape, name: str) -> list[LayerStep]:
    """torch's forward: the KV all-gather waited for, cp SDPA calls, cp − 1 FP32 merges, the cast back."""
    out = x.tokens * x.q_width / x.t
    return [
        Collective("all_gather", x.cp * sdpa_kv_bytes(x), "cp"),
        replace(rank_attention(x, "fwd"), name=name),
        memory_op(f"{name}_merge", out, OUT_CORRECTION_BYTES * (x.cp - 1) + TORCH_CAST_BYTES, x.cp),
    ]


def _torch_backward(x: Shape, first_slot: int) -> list[LayerStep]:
    """torch's backward: the KV all-gathered again, then per step the SDPA backward, the FP32
    accumulation of dQ and dKV, and the FP32 dKV passed to the next rank (waited for at once)."""
    work = rank_attention(x, "bwd")
    accumulate = memory_op(
        "attention_grad_accumulation",
        x.tokens * (x.q_width / x.t + 2 * sdpa_kv_heads(x) * x.d),
        TORCH_GRAD_ACCUMULATION_BYTES,
    )
    cast = memory_op(
        "attention_grad_cast", x.tokens * (x.q_width / x.t + 2 * sdpa_kv_heads(x) * x.d), TORCH_CAST_BYTES
    )
    dkv = sdpa_kv_bytes(x, BYTES_FP32)
    group = _Group()
    sent: tuple[int, ...] = ()
    for i, fraction in enumerate(step_fractions(x.cp, x.s)):
        step = group.add(Piece(work, fraction, f"attention_bwd_step{i}"), *sent)
        step = group.add(accumulate, step)
        sent = (
            group.add(Transfer(SEND, NEXT, dkv, first_slot + i), step),
            group.add(Transfer(RECV, PREV, dkv, first_slot + i), step),
        )
    return [
        Collective("all_gather", x.cp * sdpa_kv_bytes(x), "cp"),
        group.done("attention_bwd"),
        cast,
    ]
