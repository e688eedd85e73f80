"""Pipeline fields of the spec: virtual stages, chunk splits and the overlap options, with Megatron-LM's
rules and one clear error per bad combination."""

from __future__ import annotations

import pytest

from astra_hetero.errors import SpecError
from astra_hetero.spec import parse_spec
from astra_hetero.workload.generate import plan_workload
from tests.conftest import make_spec_data


def spec_data(partition=None, **parallelism):
    """The 16-GPU test cluster (TP2·PP2·DP4, 8 layers, 16 micro-batches) with changes."""
    data = make_spec_data()
    data["parallelism"] = {**data["parallelism"], **parallelism}
    if partition is not None:
        data["partition"] = partition
    return data


BAD = {
    "gpipe has no interleaved form": (
        spec_data(virtual_stages=2, schedule="gpipe"),
        "parallelism.virtual_stages",
        "needs schedule 1f1b",
    ),
    "interleaving needs two stages": (
        spec_data(virtual_stages=2, pp=1, dp=8),
        "parallelism.virtual_stages",
        "needs pp ≥ 2",
    ),
    "more virtual stages than layers": (
        spec_data(virtual_stages=5),
        "parallelism.virtual_stages",
        "exceed the model's 8 layers",
    ),
    "zero virtual stages": (
        spec_data(virtual_stages=0),
        "parallelism.virtual_stages",
        "greater than or equal to 1",
    ),
    "uniform layers not divisible by pp·v": (
        spec_data(virtual_stages=3),
        "partition.layers",
        "6 virtual stages",
    ),
    "uniform micro-batches not a multiple of pp": (
        spec_data(virtual_stages=2, global_batch_size=12),
        "partition.micro_batches",
        "multiple of pp=2",
    ),
    "listed micro-batches not a multiple of pp": (
        spec_data({"micro_batches": [6, 2, 3, 5]}, virtual_stages=2),
        "partition.micro_batches[2]",
        "multiple of pp=2",
    ),
    "auto micro-batches without whole groups": (
        spec_data({"micro_batches": "auto"}, virtual_stages=2, global_batch_size=6),
        "partition.micro_batches",
        "whole groups",
    ),
    "layer list of the wrong length": (
        spec_data({"layers": [2, 2, 4]}, virtual_stages=2),
        "partition.layers",
        "expected pp=2 (per stage) or pp·virtual_stages=4",
    ),
    "stage list with the wrong number of chunks": (
        spec_data({"layers": [[4], [2, 2]]}, virtual_stages=2),
        "partition.layers[0]",
        "expected virtual_stages=2",
    ),
    "wrong number of stage lists": (
        spec_data({"layers": [[2, 2]]}, virtual_stages=2),
        "partition.layers",
        "1 stage lists",
    ),
    "stage total smaller than its chunks": (
        spec_data({"layers": [1, 7]}, virtual_stages=2),
        "partition.layers[0]",
        "cannot fill",
    ),
    "chunk sizes do not add up": (
        spec_data({"layers": [[2, 2], [2, 1]]}, virtual_stages=2),
        "partition.layers",
        "sums to 7",
    ),
    "empty chunk": (
        spec_data({"layers": [4, 0, 2, 2]}, virtual_stages=2),
        "partition.layers",
        "greater than or equal to 1",
    ),
    "param gather overlap without the distributed optimizer": (
        spec_data(overlap_param_gather=True),
        "parallelism.overlap_param_gather",
        "needs distributed_optimizer",
    ),
    "param gather overlap without grad reduce overlap": (
        spec_data(overlap_param_gather=True, distributed_optimizer=True, overlap_grad_reduce=False),
        "parallelism.overlap_param_gather",
        "needs overlap_grad_reduce",
    ),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_pipeline_spec_names_the_field_and_reason(name):
    data, field, reason = BAD[name]
    with pytest.raises(SpecError) as caught:
        plan_workload(parse_spec(data))
    assert caught.value.field == field
    assert reason in str(caught.value)


def test_defaults_are_one_chunk_overlapped_grad_reduce_and_blocking_param_gather():
    par = parse_spec(make_spec_data()).parallelism
    assert par.virtual_stages == 1
    assert par.overlap_grad_reduce is True and par.overlap_param_gather is False


def test_three_ways_to_list_chunks_describe_the_same_split():
    # virtual stages in model order: g = chunk·pp + stage
    flat = plan_workload(parse_spec(spec_data({"layers": [3, 1, 2, 2]}, virtual_stages=2))).partition
    nested = plan_workload(parse_spec(spec_data({"layers": [[3, 2], [1, 2]]}, virtual_stages=2))).partition
    assert flat == nested
    assert flat.layers_per_chunk == ((3, 2), (1, 2)) and flat.layers_per_stage == (5, 3)
    assert flat.chunk_ranges(0) == ((0, 3), (4, 6)) and flat.chunk_ranges(1) == ((3, 4), (6, 8))


def test_stage_totals_are_split_over_chunks_by_time():
    data = spec_data({"layers": [5, 3]}, virtual_stages=2)
    # a large vocabulary makes the embedding (stage 0, chunk 0) and the LM head (stage 1, chunk 1) costly
    data["model"] = {**data["model"], "vocab_size": 256_000}
    partition = plan_workload(parse_spec(data)).partition
    assert partition.layers_per_stage == (5, 3)
    first, last = partition.layers_per_chunk
    assert first[0] < first[1]  # the chunk with the embedding takes fewer layers
    assert last == (2, 1)  # the chunk with the LM head takes fewer layers


def test_uniform_interleaved_split_has_equal_chunks():
    partition = plan_workload(parse_spec(spec_data(virtual_stages=2))).partition
    assert partition.layers_per_chunk == ((2, 2), (2, 2))
    assert partition.layers_per_virtual_stage == (2, 2, 2, 2)


def test_auto_micro_batches_come_in_whole_groups_of_pp_and_favour_faster_replicas():
    data = spec_data({"micro_batches": "auto"}, virtual_stages=2, global_batch_size=32)
    data["mapping"] = {"replicas": ["h100", "h100", "a100", "a100"]}
    batches = plan_workload(parse_spec(data)).partition.micro_batches_per_replica
    assert sum(batches) == 32 and all(n % 2 == 0 and n >= 2 for n in batches)
    assert min(batches[:2]) > max(batches[2:])
