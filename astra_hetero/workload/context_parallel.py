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

Byte counts of the merge kernels per output element: forward correction reads the step's output and
the running FP32 output and writes it back (10 B); backward accumulates dQ and dKV (6 B per element).
"""

from __future__ import annotations

from dataclasses import replace

from astra_hetero.workload.attention import attention_backward, attention_forward, fused_attention
from astra_hetero.workload.ops import (
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
    return [_forward_ring(x, "attention", first_slot=0)]


def core_attention_backward(x: Shape, selective_recompute: bool) -> list[LayerStep]:
    if x.cp == 1:
        return list(attention_backward(x, selective_recompute))
    recompute: list[LayerStep] = []
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
