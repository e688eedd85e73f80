"""The Python API: load a spec (file or mapping), edit it with `with_` (validated again), simulate it
(in a temporary run directory or a kept one), read the result as records or DataFrames, and search
its plan — the same answers as the commands give."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import astra_hetero as ah
from astra_hetero.errors import SpecError
from tests.planner.specs import NARROW, plan_data
from tests.test_pipeline import small_spec

EXAMPLE = Path(__file__).parents[1] / "examples/gpt3_13b_16xh100.yaml"


def test_load_spec_reads_a_file_or_a_mapping():
    from_file = ah.load_spec(EXAMPLE)
    assert from_file.parallelism.tp == 8 and from_file.cluster.num_gpus == 16
    assert ah.load_spec(small_spec()).cluster.num_gpus == 8
    assert ah.load_spec(from_file) is from_file
    with pytest.raises(SpecError, match="parallelism"):
        ah.load_spec({**small_spec(), "parallelism": {"tp": 3, "pp": 1, "dp": 1, "global_batch_size": 4}})


def test_with_changes_fields_merging_sections_and_validates_again():
    spec = ah.load_spec(EXAMPLE)
    edited = spec.with_(parallelism={"tp": 4, "pp": 4}, iterations=2)
    assert (edited.parallelism.tp, edited.parallelism.pp, edited.iterations) == (4, 4, 2)
    assert edited.parallelism.global_batch_size == spec.parallelism.global_batch_size  # merged, not replaced
    assert spec.parallelism.tp == 8  # the original is unchanged
    with pytest.raises(SpecError) as caught:
        spec.with_(parallelism={"tp": 3})  # 3·2·1 GPUs on a 16-GPU cluster
    assert caught.value.field == "parallelism"
    with pytest.raises(SpecError) as caught:
        spec.with_(parallelism={"tp": 0})
    assert caught.value.field == "parallelism.tp"
    with pytest.raises(SpecError, match="no such section"):
        spec.with_(paralelism={"tp": 4})


def test_simulate_in_a_temporary_directory_leaves_nothing_behind(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    result = ah.simulate(small_spec())
    assert result.run_dir is None and list(tmp_path.iterdir()) == []
    assert result.iteration_time_us > 0 and result.throughput["tokens_per_s"] > 0
    assert result.facts.plan.startswith("TP 2 · PP 2 · DP 2")
    assert "iteration" in result.summary()


def test_simulate_into_a_workdir_keeps_the_run_directory_and_its_result(tmp_path):
    result = ah.simulate(ah.load_spec(small_spec()), workdir=tmp_path / "run", iterations=2)
    assert result.run_dir == tmp_path / "run"
    written = json.loads((tmp_path / "run/result.json").read_text())
    assert result.iteration_time_us == written["iteration_time_us"]
    assert len(result.records("iterations")) == 2 and (tmp_path / "run/trace.json").is_file()


def test_ranks_and_collectives_as_dataframes(tmp_path):
    pandas = pytest.importorskip("pandas")
    result = ah.simulate(small_spec())
    ranks = result.to_dataframe("ranks")
    assert isinstance(ranks, pandas.DataFrame) and len(ranks) == 8
    assert list(ranks["rank"]) == list(range(8))
    total = ranks["compute_us"] + ranks["exposed_comm_us"] + ranks["idle_us"]
    assert (abs(total - result.iteration_time_us) < 1e-6 * result.iteration_time_us).all()
    collectives = result.to_dataframe("collectives")
    assert len(collectives) == len(result.run.collectives) > 0
    assert {"type", "bytes", "start_us", "end_us", "duration_us"} <= set(collectives.columns)
    with pytest.raises(ValueError, match="tables: ranks, collectives, iterations"):
        result.records("links")


def test_without_pandas_to_dataframe_says_how_to_get_it(monkeypatch):
    result = ah.Result(ah.simulate(small_spec()).run)
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas now raises ImportError
    with pytest.raises(ImportError, match=r"pip install 'astra-hetero\[pandas\]'"):
        result.to_dataframe()
    assert len(result.records()) == 8  # plain dicts need nothing


def test_plan_finds_a_best_spec_that_simulates_to_the_time_it_reported():
    data = plan_data()
    search = {**data.pop("search"), **NARROW, "tp": 4}
    found = ah.plan(data, search=search)
    assert found.plans[0]["rank"] == 1 and found.best_time_us == pytest.approx(
        found.plans[0]["iteration_time_us"]
    )
    again = ah.simulate(found.best_spec)
    assert again.iteration_time_us == pytest.approx(found.best_time_us, rel=1e-6)


def test_importing_the_package_stays_light():
    heavy = "('pydantic', 'numpy', 'rich')"
    code = f"import sys, astra_hetero; print(sorted(m for m in {heavy} if m in sys.modules))"
    printed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert printed.strip() == "[]"
