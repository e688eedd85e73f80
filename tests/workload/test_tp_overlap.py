"""TP communication overlap: never slower than exposed collectives, the same when they cost nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from astra_hetero.backends.embedded.backend import EmbeddedBackend
from astra_hetero.errors import SpecError
from astra_hetero.pipeline import build_run_dir
from astra_hetero.spec import parse_spec
from astra_hetero.workload.blocks import Segment, TimedGroup
from astra_hetero.workload.costs import Collective, layer_backward, layer_forward
from astra_hetero.workload.generate import plan_workload
from astra_hetero.workload.ops import Concurrent, Op, Piece, shape_of
from astra_hetero.workload.tp_overlap import SPLITS, overlap_tp
from tests.conftest import node_group


def tp_spec(overlap: bool, preset: str = "llama2-13b", tp: int = 4, **extra: Any) -> dict[str, Any]:
    return {
        "model": {"preset": preset, "num_layers": 2},
        "cluster": {"node_groups": [node_group("h100", "h100-sxm", count=1, gpus_per_node=tp)]},
        "parallelism": {
            "tp": tp,
            "sequence_parallel": True,
            "tp_comm_overlap": overlap,
            "global_batch_size": 2,
        },
        **extra,
    }


def iteration_us(tmp_path: Path, data: dict[str, Any]) -> float:
    out = tmp_path / f"run{len(list(tmp_path.iterdir()))}"
    build_run_dir(parse_spec(data), out)
    return EmbeddedBackend(timeline=False).run(out).result.iteration_time_us


def test_every_tp_collective_of_a_layer_sits_beside_a_gemm():
    spec = parse_spec(tp_spec(True))
    x = shape_of(spec.model, spec.parallelism)
    for steps in (layer_forward(x), layer_backward(x, "none")):
        overlapped = overlap_tp(steps)
        assert not [s for s in overlapped if isinstance(s, Collective) and s.group == "tp"]
        assert sum(isinstance(s, Concurrent) for s in overlapped) == 4  # QKV, out-proj, FC1, FC2


def test_overlap_keeps_every_gemm_flop_and_every_collective_byte():
    spec = parse_spec(tp_spec(True))
    x = shape_of(spec.model, spec.parallelism)
    for steps in (layer_forward(x), layer_backward(x, "none")):
        plain_flops = sum(s.flops for s in steps if isinstance(s, Op))
        plain_bytes = sum(s.bytes for s in steps if isinstance(s, Collective))
        flops = comm = 0.0
        for step in overlap_tp(steps):
            nodes = step.nodes if isinstance(step, Concurrent) else (step,)
            for node in nodes:
                if isinstance(node, Piece):
                    flops += node.op.flops * node.fraction
                elif isinstance(node, Op):
                    flops += node.flops
                elif isinstance(node, Collective):
                    comm += node.bytes
        assert flops == pytest.approx(plain_flops)
        assert comm == pytest.approx(plain_bytes, rel=SPLITS * 1e-6)


def test_overlapped_layers_compute_as_long_as_plain_ones():
    times = {}
    for overlap in (False, True):
        plan = plan_workload(parse_spec(tp_spec(overlap)))
        blocks = plan.contexts[0].blocks
        times[overlap] = sum(
            item.time_ns if isinstance(item, Segment) else item.compute_ns
            for block in (blocks.layer_fwd, blocks.layer_bwd)
            for item in block
            if isinstance(item, Segment | TimedGroup)
        )
    assert times[True] == pytest.approx(times[False])


@pytest.mark.parametrize(
    "preset,tp,model",
    [
        ("llama2-13b", 4, "nccl"),
        ("llama2-70b", 8, "nccl"),
        ("gpt3-13b", 2, "ideal"),
        ("llama2-7b", 8, "ideal"),
    ],
)
def test_overlap_is_never_slower_than_exposed_collectives(tmp_path, preset, tp, model):
    extra = {"collectives": {"model": model}}
    plain = iteration_us(tmp_path, tp_spec(False, preset, tp, **extra))
    overlapped = iteration_us(tmp_path, tp_spec(True, preset, tp, **extra))
    assert overlapped <= plain
    assert overlapped < 0.99 * plain  # and it does hide communication


def test_overlap_changes_nothing_when_collectives_cost_nothing(tmp_path):
    # an intra-node fabric of 100 TB/s without latency and reductions at 1 PB/s, priced by the ideal
    # model: TP traffic all but free
    group = {"intra_node_fabric": {"kind": "nvlink", "gbytes_per_s": 1e5, "latency_ns": 0.0}}
    group["gpu"] = {"preset": "h100-sxm", "name": "h100-fast-memory", "hbm_tbps": 1000.0}
    times = []
    for overlap in (False, True):
        data = tp_spec(overlap, collectives={"model": "ideal"})
        data["cluster"]["node_groups"][0].update(group)
        times.append(iteration_us(tmp_path, data))
    # the same within 0.2 %: the overlapped GEMMs run as SPLITS chunks, each a kernel the CPU
    # launches, and with memory this fast the layer's short kernels are partly launch-bound
    assert times[1] == pytest.approx(times[0], rel=2e-3)


def test_overlap_needs_sequence_parallelism():
    data = tp_spec(True)
    data["parallelism"]["sequence_parallel"] = False
    with pytest.raises(SpecError) as error:
        parse_spec(data)
    assert error.value.field == "parallelism.tp_comm_overlap"


# torch's micro-pipeline TP (`tp_overlap_method: torch_async`), as torchtitan's async TP runs it


def torch_spec(overlap: bool, tp: int = 4, **extra: Any) -> dict[str, Any]:
    data = tp_spec(overlap, "llama3.1-8b", tp, **extra)
    data["compute"] = {"framework": "fsdp", **data.get("compute", {})}
    if overlap:
        data["parallelism"]["tp_overlap_method"] = "torch_async"
    return data


def torch_shape(tp: int = 4):
    spec = parse_spec(torch_spec(True, tp))
    return shape_of(spec.model, spec.parallelism, framework=spec.compute.framework)


def _tp_collectives(steps) -> list[str]:
    return [s.kind for s in steps if isinstance(s, Collective) and s.group == "tp"]


def test_torch_tp_does_not_regather_the_input_for_the_weight_gradient():
    spec = parse_spec(tp_spec(False))
    megatron = shape_of(spec.model, spec.parallelism)
    torch = shape_of(spec.model, spec.parallelism, framework="fsdp")
    # backward: the output gradients' all-gathers (wo, w2) and the input gradients' reduce-scatters,
    # plus, in Megatron / Transformer Engine only, the input re-gathered before QKV and FC1
    assert _tp_collectives(layer_backward(megatron, "none")).count("all_gather") == 4
    assert _tp_collectives(layer_backward(torch, "none")).count("all_gather") == 2
    assert _tp_collectives(layer_backward(torch, "none")).count("reduce_scatter") == 2


@pytest.mark.parametrize("tp", [2, 4, 8])
def test_torch_async_pairs_the_forward_and_the_backward_output_gradient_gathers_only(tp):
    x = torch_shape(tp)
    forward = overlap_tp(layer_forward(x), "torch_async", tp)
    backward = overlap_tp(layer_backward(x, "none"), "torch_async", tp)
    assert _tp_collectives(forward) == []
    assert sum(isinstance(s, Concurrent) for s in forward) == 4  # QKV, out-proj, FC1, FC2
    # the input gradients of wq/wk/wv and w1/w3 are sums of mm outputs: their reduce-scatters stay
    assert _tp_collectives(backward) == ["reduce_scatter", "reduce_scatter"]
    assert sum(isinstance(s, Concurrent) for s in backward) == 2  # FC2 and out-proj input gradients


@pytest.mark.parametrize("tp", [2, 4, 8])
def test_torch_async_runs_tp_gemm_chunks_of_tokens_over_tp_rows_and_tp_minus_one_shard_copies(tp):
    x = torch_shape(tp)
    plain = [s for s in layer_forward(x) if isinstance(s, Collective) and s.group == "tp"]
    groups = [s for s in overlap_tp(layer_forward(x), "torch_async", tp) if isinstance(s, Concurrent)]
    for group, collective in zip(groups, plain, strict=True):
        chunks = [n for n in group.nodes if isinstance(n, Op)]
        copies = [n for n in group.nodes if isinstance(n, Collective)]
        assert len(chunks) == tp and len(copies) == tp - 1
        assert {g.m for c in chunks for g in c.gemms} == {x.tokens // tp}
        # each copy moves one shard per rank: an all-gather of 1/(tp-1) of the buffer
        assert all(c.kind == "all_gather" for c in copies)
        assert sum(c.bytes for c in copies) == pytest.approx(collective.bytes, rel=1e-6)


def test_torch_async_keeps_every_gemm_flop():
    x = torch_shape(4)
    for steps in (layer_forward(x), layer_backward(x, "none")):
        plain = sum(s.flops for s in steps if isinstance(s, Op) and s.kind == "gemm")
        flops = 0.0
        for step in overlap_tp(steps, "torch_async", 4):
            for node in step.nodes if isinstance(step, Concurrent) else (step,):
                if isinstance(node, Op) and node.kind == "gemm":
                    flops += node.flops
        assert flops == pytest.approx(plain)


def test_torch_async_first_gathered_chunk_waits_for_nothing_and_each_other_for_its_copy():
    x = torch_shape(4)
    group = next(s for s in overlap_tp(layer_forward(x), "torch_async", 4) if isinstance(s, Concurrent))
    assert group.deps[0] == ()  # the local shard's GEMM
    for index, node in enumerate(group.nodes[1:], start=1):
        if isinstance(node, Op):
            assert isinstance(group.nodes[group.deps[index][0]], Collective)


@pytest.mark.parametrize("tp", [4, 8])
def test_torch_async_hides_communication_at_torchtitan_sizes(tmp_path, tp):
    # torchtitan's TP rows run 2-16 sequences of 8192 tokens per micro-batch; at 4 (4096 rows per
    # chunk at tp 8) the decomposed GEMMs lose less than the copies hide. Micro-pipeline TP has no
    # size threshold for sequence-dim gathers: at a few hundred rows per chunk it can be slower.
    batch = {"micro_batch_size": 4, "global_batch_size": 4}
    runs = []
    for overlap in (False, True):
        data = torch_spec(overlap, tp)
        data["parallelism"].update(batch)
        runs.append(iteration_us(tmp_path, data))
    assert runs[1] < runs[0]


def test_torch_async_with_free_collectives_costs_only_its_decomposition(tmp_path):
    # nearly free TP traffic: what remains is the price of the decomposition itself (GEMMs of
    # tokens/tp rows, the local shard copy, the sum of the partial chunks), never a saving
    group = {"intra_node_fabric": {"kind": "nvlink", "gbytes_per_s": 1e5, "latency_ns": 0.0}}
    group["gpu"] = {"preset": "h100-sxm", "name": "h100-fast-memory", "hbm_tbps": 1000.0}
    times = []
    for overlap in (False, True):
        data = torch_spec(overlap, collectives={"model": "ideal"})
        data["cluster"]["node_groups"][0].update(group)
        times.append(iteration_us(tmp_path, data))
    assert times[0] <= times[1] <= 1.05 * times[0]


def test_torch_async_is_read_only_with_tp_comm_overlap():
    # the planner may switch tp_comm_overlap off under a spec that names the method
    data = torch_spec(False)
    data["parallelism"]["tp_overlap_method"] = "torch_async"
    spec = parse_spec(data)
    plain = parse_spec(torch_spec(False))
    x = shape_of(spec.model, spec.parallelism, framework="fsdp")
    y = shape_of(plain.model, plain.parallelism, framework="fsdp")
    assert not x.tp_overlap
    for steps, plain_steps in (
        (layer_forward(x), layer_forward(y)),
        (layer_backward(x, "none"), layer_backward(y, "none")),
    ):
        assert steps == plain_steps
