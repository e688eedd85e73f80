"""`astra-hetero report`: reads result.json files, prints tables, writes plots and report files."""

from __future__ import annotations

import json

from astra_hetero.cli.main import main
from astra_hetero.results.io import write_result
from tests.results.builders import homogeneous_result, mixed_result


def test_report_compares_two_runs(tmp_path, capsys) -> None:
    write_result(tmp_path / "homo", homogeneous_result())
    write_result(tmp_path / "mixed", mixed_result())
    out_dir = tmp_path / "out"
    assert main(["report", str(tmp_path / "homo"), str(tmp_path / "mixed"), "-o", str(out_dir)]) == 0
    printed = capsys.readouterr().out
    assert "1.462x" in printed and "homo" in printed and "mixed" in printed
    assert {
        "report.json",
        "report.md",
        "iteration.png",
        "stages.png",
        "ranks-homo.png",
        "ranks-mixed.png",
    } <= {p.name for p in out_dir.iterdir()}
    report = json.loads((out_dir / "report.json").read_text())
    assert [run["label"] for run in report["runs"]] == ["homo", "mixed"]
    assert report["runs"][1]["iteration_time_us"] == 95.0
    assert "## Comparison" in (out_dir / "report.md").read_text()


def test_single_run_report_defaults_into_the_run_directory(tmp_path) -> None:
    write_result(tmp_path / "mixed", mixed_result())
    assert main(["report", str(tmp_path / "mixed"), "--no-plots"]) == 0
    written = sorted(p.name for p in (tmp_path / "mixed" / "report").iterdir())
    assert written == [".astra-hetero.json", "report.json", "report.md"]  # the marker: a report of ours


def test_run_directory_without_result_is_an_input_error(tmp_path, capsys) -> None:
    write_result(tmp_path / "homo", homogeneous_result())
    (tmp_path / "empty").mkdir()
    assert main(["report", str(tmp_path / "homo"), str(tmp_path / "empty")]) == 2
    assert "empty/result.json: missing" in capsys.readouterr().err
    assert not (tmp_path / "report").exists()


def test_report_refuses_a_result_of_a_later_format_with_exit_2(tmp_path, capsys) -> None:
    write_result(tmp_path / "run", mixed_result())
    data = json.loads((tmp_path / "run/result.json").read_text())
    (tmp_path / "run/result.json").write_text(json.dumps({**data, "format": "astra-hetero/result@9"}))
    assert main(["report", str(tmp_path / "run"), "--no-plots"]) == 2
    assert "result@9" in capsys.readouterr().err
