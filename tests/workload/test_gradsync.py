"""Data-parallel gradient reduction and parameter all-gathers: where in each rank's program Megatron-LM
issues them under overlap_grad_reduce / overlap_param_gather, with and without virtual stages."""

from __future__ import annotations

import re

import pytest

from astra_hetero.backends.embedded.backend import EmbeddedBackend
from astra_hetero.pipeline import build_run_dir
from astra_hetero.spec import parse_spec
from astra_hetero.workload.generate import class_graph, plan_workload
from astra_hetero.workload.gradsync import Bucket, plan_buckets
from astra_hetero.workload.program import COLL, COMP
from astra_hetero.workload.schedule import BACKWARD, FORWARD, stage_steps
from tests.conftest import make_spec_data


def spec_data(**parallelism):
    """16 GPUs, TP2·PP2·DP4, 8 layers with tied embeddings, 1 MiB buckets (one layer each)."""
    data = make_spec_data()
    data["model"] = {**data["model"], "tied_embeddings": True}
    data["parallelism"] = {**data["parallelism"], "dp_bucket_mib": 1, **parallelism}
    return data


def rank_graphs(data):
    """{stage: (context, graph)} for replica 0, TP index 0."""
    plan = plan_workload(parse_spec(data))
    out = {}
    for place, ctx in zip(plan.layout.placements, plan.contexts, strict=True):
        if place.replica == 0 and place.tp_index == 0:
            out[place.stage] = (ctx, class_graph(plan, ctx))
    return out


def reductions(graph):
    return [n for n in graph.nodes if n.kind == COLL and n.name.startswith("dp.grad_")]


def gathers(graph):
    return [n for n in graph.nodes if n.kind == COLL and n.name.startswith("dp.param_all_gather")]


def layer_numbers(name: str) -> list[int]:
    return [int(x) for x in re.findall(r"\bL(\d+)\b", name)]


def chunk_of_layer(ctx, layer):
    return next(c for c, (first, end) in enumerate(ctx.chunks) if first <= layer < end)


def test_buckets_close_once_full_in_backward_order():
    units = [("head", 3.0), ("L5", 4.0), ("L4", 4.0), ("L3", 4.0)]
    assert plan_buckets(units, 7.0) == [Bucket(("head", "L5"), 7.0), Bucket(("L4", "L3"), 8.0)]
    assert plan_buckets(units, float("inf")) == [Bucket(("head", "L5", "L4", "L3"), 15.0)]


@pytest.mark.parametrize("virtual_stages", [1, 2])
@pytest.mark.parametrize("distributed_optimizer", [False, True])
def test_every_mode_reduces_the_same_gradient_bytes(virtual_stages, distributed_optimizer):
    totals = set()
    for overlap in (True, False):
        graphs = rank_graphs(
            spec_data(
                virtual_stages=virtual_stages,
                overlap_grad_reduce=overlap,
                distributed_optimizer=distributed_optimizer,
            )
        )
        totals.add(tuple(sum(n.bytes for n in reductions(g)) for _, g in graphs.values()))
    assert len(totals) == 1


def test_one_chunk_overlapped_buckets_are_issued_during_the_last_backward_as_ready():
    for stage, (ctx, graph) in rank_graphs(spec_data()).items():
        issued = reductions(graph)
        last_mb = max(s.micro_batch for s in stage_steps("1f1b", stage, 2, 4, 1) if s.kind == BACKWARD)
        backward_computes = [
            n for n in graph.nodes if n.kind == COMP and n.name.startswith(f"B.mb{last_mb}.")
        ]
        assert len(issued) > 1 and issued[0].id < backward_computes[-1].id  # overlapped with the backward
        for node in issued:
            producer = graph.nodes[node.data_deps[0]]
            assert producer.name.startswith(f"B.mb{last_mb}.")
        labels = [n.name.rsplit(".", 1)[1] for n in issued]
        expected = (["head"] if stage == 1 else []) + [f"L{i}" for i in reversed(range(*ctx.chunks[0]))]
        expected += ["embedding"] if stage == 0 else []
        assert labels == expected  # reverse parameter order, one group per 1 MiB bucket


def test_interleaved_chunk_buckets_go_out_after_the_chunks_last_backward_shifted_by_stage():
    for stage, (ctx, graph) in rank_graphs(spec_data(virtual_stages=2)).items():
        backwards = [s for s in stage_steps("1f1b", stage, 2, 4, 2) if s.kind == BACKWARD]
        last_backward = {s.chunk: i for i, s in enumerate(backwards)}
        for chunk in range(2):
            trigger = last_backward[chunk] + stage
            expected = backwards[min(trigger, len(backwards) - 1)]
            mine = [
                n
                for n in reductions(graph)
                if chunk_of_layer(ctx, _first_layer_of_label(ctx, n.name.rsplit(".", 1)[1])) == chunk
            ]
            assert mine
            for node in mine:
                producer = graph.nodes[node.data_deps[0]]
                assert producer.kind == COMP and producer.name.startswith(f"B.mb{expected.micro_batch}.")
                assert chunk_of_layer(ctx, layer_numbers(producer.name)[0]) == expected.chunk
            labels = [n.name.rsplit(".", 1)[1] for n in mine]
            layers = [int(label[1:]) for label in labels if label.startswith("L")]
            assert layers == sorted(layers, reverse=True)  # the chunk's last layers first


def _first_layer_of_label(ctx, label):
    if label == "head":
        return ctx.chunks[-1][1] - 1
    if label == "embedding":
        return 0
    return int(label[1:])


@pytest.mark.parametrize("virtual_stages", [1, 2])
def test_without_overlap_each_chunk_is_reduced_once_after_the_backward_one_after_another(virtual_stages):
    for _, (ctx, graph) in rank_graphs(
        spec_data(virtual_stages=virtual_stages, overlap_grad_reduce=False)
    ).items():
        issued = reductions(graph)
        assert len(issued) == ctx.num_chunks
        last_backward = max(n.id for n in graph.nodes if n.kind == COMP and n.name.startswith("B."))
        assert issued[0].data_deps == [last_backward]
        for earlier, later in zip(issued, issued[1:], strict=False):
            assert later.data_deps == [earlier.id]  # blocking: the next chunk waits for the previous


@pytest.mark.parametrize("overlap", [True, False])
def test_data_parallel_collectives_run_in_issue_order_on_their_communicator(overlap):
    data = spec_data(
        virtual_stages=2,
        distributed_optimizer=True,
        overlap_grad_reduce=overlap,
        overlap_param_gather=overlap,
    )
    for _, (_, graph) in rank_graphs(data).items():
        issued = [n for n in graph.nodes if n.kind == COLL and n.group == "dp"]
        assert len(issued) > 2
        assert all(a.id in b.data_deps for a, b in zip(issued, issued[1:], strict=False))


def test_tied_embedding_all_reduce_waits_for_the_data_parallel_reduction():
    for stage, (_, graph) in rank_graphs(spec_data(virtual_stages=2)).items():
        embedding = next(n for n in graph.nodes if n.name == "embedding.grad_all_reduce")
        assert {n.id for n in reductions(graph)} <= set(embedding.data_deps), stage


def test_param_gathers_without_overlap_follow_the_optimizer_step_one_bucket_after_another():
    for _, (_, graph) in rank_graphs(spec_data(virtual_stages=2, distributed_optimizer=True)).items():
        step = next(n for n in graph.nodes if n.name == "optimizer.step")
        gathered = gathers(graph)
        assert gathered and step.id in gathered[0].data_deps
        assert all(b.data_deps == [a.id] for a, b in zip(gathered, gathered[1:], strict=False))
        # BF16 parameters of FP32-reduced gradient buckets; all-gather comm_size is each rank's input
        assert sum(n.bytes for n in gathered) == pytest.approx(
            sum(n.bytes for n in reductions(graph)) / 2 / 4, rel=1e-6
        )


@pytest.mark.parametrize("virtual_stages", [1, 4])
def test_overlapped_param_gathers_are_waited_for_by_the_first_forward_use_of_their_layers(virtual_stages):
    data = spec_data(virtual_stages=virtual_stages, distributed_optimizer=True, overlap_param_gather=True)
    for stage, (ctx, graph) in rank_graphs(data).items():
        steps = stage_steps("1f1b", stage, 2, 4, virtual_stages)
        forwards = [i for i, s in enumerate(steps) if s.kind == FORWARD]
        step = next(n for n in graph.nodes if n.name == "optimizer.step")
        gathered = gathers(graph)
        assert gathered and all(n.id < step.id for n in gathered)
        first_compute = next(n.id for n in graph.nodes if n.kind == COMP)
        for node in gathered:
            users = [n for n in graph.nodes if node.id in n.data_deps and n.kind == COMP]
            label = node.name.rsplit(".", 1)[1]
            chunk = chunk_of_layer(ctx, _first_layer_of_label(ctx, label))
            # a bucket is named by its last group in backward order: the first the forward uses,
            # and the compute segment that waits starts there
            first_use = {"embedding": "embed.", "head": "head."}.get(label, f"{label}.")
            assert len(users) == 1 and users[0].name.startswith(f"F.mb0.{first_use}")
            previous = [n.id for n in gathered if n.id < node.id][-1:]
            if chunk < 2:  # issued at the start of the iteration, in order on the dp communicator
                assert node.data_deps == previous and node.id < first_compute
            else:  # issued at forward pass (c − 1)·pp − stage, aligned across the stages
                before = steps[forwards[(chunk - 1) * 2 - stage] - 1]
                producer = graph.nodes[node.data_deps[0]]
                assert node.data_deps[1:] == previous
                assert producer.name.startswith(f"{before.kind}.mb{before.micro_batch}.")
                assert chunk_of_layer(ctx, layer_numbers(producer.name)[-1]) == before.chunk


def engine_time(tmp_path, **parallelism):
    data = spec_data(**parallelism)
    data["parallelism"]["dp_bucket_mib"] = 25
    for group in data["cluster"]["node_groups"]:
        # GPUs at a tenth of their speed against 100G NICs: compute and data-parallel traffic compare
        group["nic"] = 100
        group["gpu"] = {"preset": group["gpu"], "compute_multiplier": 0.1}
    root = tmp_path / "-".join(f"{k}{v}" for k, v in parallelism.items())
    build_run_dir(parse_spec(data), root)
    return EmbeddedBackend().run(root).result.iteration_time_us


@pytest.mark.parametrize("virtual_stages", [1, 2])
def test_overlapping_the_gradient_reduction_shortens_the_iteration(tmp_path, virtual_stages):
    overlapped = engine_time(tmp_path, virtual_stages=virtual_stages)
    after = engine_time(tmp_path, virtual_stages=virtual_stages, overlap_grad_reduce=False)
    assert overlapped < after


def test_overlapping_the_param_gather_shortens_the_iteration(tmp_path):
    blocking = engine_time(tmp_path, distributed_optimizer=True)
    overlapped = engine_time(tmp_path, distributed_optimizer=True, overlap_param_gather=True)
    assert overlapped < blocking
