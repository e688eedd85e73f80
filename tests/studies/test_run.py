"""Running a study: one row per point, a failed point reported while the rest go on, and resuming —
a point complete for its current inputs is not run again; any change of inputs or result reruns it."""

from __future__ import annotations

import csv
import json

import pytest

from astra_hetero.cli.main import main
from astra_hetero.studies import build_table, plan_study, run_study, write_report
from astra_hetero.studies.run import RECORD, inputs_digest, points_dir, resolve_backends
from tests.conftest import make_spec_data

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def tiny_study(**extra):
    data = {
        "name": "tiny",
        "title": "A100 NIC speed and TP",
        "base": make_spec_data(scope={"layers_per_stage": 1, "micro_batches_per_replica": 1}),
        "axes": {
            "nic_gbps": {"path": "cluster.node_groups[1].nic.gbps", "values": [100, 400]},
            # tp=3 cannot tile 16 GPUs: those points fail, the others run
            "tp": {"path": "parallelism.tp", "values": [2, 3]},
        },
        "derived": [
            {"name": "speedup", "of": "iteration_time_us", "kind": "ratio", "relative_to": {"nic_gbps": 100}}
        ],
        "tables": [
            {"title": "iteration", "rows": ["nic_gbps"], "pivot": "tp", "values": ["iteration_time_us"]}
        ],
        "figures": [
            {
                "name": "iteration",
                "title": "Iteration time against the A100 NIC speed",
                "kind": "line",
                "x": "nic_gbps",
                "y": ["iteration_time_us"],
                "series": "tp",
            }
        ],
    }
    data.update(extra)
    return data


def rows(out):
    with open(out / "results.csv", newline="") as handle:
        return list(csv.DictReader(handle))


def run(study, out, **options):
    outcomes = run_study(study, out, **options)
    files = write_report(build_table(study, outcomes), out)
    return outcomes, files


def test_every_point_gets_a_row_and_failures_do_not_stop_the_rest(tmp_path):
    study = plan_study(tiny_study(), tmp_path)
    outcomes, files = run(study, tmp_path / "out", jobs=2)
    assert [o.ok for o in outcomes] == [True, False, True, False]
    table = rows(tmp_path / "out")
    assert [r["point"] for r in table] == [p.name for p in study.points]
    assert [r["status"] for r in table] == ["ok", "failed", "ok", "failed"]
    assert all("parallelism" in r["error"] for r in table if r["status"] == "failed")
    ok = [r for r in table if r["status"] == "ok"]
    result = json.loads((points_dir(tmp_path / "out") / ok[0]["point"] / "result.json").read_text())
    assert float(ok[0]["iteration_time_us"]) == pytest.approx(result["iteration_time_us"], abs=1e-6)
    # the faster NIC can only help: ratio to the 100G point at most 1, and exactly 1 for that point
    assert float(ok[0]["speedup"]) == 1.0 and float(ok[1]["speedup"]) <= 1.0
    report = files.report.read_text()
    assert (
        "## Failed points" in report
        and "![Iteration time against the A100 NIC speed](iteration.png)" in report
    )
    assert files.figures == (tmp_path / "out/iteration.png",)
    assert files.figures[0].read_bytes().startswith(PNG_SIGNATURE)


def test_complete_points_are_not_run_again(tmp_path):
    study = plan_study(tiny_study(), tmp_path)
    out = tmp_path / "out"
    run(study, out)
    first = {p.name: (points_dir(out) / p.name / "result.json").stat().st_mtime_ns for p in study.points[::2]}
    outcomes, _ = run(study, out)
    assert [o.resumed for o in outcomes] == [True, False, True, False]  # failed points are retried
    assert {name: (points_dir(out) / name / "result.json").stat().st_mtime_ns for name in first} == first
    assert [r["status"] for r in rows(out)] == ["ok", "failed", "ok", "failed"]


def test_a_changed_input_or_a_replaced_result_reruns_exactly_that_point(tmp_path):
    out = tmp_path / "out"
    study = plan_study(tiny_study(), tmp_path)
    run(study, out)
    data = tiny_study()
    data["axes"]["nic_gbps"]["values"] = [100, 400]
    data["set"] = {"cluster.node_groups[0].nic.gbps": 200}  # every point's inputs change
    changed = plan_study(data, tmp_path)
    assert all(
        inputs_digest(a, {}) != inputs_digest(b, {})
        for a, b in zip(study.points, changed.points, strict=True)
    )
    outcomes, _ = run(changed, out)
    assert not any(o.resumed for o in outcomes)
    victim = points_dir(out) / changed.points[2].name / "result.json"
    victim.write_text(victim.read_text().replace('"iteration_time_us"', '"iteration_time_us" ', 1))
    outcomes, _ = run(changed, out)
    assert [o.resumed for o in outcomes] == [True, False, False, False]


def test_a_record_for_other_inputs_does_not_count_and_a_rerun_that_fails_leaves_no_result(tmp_path):
    out = tmp_path / "out"
    one_point = {
        "axes": {"tp": {"path": "parallelism.tp", "values": [2]}},
        "derived": [],
        "tables": [],
        "figures": [],
    }
    good = plan_study(tiny_study(**one_point), tmp_path)
    run(good, out)
    run_dir = points_dir(out) / "tp=2"
    assert (run_dir / RECORD).is_file()
    # the same point name, now invalid (tp·pp·dp = 2·1·4 on 16 GPUs); tp=4 keeps the study valid
    two_points = {**one_point, "axes": {"tp": {"path": "parallelism.tp", "values": [2, 4]}}}
    bad = plan_study(tiny_study(**two_points, set={"parallelism.pp": 1}), tmp_path)
    outcome = run(bad, out)[0][0]
    assert outcome.point.name == "tp=2" and not outcome.ok and not outcome.resumed
    assert not (run_dir / "result.json").exists() and not (run_dir / RECORD).exists()


def test_cli_prints_where_the_results_are_and_exits_1_when_a_point_failed(tmp_path, capsys):
    import yaml

    (tmp_path / "study.yaml").write_text(yaml.safe_dump(tiny_study()))
    argv = ["study", str(tmp_path / "study.yaml"), "-o", str(tmp_path / "out"), "--quiet"]
    assert main(argv) == 1
    printed = capsys.readouterr().out
    assert "2 failed" in printed
    for name in ("results.csv", "report.md", "iteration.png"):
        assert str(tmp_path / "out" / name) in printed.replace("\n", "")
    assert main(argv) == 1
    assert "2 complete from an earlier run" in capsys.readouterr().out


def test_cli_rejects_a_bad_study_file_with_exit_2_and_writes_nothing(tmp_path, capsys):
    import yaml

    data = tiny_study()
    data["figures"][0]["y"] = ["iteration_ms"]
    (tmp_path / "study.yaml").write_text(yaml.safe_dump(data))
    assert main(["study", str(tmp_path / "study.yaml"), "-o", str(tmp_path / "out"), "--quiet"]) == 2
    assert "figures[0].y[0]" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_pinned_backends_and_astrasim_options_reach_their_points(tmp_path):
    from tests.astrasim.conftest import write_checking_binaries

    bin_dir = write_checking_binaries(tmp_path / "bin")  # fakes that check their inputs, print results
    data = tiny_study(
        axes={"simulator": [{"name": "packet-level"}, {"name": "flow", "backend": "embedded"}]},
        derived=[],
        tables=[],
        figures=[],
    )
    study = plan_study(data, tmp_path)
    outcomes, _ = run(study, tmp_path / "out", backend="ns3", options={"bin_dir": str(bin_dir)})
    assert all(o.ok for o in outcomes), [o.error for o in outcomes]
    table = rows(tmp_path / "out")
    assert [(r["simulator"], r["backend"]) for r in table] == [("packet-level", "ns3"), ("flow", "embedded")]
    results = [
        json.loads((points_dir(tmp_path / "out") / r["point"] / "result.json").read_text()) for r in table
    ]
    assert [r["backend"] for r in results] == ["ns3", "embedded"]
    # the ASTRA-sim options are inputs of the ns-3 point only
    ns3_point, embedded_point = resolve_backends(study, "ns3")
    assert inputs_digest(ns3_point, {"bin_dir": "a"}) != inputs_digest(ns3_point, {"bin_dir": "b"})
    assert inputs_digest(embedded_point, {"bin_dir": "a"}) == inputs_digest(embedded_point, {})


def test_cli_passes_docker_image_to_the_astrasim_backend(tmp_path, capsys):
    import yaml

    (tmp_path / "study.yaml").write_text(
        yaml.safe_dump(
            tiny_study(
                axes={"tp": {"path": "parallelism.tp", "values": [2]}}, derived=[], tables=[], figures=[]
            )
        )
    )
    argv = [
        "study",
        str(tmp_path / "study.yaml"),
        "-o",
        str(tmp_path / "out"),
        "--quiet",
        "--backend",
        "analytical-unaware",
        "--docker",
        "no-such-image:0",
    ]
    assert main(argv) == 1
    (row,) = rows(tmp_path / "out")
    assert row["status"] == "failed" and "Docker" in row["error"]


def test_ray_runs_the_points_as_tasks(tmp_path):
    ray = pytest.importorskip("ray", reason="ray is an optional extra (pip install 'astra-hetero[ray]')")
    context = ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        study = plan_study(tiny_study(), tmp_path)
        outcomes, _ = run(study, tmp_path / "out", ray_address=context.address_info["address"])
    finally:
        ray.shutdown()
    assert [o.ok for o in outcomes] == [True, False, True, False]
    assert [r["status"] for r in rows(tmp_path / "out")] == ["ok", "failed", "ok", "failed"]
