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


def test_rows_needing_unknown_fields_are_skipped_unless_they_ask_for_todays_behaviour():
    for row in ROWS:
        data, unknown = fidelity.spec_data(row, approximate=False)
        wanted = {k: v for k, v in row["parallelism"].items() if k not in ParallelismSpec.model_fields}
        differs = {
            k
            for k, v in wanted.items()
            if fidelity.CURRENT_BEHAVIOUR.get(k) != v
            and not (k.startswith("overlap_") and row["parallelism"]["dp"] == 1)
        }
        assert (data is None) == bool(differs)
        assert {u.split("=")[0].removeprefix("parallelism.") for u in unknown} == differs


def test_mape_is_the_mean_absolute_error_of_evaluated_rows():
    outcomes = [
        fidelity.Outcome("a", 8, 1.0, 1.1, "ok"),
        fidelity.Outcome("b", 8, 2.0, 1.8, "ok"),
        fidelity.Outcome("c", 8, 2.0, None, "skipped"),
    ]
    assert fidelity.mape(outcomes) == pytest.approx(10.0)
