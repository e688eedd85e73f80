"""The experiments list (examples/experiments.yaml) and `study --check`: every listed number names a real
point and column; the reduced studies, run on the embedded backend, give the listed numbers; a number
outside its tolerance fails the check with exit 1; a bad list is refused with exit 2 before anything runs."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from astra_hetero.cli.main import main
from astra_hetero.studies.expectations import (
    Expected,
    check_values,
    experiment_for,
    for_backend,
    load_experiments,
)
from astra_hetero.studies.plan import load_study

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
LIST = EXAMPLES / "experiments.yaml"


def test_the_list_names_e1_to_e4_each_with_a_study_a_command_and_a_runtime():
    experiments = load_experiments(LIST)
    by_id = {e.id: e for e in experiments.experiments}
    assert {"E1", "E2", "E3", "E4"} <= set(by_id)
    for experiment in experiments.experiments:
        assert experiment.runtime_s or experiment.runtime_note, experiment.id  # measured, or why not
        assert experiment.command.startswith(("astra-hetero", "python"))
        if experiment.study:
            assert (LIST.parent / experiment.study).is_file()
            assert experiment_for(experiments, LIST, LIST.parent / experiment.study) is experiment
    assert by_id["E4"].backend == "ns3"


@pytest.mark.parametrize("reduced", [False, True], ids=["full", "reduced"])
def test_every_expected_number_names_a_point_of_its_study_and_a_column_it_has(reduced):
    experiments = load_experiments(LIST)
    for experiment in experiments.experiments:
        variant = experiment.reduced if reduced else experiment
        if not experiment.study or variant is None:
            continue
        study = load_study(LIST.parent / experiment.study, reduced=reduced)
        names = {p.name for p in study.points}
        derived = {d.name for d in study.file.derived}
        for item in variant.expected:
            assert item.point in names, (experiment.id, item.point)
            assert item.column in derived or item.column in {"iteration_time_us"}, (
                experiment.id,
                item.column,
            )


def test_a_number_passes_within_the_larger_of_its_tolerances():
    item = Expected(point="p", column="c", value=100.0, rel_tol=0.02, abs_tol=3.0)
    assert item.passes(103.0) and item.passes(97.0)
    assert not item.passes(103.01)
    relative = Expected(point="p", column="c", value=-50.0, rel_tol=0.1)
    assert relative.passes(-45.0) and not relative.passes(-44.9)


def test_a_number_without_a_tolerance_is_refused():
    with pytest.raises(ValueError, match="rel_tol or abs_tol"):
        Expected(point="p", column="c", value=1.0)


def test_missing_points_columns_and_failed_points_fail_with_the_reason():
    items = [Expected(point=p, column="x", value=1.0, rel_tol=0.1) for p in ("ok", "failed", "absent")]
    checks = check_values(items, {("ok", "x"): 1.05, ("failed", "x"): None})
    assert [c.ok for c in checks] == [True, False, False]
    assert "failed" in checks[1].why and "no such point" in checks[2].why


def test_numbers_naming_another_backend_hold_only_for_that_backend():
    experiments = load_experiments(LIST)
    e4 = next(e for e in experiments.experiments if e.id == "E4")
    assert e4.reduced is not None
    embedded = for_backend(e4, e4.reduced, "embedded")
    assert embedded and all(item.backend == "embedded" for item in embedded)


def run_checked(study: str, out: Path, *extra: str) -> int:
    argv = ["study", str(EXAMPLES / "studies" / study), "-o", str(out), "--reduced", "--quiet"]
    return main([*argv, "--backend", "embedded", *extra])


def test_e1_reduced_on_the_embedded_backend_passes_its_check_and_a_wrong_number_fails(tmp_path, capsys):
    assert run_checked("heterogeneity_impact.yaml", tmp_path / "e1", "--check") == 0
    printed = capsys.readouterr().out
    assert "check E1 (reduced, embedded)" in printed and "FAIL" not in printed
    assert printed.count("PASS") == len(load_experiments(LIST).experiments[0].reduced.expected)

    wrong = yaml.safe_load(LIST.read_text())
    e1 = next(e for e in wrong["experiments"] if e["id"] == "E1")
    e1["study"] = str(EXAMPLES / "studies/heterogeneity_impact.yaml")
    e1["reduced"]["expected"][1]["value"] *= 1.5
    wrong["experiments"] = [e1]
    (tmp_path / "wrong.yaml").write_text(yaml.safe_dump(wrong))
    # the finished study is not run again; only the check differs
    assert (
        run_checked("heterogeneity_impact.yaml", tmp_path / "e1", "--check", str(tmp_path / "wrong.yaml"))
        == 1
    )
    printed = capsys.readouterr().out
    assert "complete from an earlier run" in printed
    assert printed.count("FAIL") == 1 and "v100_by-stage slowdown_pct" in printed


def test_e4_reduced_on_the_embedded_backend_passes_its_check(tmp_path, capsys):
    assert run_checked("packet_fidelity.yaml", tmp_path / "e4", "--check") == 0
    assert "FAIL" not in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.parametrize("study", ["heterogeneity_levels.yaml", "planner_gains.yaml"], ids=["E2", "E3"])
def test_e2_and_e3_reduced_on_the_embedded_backend_pass_their_checks(tmp_path, capsys, study):
    assert run_checked(study, tmp_path / "out", "--check") == 0
    assert "FAIL" not in capsys.readouterr().out


def test_a_bad_list_is_refused_with_exit_2_before_any_point_runs(tmp_path, capsys):
    (tmp_path / "bad.yaml").write_text("format: astra-hetero/experiments@1\nexperiments: [{id: E1}]\n")
    assert (
        run_checked("heterogeneity_impact.yaml", tmp_path / "out", "--check", str(tmp_path / "bad.yaml")) == 2
    )
    assert "experiments.0" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_study_the_list_does_not_name_is_refused(tmp_path, capsys):
    (tmp_path / "studies").mkdir()
    (tmp_path / "experiments.yaml").write_text(LIST.read_text())
    # E1's study under another path: the list (found one directory up) names no such study
    other = tmp_path / "studies/other.yaml"
    other.write_text((EXAMPLES / "studies/heterogeneity_impact.yaml").read_text())
    argv = ["study", str(other), "-o", str(tmp_path / "out"), "--reduced", "--check", "--quiet"]
    assert main(argv) == 2
    assert "no experiment names the study" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
