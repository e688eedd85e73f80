"""The mapping grid: every cell takes its TP group from the node group it names, stage by stage and
replica by replica; shorthands are grids; GPUs no cell takes are idle, with empty traces."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from astra_hetero import pipeline
from astra_hetero.errors import InfeasiblePlan, SpecError
from astra_hetero.results.aggregate import group_ranks
from astra_hetero.spec import parse_spec
from astra_hetero.spec.devices import enumerate_devices
from astra_hetero.units import BYTES_PER_GIB
from astra_hetero.workload.generate import plan_workload
from astra_hetero.workload.layout import build_layout
from astra_hetero.workload.memory import estimate
from tests.conftest import make_spec_data, node_group
from tests.workload.traces import read_with_chakra

MIXED_GRID = [["h100", "a100", "h100", "a100"], ["a100", "h100", "a100", "h100"]]


def with_mapping(mapping: dict, **parallelism: object) -> dict:
    data = make_spec_data(mapping=mapping)
    data["parallelism"] = {**data["parallelism"], **parallelism}
    return data


def test_each_cell_is_a_tp_group_of_the_node_group_its_grid_entry_names():
    spec = parse_spec(with_mapping({"grid": MIXED_GRID}))
    layout = build_layout(spec)
    devices = enumerate_devices(spec.cluster)
    for stage, row in enumerate(MIXED_GRID):
        for replica, group in enumerate(row):
            ranks = layout.cells[stage][replica]
            assert len(ranks) == spec.parallelism.tp
            assert {devices[r].group_name for r in ranks} == {group}
            assert len({devices[r].node for r in ranks}) == 1
            for tp_index, rank in enumerate(ranks):
                place = layout.placements[rank]
                assert (place.stage, place.replica, place.tp_index) == (stage, replica, tp_index)


@pytest.mark.parametrize(
    ("shorthand", "grid"),
    [
        ({"stages": ["a100", "h100"]}, [["a100"] * 4, ["h100"] * 4]),
        ({"replicas": ["h100", "a100", "a100", "h100"]}, [["h100", "a100", "a100", "h100"]] * 2),
    ],
)
def test_stages_and_replicas_are_shorthands_for_grids(shorthand, grid):
    assert build_layout(parse_spec(with_mapping(shorthand))) == build_layout(
        parse_spec(with_mapping({"grid": grid}))
    )


@pytest.mark.parametrize(
    ("mapping", "field", "reason"),
    [
        ({"grid": MIXED_GRID[:1]}, "mapping.grid", "expected pp=2"),
        ({"grid": [MIXED_GRID[0], MIXED_GRID[1][:3]]}, "mapping.grid[1]", "expected dp=4"),
        (
            {"grid": [MIXED_GRID[0], ["a100", "h100", "b200", "h100"]]},
            "mapping.grid[1][2]",
            "unknown node group",
        ),
        (
            {"grid": [["h100"] * 4, ["h100", "h100", "a100", "a100"]]},
            "mapping.grid",
            "has 8 GPUs, too few for the 6 cells mapped to it (2 GPUs each, 12 in all)",
        ),
        ({"grid": MIXED_GRID, "stages": ["h100", "a100"]}, "mapping", "at most one"),
    ],
)
def test_a_bad_grid_names_the_entry_and_the_reason(mapping, field, reason):
    with pytest.raises(SpecError) as caught:
        plan_workload(parse_spec(with_mapping(mapping)))
    assert caught.value.field == field and reason in caught.value.reason


def test_a_grid_that_leaves_gpus_unused_needs_allow_idle_gpus():
    grid = [["h100", "h100", "a100"], ["h100", "a100", "a100"]]
    with pytest.raises(SpecError, match="allow_idle_gpus"):
        parse_spec(with_mapping({"grid": grid}, dp=3, global_batch_size=12))
    spec = parse_spec(with_mapping({"grid": grid, "allow_idle_gpus": True}, dp=3, global_batch_size=12))
    layout = build_layout(spec)
    assert len(layout.idle_ranks) == 4 and len(layout.active_ranks) == 12
    assert {layout.devices[r].group_name for r in layout.idle_ranks} == {"h100", "a100"}


def test_tp_must_fit_a_node_only_in_the_groups_that_serve_cells():
    data = make_spec_data()
    data["cluster"]["node_groups"] = [
        node_group("big", "h100-sxm", count=2, gpus_per_node=8),
        node_group("small", "l40s", count=1, gpus_per_node=2, fabric="pcie4", nic=200),
    ]
    data["parallelism"] = {"tp": 8, "pp": 2, "dp": 1, "global_batch_size": 4}
    data["mapping"] = {"grid": [["big"], ["big"]], "allow_idle_gpus": True}
    assert build_layout(parse_spec(data)).idle_ranks == (16, 17)
    data["mapping"] = {"grid": [["big"], ["small"]], "allow_idle_gpus": True}
    with pytest.raises(SpecError) as caught:
        parse_spec(data)
    assert caught.value.field == "cluster.node_groups[1].gpus_per_node"


def test_memory_is_checked_per_cell_on_its_own_gpu():
    data = with_mapping({"grid": MIXED_GRID})
    spec = parse_spec(data)
    split = plan_workload(spec).partition
    need_gib = (
        min(
            estimate(spec, s, split.layers_per_stage[s], split.micro_batches_per_replica[0]).total
            for s in range(spec.parallelism.pp)
        )
        / BYTES_PER_GIB
    )
    # A100s with half of what any cell needs; the H100 cells of the same grid still fit
    data["cluster"]["node_groups"][1]["gpu"] = {"preset": "a100-80", "memory_gib": round(need_gib / 2, 3)}
    with pytest.raises(InfeasiblePlan) as caught:
        plan_workload(parse_spec(data))
    assert "A100" in str(caught.value) and "replica 1" in str(caught.value)  # stage 0's a100 cell


def test_idle_gpus_get_a_zero_duration_trace_and_no_stage_in_manifest_or_result(tmp_path: Path):
    grid = [["h100", "h100", "a100"], ["h100", "a100", "a100"]]
    spec = parse_spec(with_mapping({"grid": grid, "allow_idle_gpus": True}, dp=3, global_batch_size=12))
    run = pipeline.build_run_dir(spec, tmp_path / "run", per_rank=True)
    manifest = json.loads((run.root / "manifest.json").read_text())
    idle = manifest["idle_ranks"]
    assert len(idle) == 4
    for rank in idle:
        entry = manifest["ranks"][rank]
        assert entry["idle"] and entry["stage"] is None and entry["num_micro_batches"] == 0
        metadata, nodes = read_with_chakra(run.root / f"workload/workload.{rank}.et")
        empty = nodes[0].duration_micros
        assert metadata.version and len(nodes) == 1 and empty == 0
    result = pipeline.execute(run.root, timeline="all")
    for rank in result.ranks:
        if rank.rank in idle:
            assert rank.stage is None and rank.compute_us == 0 and rank.idle_us == result.iteration_time_us
        else:
            assert rank.stage is not None and rank.compute_us > 0
    by_stage = group_ranks(result, "stage")
    assert [g.label for g in by_stage] == ["stage 0", "stage 1", "idle GPUs"] and by_stage[-1].num_ranks == 4
