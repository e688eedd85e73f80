"""`--json` on run, report and plan: stdout is one JSON object holding the same figures as the files
the command wrote (and where those files are), with no table or progress bar mixed in."""

from __future__ import annotations

import json

import pytest
import yaml

from astra_hetero.cli.main import main
from tests.planner.specs import NARROW, plan_data
from tests.test_pipeline import small_spec


@pytest.fixture(scope="module")
def spec_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("json") / "spec.yaml"
    path.write_text(yaml.safe_dump(small_spec()))
    return path


def printed_json(capsys) -> dict:
    out = capsys.readouterr().out
    return json.loads(out)  # the whole of stdout: nothing before or after the object


def test_run_json_is_the_run_summary(spec_path, tmp_path, capsys):
    run_dir = tmp_path / "run"
    assert main(["run", str(spec_path), "-o", str(run_dir), "--json"]) == 0
    doc = printed_json(capsys)
    result = json.loads((run_dir / "result.json").read_text())
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert doc["format"] == "astra-hetero/run-summary@1"
    assert doc["iteration_time_us"] == result["iteration_time_us"]
    assert doc["throughput"] == result["throughput"]
    assert doc["simulated"]["plan"].startswith("TP 2 · PP 2 · DP 2")
    assert doc["simulated"]["memory"]["h100-sxm"]["peak_gib"] == manifest["memory"]["h100-sxm"]["peak_gib"]
    assert [g["label"] for g in doc["by_stage"]] == ["stage 0", "stage 1"]
    assert sum(g["num_ranks"] for g in doc["by_gpu"]) == result["ranks"][-1]["rank"] + 1
    assert doc["files"] == {"result": str(run_dir / "result.json"), "trace": str(run_dir / "trace.json")}


def test_report_json_is_report_json_with_the_files(spec_path, tmp_path, capsys):
    run_dir = tmp_path / "run"
    assert main(["run", str(spec_path), "-o", str(run_dir), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["report", str(run_dir), "--no-plots", "--json"]) == 0
    doc = printed_json(capsys)
    written = json.loads((run_dir / "report/report.json").read_text())
    assert {k: v for k, v in doc.items() if k != "files"} == written
    assert str(run_dir / "report/report.md") in doc["files"]
    assert written["runs"][0]["simulated"]["gpus"] == "8 GPUs: 8 h100-sxm"


def test_plan_json_is_search_json_with_the_files(tmp_path, capsys):
    data = plan_data({**NARROW, "tp": 4})
    (tmp_path / "plan.yaml").write_text(yaml.safe_dump(data))
    out = tmp_path / "out"
    argv = ["plan", str(tmp_path / "plan.yaml"), "-o", str(out), "--jobs", "1", "--no-cache", "--json"]
    assert main(argv) == 0
    doc = printed_json(capsys)
    written = json.loads((out / "search.json").read_text())
    assert {k: v for k, v in doc.items() if k != "files"} == written
    assert doc["files"]["best.yaml"] == str(out / "best.yaml")
