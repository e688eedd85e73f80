"""TP communication overlapped with the GEMMs that produce or consume it (`tp_comm_overlap`), as
Megatron-core runs it through Transformer Engine's userbuffers.

With sequence parallelism every column-parallel GEMM waits for an all-gather of its input and every
row-parallel GEMM feeds a reduce-scatter. Transformer Engine splits them (NeMo's userbuffers
configurations for H100, e.g. the 405B/TP8/CP2 one, name the method of each GEMM):
- all-gather → GEMM (QKV and FC1 forward, output-projection and FC2 input gradients): the GEMM runs in
  chunks, each waiting only for its slice of the gathered input, while the next slice travels;
- GEMM → reduce-scatter (output projection and FC2 forward, `pipeline` method): each chunk's output
  is reduce-scattered while the next chunk computes;
- all-gather → input-gradient and weight-gradient GEMMs → reduce-scatter (QKV and FC1 backward,
  `bulk` method): the re-gathered input travels beside the input-gradient GEMM, which the weight
  gradient needs it for, and the input gradient's reduce-scatter travels beside the weight-gradient GEMM.
Chunks are whole collectives over the TP group, `SPLITS` of them (Transformer Engine's default split
count for its pipelined methods); the GEMM's time is split evenly among its chunks. The SMs the
communication kernels take from the GEMMs are the engine's contention model
(`compute.comm_overlap_slowdown`), applied while a rank communicates. The LM head is Megatron-core's own
layer, not Transformer Engine's, and is not overlapped.

`tp_overlap_method: torch_async` is PyTorch's micro-pipeline TP instead (torchtitan's
`enable_async_tensor_parallel`: `torch._inductor.config._micro_pipeline_tp` over symmetric memory),
read at pytorch/pytorch torch/_inductor/fx_passes/micro_pipeline_tp.py (5f65158a) and
torch/distributed/_symmetric_memory/__init__.py (0e9ed9cf), 2025 files whose decomposition is the
one torch 1963fc8 of 2024-12 introduced:
- which pairs: Inductor rewrites `all_gather → mm` where the gathered tensor is the mm's *first*
  operand (`fused_all_gather_matmul`, every such consumer at once: wq, wk, wv or w1, w3) and
  `mm → reduce_scatter` where the reduce-scatter's input is one mm's output
  (`fused_matmul_reduce_scatter`, `_find_producer_matmul`). In a torchtitan Llama block that is the
  forward's four collectives (and those of the full-AC recomputation). In the backward only the
  all-gathers of the output gradients in front of wo and w2 pair with their input-gradient GEMMs
  (the weight gradient takes the gathered tensor as its second operand and runs after); the
  reduce-scatters of the input gradients of wq/wk/wv and w1/w3 take a *sum* of mm outputs (one per
  linear) and stay plain, exposed collectives. Under Float8 the output gradient is cast on its shard
  before the gather (torchao float8_tensor_parallel: Float8RowwiseParallel casts the gradient of its
  output), so the gathered tensor still feeds the `_scaled_mm` directly; the model keeps its cast's
  price and moves it in front. There is no re-gather of the input for the weight
  gradient: autograd keeps the gathered input the recomputed forward produced.
- how: the work is cut into tp chunks of tokens/tp rows, one per source or destination rank
  (`_pipelined_all_gather_and_consume`, `_pipelined_produce_and_all2all`), each a GEMM of its own
  (M = tokens/tp, priced as such); the shards move as peer-to-peer copies (`copy_` from the peer's
  symmetric buffer: copy engines, no SMs taken from the GEMMs), one after another. All-gather: the
  local shard is first copied into the symmetric buffer (a copy kernel), its GEMM runs at once, and
  each remote shard's GEMM waits for its copy. Matmul-reduce-scatter: the chunk for each other rank
  is computed and pulled by that rank while the next is computed, the local chunk last, then the tp
  partial results are summed (one kernel reading tp chunks, writing one).
Each copy is priced as an all-gather over the TP group of 1/(tp − 1) of the full buffer, which moves
the same bytes per rank as one shard.
"""

from __future__ import annotations

from dataclasses import replace

from astra_hetero.workload.ops import (
    BYTES_BF16,
    Collective,
    Concurrent,
    LayerStep,
    Node,
    Op,
    Piece,
    gemm_op,
    memory_op,
)

SPLITS = 4
# Linears whose input gradient is a sum over several torch linears (wq, wk, wv; w1, w3) before the
# reduce-scatter: micro-pipeline TP cannot fuse it (see above).
SUMMED_INPUT_GRADIENTS = frozenset({"qkv_proj", "mlp_gate_up"})
COPY_BYTES = 2 * BYTES_BF16  # a copy kernel reads and writes each BF16 element


def overlap_tp(steps: list[LayerStep], method: str = "userbuffers", tp: int = 1) -> list[LayerStep]:
    """The layer's steps with each TP collective next to a GEMM turned into an overlapped group
    (`method`: userbuffers, Transformer Engine's; torch_async, PyTorch's micro-pipeline TP over a TP
    group of `tp` ranks)."""
    if method == "torch_async":
        return _torch_async(steps, tp)
    out: list[LayerStep] = []
    i = 0
    while i < len(steps):
        window = steps[i : i + 3]
        if _is(window, 0, "all_gather") and _gemm(window, 1) and _is(window, 2, "reduce_scatter"):
            out.append(_bulk(window[0], window[1], window[2]))  # type: ignore[arg-type]
            i += 3
        elif _is(window, 0, "all_gather") and _gemm(window, 1):
            out.append(_gather_then_gemm(window[0], window[1]))  # type: ignore[arg-type]
            i += 2
        elif _gemm(window, 0) and _is(window, 1, "reduce_scatter"):
            out.append(_gemm_then_scatter(window[0], window[1]))  # type: ignore[arg-type]
            i += 2
        else:
            out.append(steps[i])
            i += 1
    return out


def _is(window: list[LayerStep], index: int, kind: str) -> bool:
    if index >= len(window):
        return False
    step = window[index]
    return isinstance(step, Collective) and step.kind == kind and step.group == "tp"


def _gemm(window: list[LayerStep], index: int) -> bool:
    return index < len(window) and isinstance(window[index], Op) and window[index].kind == "gemm"  # type: ignore[union-attr]


def _chunk(collective: Collective) -> Collective:
    return Collective(collective.kind, collective.bytes // SPLITS, collective.group)


def _gather_then_gemm(gather: Collective, gemm: Op) -> Concurrent:
    """Chunk i of the GEMM waits for slice i of the all-gather; the slices go one after another."""
    nodes: list[Node] = []
    deps: list[tuple[int, ...]] = []
    for i in range(SPLITS):
        nodes.append(_chunk(gather))
        deps.append((2 * i - 2,) if i else ())
        nodes.append(Piece(gemm, 1 / SPLITS, f"{gemm.name}_chunk{i}"))
        deps.append((2 * i, 2 * i - 1) if i else (0,))
    return Concurrent(f"{gemm.name}_overlapped", tuple(nodes), tuple(deps))


def _gemm_then_scatter(gemm: Op, scatter: Collective) -> Concurrent:
    """Slice i of the reduce-scatter starts once chunk i of the GEMM is done and slice i − 1 is sent."""
    nodes: list[Node] = []
    deps: list[tuple[int, ...]] = []
    for i in range(SPLITS):
        nodes.append(Piece(gemm, 1 / SPLITS, f"{gemm.name}_chunk{i}"))
        deps.append((2 * i - 2,) if i else ())
        nodes.append(_chunk(scatter))
        deps.append((2 * i, 2 * i - 1) if i else (0,))
    return Concurrent(f"{gemm.name}_overlapped", tuple(nodes), tuple(deps))


def _bulk(gather: Collective, gemms: Op, scatter: Collective) -> Concurrent:
    """A backward linear layer: input-gradient GEMM beside the input's all-gather, weight-gradient GEMM
    beside the input gradient's reduce-scatter. The two GEMMs do equal FLOPs (2·tokens·d_in·d_out)."""
    dgrad = Piece(gemms, 0.5, f"{gemms.name}_dgrad")
    wgrad = Piece(gemms, 0.5, f"{gemms.name}_wgrad")
    nodes: tuple[Node, ...] = (gather, dgrad, scatter, wgrad)
    return Concurrent(f"{gemms.name}_overlapped", nodes, ((), (), (1,), (0, 1)))


def _torch_async(steps: list[LayerStep], tp: int) -> list[LayerStep]:
    out: list[LayerStep] = []
    i = 0
    while i < len(steps):
        window = steps[i : i + 2]
        casts = _grad_casts(steps, i + 1)
        if _is(window, 0, "all_gather") and _gemm(steps[i + 1 + len(casts) : i + 2 + len(casts)], 0):
            # the output gradient's Float8 cast runs on the shard before the gather (torchao's
            # Float8RowwiseParallel casts the gradient of its output): the gather feeds the mm
            gemm = steps[i + 1 + len(casts)]
            out += [*casts, *_torch_gather_matmul(window[0], gemm, tp)]  # type: ignore[arg-type]
            i += 2 + len(casts)
        elif _gemm(window, 0) and _is(window, 1, "reduce_scatter") and _fusible_scatter(window[0]):  # type: ignore[arg-type]
            out += _torch_matmul_scatter(window[0], window[1], tp)  # type: ignore[arg-type]
            i += 2
        else:
            out.append(steps[i])
            i += 1
    return out


def _grad_casts(steps: list[LayerStep], start: int) -> list[Op]:
    """The Float8 output-gradient casts from `start` on (none without Float8)."""
    casts: list[Op] = []
    for step in steps[start:]:
        if not (isinstance(step, Op) and step.name.endswith("_grad_fp8_cast")):
            break
        casts.append(step)
    return casts


def _fusible_scatter(gemm: Op) -> bool:
    """A forward GEMM (one product) feeds the reduce-scatter directly; a backward one only where
    its input gradient comes from a single torch linear."""
    return len(gemm.gemms) == 1 or gemm.name not in SUMMED_INPUT_GRADIENTS


def _rows(gemm: Op, tp: int, name: str) -> Op:
    """The first product of `gemm` on tokens/tp rows (one shard's GEMM)."""
    first = gemm.gemms[0]
    return gemm_op(name, replace(first, m=max(1, first.m // tp)))


def _shard_copy(collective: Collective, tp: int) -> Collective:
    return Collective("all_gather", collective.bytes // (tp - 1), collective.group)


def _rest(gemm: Op, name: str) -> list[Op]:
    """The products after the first (a backward linear's weight gradient), run after the chunks."""
    return [gemm_op(name, *gemm.gemms[1:])] if len(gemm.gemms) > 1 else []


def _torch_gather_matmul(gather: Collective, gemm: Op, tp: int) -> list[LayerStep]:
    """`fused_all_gather_matmul`: copy the local shard, GEMM it at once; shard i's GEMM waits for its
    copy, the copies go one after another."""
    local = memory_op(f"{gemm.name}_shard_copy", gather.bytes / BYTES_BF16 / tp, COPY_BYTES)
    nodes: list[Node] = [_rows(gemm, tp, f"{gemm.name}_chunk0")]
    deps: list[tuple[int, ...]] = [()]
    copy, gemm_at = -1, 0
    for r in range(1, tp):
        nodes.append(_shard_copy(gather, tp))
        deps.append((copy,) if copy >= 0 else ())
        copy = len(nodes) - 1
        nodes.append(_rows(gemm, tp, f"{gemm.name}_chunk{r}"))
        deps.append((copy, gemm_at))
        gemm_at = len(nodes) - 1
    group = Concurrent(f"{gemm.name}_overlapped", tuple(nodes), tuple(deps))
    return [local, group, *_rest(gemm, f"{gemm.name}_wgrad")]


def _torch_matmul_scatter(gemm: Op, scatter: Collective, tp: int) -> list[LayerStep]:
    """`fused_matmul_reduce_scatter`: the chunk for each other rank, pulled by it while the next is
    computed; the local chunk last; then the tp partial chunks summed."""
    nodes: list[Node] = []
    deps: list[tuple[int, ...]] = []
    gemm_at = copy = -1
    for r in range(1, tp):
        nodes.append(_rows(gemm, tp, f"{gemm.name}_chunk{r}"))
        deps.append((gemm_at,) if gemm_at >= 0 else ())
        gemm_at = len(nodes) - 1
        nodes.append(_shard_copy(scatter, tp))
        deps.append(tuple(d for d in (gemm_at, copy) if d >= 0))
        copy = len(nodes) - 1
    nodes.append(_rows(gemm, tp, f"{gemm.name}_chunk0"))
    deps.append((gemm_at,))
    group = Concurrent(f"{gemm.name}_overlapped", tuple(nodes), tuple(deps))
    chunk_elements = scatter.bytes / BYTES_BF16 / tp  # elements of one rank's output chunk
    reduce = memory_op(f"{gemm.name}_chunk_sum", chunk_elements, 2 * (tp + 1), flops=float(tp - 1))
    return [group, reduce, *_rest(gemm, f"{gemm.name}_wgrad")]
