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
"""

from __future__ import annotations

from astra_hetero.workload.ops import Collective, Concurrent, LayerStep, Node, Op, Piece

SPLITS = 4


def overlap_tp(steps: list[LayerStep]) -> list[LayerStep]:
    """The layer's steps with each TP collective next to a GEMM turned into an overlapped group."""
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
