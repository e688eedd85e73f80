"""Measured tables: into the run directory with the spec, back out for the communicator they fit."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import yaml

from astra_hetero.comm.measured import ScopedTable, select_table
from astra_hetero.comm.nccl_tests import MeasuredTable
from astra_hetero.pipeline import build_run_dir, execute
from astra_hetero.spec import load_spec
from tests.conftest import make_spec_data

SAMPLE = Path(__file__).parents[1] / "data" / "nccl_tests" / "all_reduce_perf_8xh100.txt"


def _table(scope: str, collective: str, node_group: str | None = None) -> ScopedTable:
    measured = MeasuredTable(collective, (1024, 2048), (10.0, 11.0), 1.75, 8)
    return ScopedTable(scope, node_group, f"nccl_tests/{scope}-{collective}-{node_group}", measured)


TABLES = [
    _table("intra_node", "all_reduce"),
    _table("intra_node", "all_reduce", "a100"),
    _table("intra_node", "all_gather", "h100"),
    _table("inter_node", "all_reduce"),
]


def test_a_node_groups_own_table_comes_before_a_general_one():
    assert select_table(TABLES, "intra_node", "all_reduce", {"a100"}).node_group == "a100"
    assert select_table(TABLES, "intra_node", "all_reduce", {"h100"}).node_group is None


def test_a_table_of_another_node_group_never_applies():
    assert select_table(TABLES, "intra_node", "all_gather", {"a100"}).table.collective == "all_reduce"
    assert select_table(TABLES, "intra_node", "all_gather", {"h100"}).table.collective == "all_gather"
    assert select_table(TABLES, "inter_node", "all_reduce", {"h100", "a100"}).scope == "inter_node"


def test_all_reduce_tables_serve_all_gather_and_reduce_scatter_but_not_point_to_point():
    assert select_table(TABLES, "inter_node", "reduce_scatter", {"h100"}).table.collective == "all_reduce"
    assert select_table(TABLES, "inter_node", "send_recv", {"h100"}) is None
    assert select_table(TABLES, "inter_node", "all_to_all", {"h100"}) is None


def _sized(scope: str, ranks: int | None, nodes: int | None) -> ScopedTable:
    measured = MeasuredTable("all_reduce", (1024,), (10.0,), 1.75, ranks, nodes)
    return ScopedTable(scope, None, f"nccl_tests/{scope}-{ranks}-{nodes}", measured)


def test_among_several_tables_of_a_scope_the_closest_size_is_used():
    intra = [_sized("intra_node", 8, 1), _sized("intra_node", 2, 1), _sized("intra_node", None, None)]
    assert select_table(intra, "intra_node", "all_reduce", set(), 2, 1).table.num_ranks == 2
    assert select_table(intra, "intra_node", "all_reduce", set(), 4, 1).table.num_ranks in (2, 8)
    assert select_table(intra, "intra_node", "all_reduce", set(), 8, 1).table.num_ranks == 8
    inter = [_sized("inter_node", 16, 2), _sized("inter_node", 128, 16), _sized("inter_node", 32, 4)]
    assert select_table(inter, "inter_node", "all_reduce", set(), 24, 3).table.num_nodes == 4
    assert select_table(inter, "inter_node", "all_reduce", set(), 64, 8).table.num_nodes in (4, 16)
    assert select_table(inter, "inter_node", "all_reduce", set(), 256, 32).table.num_nodes == 16
    # a table that does not say how many ranks it measured serves only when no other does
    assert select_table([_sized("intra_node", None, None)], "intra_node", "all_reduce", set(), 8, 1)


def test_a_run_directory_carries_its_tables_and_runs_after_moving(tmp_path):
    sample = SAMPLE
    shutil.copyfile(sample, tmp_path / "h100.txt")
    data = make_spec_data(
        collectives={"nccl_tests": {"intra_node": [{"path": "h100.txt", "node_group": "h100"}]}}
    )
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(data))
    built = build_run_dir(load_spec(tmp_path / "spec.yaml"), tmp_path / "run").root
    manifest = json.loads((built / "manifest.json").read_text())
    (entry,) = manifest["nccl_tests"]
    assert entry == {
        "scope": "intra_node",
        "collective": "all_reduce",
        "node_group": "h100",
        "path": "nccl_tests/intra_node-0-h100.txt",
    }
    assert (built / entry["path"]).read_text() == sample.read_text()
    moved = shutil.move(built, tmp_path / "elsewhere")
    (tmp_path / "h100.txt").unlink()
    result = execute(Path(moved), timeline="none")
    choices = {
        (c["num_ranks"], c["algorithm"]) for c in result.meta["nccl_choices"] if c["type"] != "send_recv"
    }
    assert (2, "nccl-tests") in choices  # the H100 nodes' TP pairs use the table; the A100s' are modelled
    assert any(algorithm != "nccl-tests" for _, algorithm in choices)
