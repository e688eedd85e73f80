"""`astra-hetero generate` end to end: files appear only when whole; bad specs write nothing."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from astra_hetero.cli.main import main
from tests.conftest import make_spec_data


def write_spec(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_generate_writes_traces_by_class_groups_manifest_and_spec(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["generate", str(write_spec(tmp_path, make_spec_data())), "-o", str(out)]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["num_ranks"] == 16
    assert sorted(p.name for p in (out / "workload").iterdir()) == [
        "classes",
        "comm_groups.json",
        "rank_classes.json",
    ]
    classes = json.loads((out / "workload/rank_classes.json").read_text())
    assert sorted(p.name for p in (out / "workload/classes").iterdir()) == sorted(
        Path(c["trace"]).name for c in classes["classes"]
    )
    assert sum(count for _, count in classes["class_of"]) == 16
    assert (out / "spec.yaml").is_file()
    assert "16 ranks" in capsys.readouterr().out
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".run.staging")]


def test_generate_per_rank_also_writes_one_trace_per_rank(tmp_path):
    out = tmp_path / "run"
    spec = str(write_spec(tmp_path, make_spec_data()))
    assert main(["generate", spec, "-o", str(out), "--per-rank"]) == 0
    names = {p.name for p in (out / "workload").iterdir()}
    assert {f"workload.{r}.et" for r in range(16)} <= names and "rank_classes.json" in names


def test_bad_spec_exits_2_with_field_and_writes_nothing(tmp_path, capsys):
    data = make_spec_data()
    data["parallelism"]["dp"] = 3
    out = tmp_path / "run"
    assert main(["generate", str(write_spec(tmp_path, data)), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "parallelism" in err and "tp·pp·dp" in err
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["spec.yaml"]


def test_failed_regeneration_leaves_the_previous_run_intact(tmp_path):
    out = tmp_path / "run"
    spec = write_spec(tmp_path, make_spec_data())
    assert main(["generate", str(spec), "-o", str(out)]) == 0
    before = (out / "workload/classes/class.0.et").read_bytes()
    bad = make_spec_data(model="no-such-model")
    assert main(["generate", str(write_spec(tmp_path, bad)), "-o", str(out)]) == 2
    assert (out / "workload/classes/class.0.et").read_bytes() == before
