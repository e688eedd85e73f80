"""The published-run dataset behind benchmarks/fidelity.py: every row is a valid spec, cites its
source, and rows needing fields this version lacks are skipped (or run apart), never silently changed."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import yaml

from astra_hetero.spec import parse_spec
from astra_hetero.spec.schema import ParallelismSpec

BENCHMARKS = Path(__file__).parents[1] / "benchmarks"
spec_loader = importlib.util.spec_from_file_location("fidelity", BENCHMARKS / "fidelity.py")
fidelity = importlib.util.module_from_spec(spec_loader)
sys.modules["fidelity"] = fidelity  # dataclasses look their module up while the file executes
spec_loader.loader.exec_module(fidelity)
ROWS = yaml.safe_load((BENCHMARKS / "fidelity_runs.yaml").read_text())["runs"]


@pytest.mark.parametrize("row", ROWS, ids=[r["id"] for r in ROWS])
def test_every_row_is_a_sourced_valid_spec(row):
    assert row["source"] and row["hardware"] and row["measured"]["iteration_time_s"] > 0
    data, _ = fidelity.spec_data(row, approximate=True)
    spec = parse_spec(data)
    assert spec.cluster.num_gpus == row["cluster"]["nodes"] * row["cluster"]["gpus_per_node"]


# Fields the next parallelism features bring (issue 18); rows naming them are skipped until they land.
PENDING = {"tp_comm_overlap", "overlap_p2p_comm", "cp", "ep", "zero_stage", "fsdp"}


def test_every_row_runs_exactly_with_this_version_or_names_only_pending_fields():
    for row in ROWS:
        data, unknown = fidelity.spec_data(row, approximate=False)
        missing = set(row["parallelism"]) - set(ParallelismSpec.model_fields)
        assert missing <= PENDING, row["id"]
        assert (data is None) == bool(missing) and len(unknown) == len(missing)


def test_a_row_with_an_unknown_field_is_skipped_not_silently_changed():
    row = {**ROWS[0], "parallelism": {**ROWS[0]["parallelism"], "future_flag": 3}}
    assert fidelity.spec_data(row, approximate=False) == (None, ["parallelism.future_flag=3"])
    data, unknown = fidelity.spec_data(row, approximate=True)
    assert "future_flag" not in data["parallelism"] and unknown == ["parallelism.future_flag=3"]


def preset(gpu):
    """A row's GPU preset: the catalog key, or the preset a GPU with overridden numbers starts from."""
    return gpu if isinstance(gpu, str) else gpu["preset"]


def test_excluded_rows_give_their_reason_and_published_rows_cover_a100_and_h100():
    excluded = [r for r in ROWS if r.get("excluded")]
    assert all(len(r["excluded"]) > 20 for r in excluded)
    gpus = {preset(r["cluster"]["gpu"]) for r in ROWS}
    assert {"a100-40", "a100-80", "h100-sxm", "b200", "gb200"} <= gpus
    assert {r.get("precision", {}).get("compute", "bf16") for r in ROWS} >= {"bf16", "fp8"}


def test_mape_is_the_mean_absolute_error_of_evaluated_rows():
    outcomes = [
        fidelity.Outcome("a", 8, 1.0, 1.1, "ok"),
        fidelity.Outcome("b", 8, 2.0, 1.7, "ok"),
        fidelity.Outcome("c", 8, 2.0, None, "skipped"),
    ]
    assert fidelity.mape(outcomes) == pytest.approx(12.5)
    assert fidelity.max_error(outcomes).row_id == "b"


def test_a_row_may_override_its_gpus_numbers_and_the_spec_keeps_them():
    row = next(r for r in ROWS if not isinstance(r["cluster"]["gpu"], str))
    gpu = parse_spec(fidelity.spec_data(row, approximate=True)[0]).cluster.node_groups[0].gpu
    for key, value in row["cluster"]["gpu"].items():
        assert getattr(gpu, key) == value, key


def test_published_peak_memory_fits_the_rows_gpu_and_the_memory_listing_gives_an_estimate_each():
    with_memory = [r for r in ROWS if "memory_gib" in r["measured"]]
    assert with_memory
    for row in with_memory:
        gpu = parse_spec(fidelity.spec_data(row, approximate=True)[0]).cluster.node_groups[0].gpu
        assert 0 < row["measured"]["memory_gib"] <= gpu.memory_gib, row["id"]
    lines = fidelity.memory_lines([r for r in with_memory if r["cluster"]["nodes"] == 1])
    assert len(lines) == 1 + sum(1 for r in with_memory if r["cluster"]["nodes"] == 1)
    assert all(line.rstrip().endswith("%") for line in lines[1:])
