"""Every study in examples/studies/ runs end to end (its reduced version, on the embedded backend):
results.csv, report.md and its figures, and numbers that tell the story the study is about."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import yaml

from astra_hetero import pipeline
from astra_hetero.cli.main import main
from astra_hetero.spec import load_spec
from astra_hetero.spec.schema import ScopeSpec
from astra_hetero.studies.figures import DPI
from astra_hetero.studies.plan import load_study

EXAMPLES = Path(__file__).parents[2] / "examples"
STUDIES = EXAMPLES / "studies"
SHIPPED = sorted(p.stem for p in STUDIES.glob("*.yaml"))


def run_reduced(name: str, out: Path) -> dict[str, dict[str, str]]:
    """Run the reduced study through the CLI; check its files; return results.csv rows by point."""
    assert (
        main(
            [
                "study",
                str(STUDIES / f"{name}.yaml"),
                "-o",
                str(out),
                "--reduced",
                "--backend",
                "embedded",
                "--jobs",
                "2",
                "--quiet",
            ]
        )
        == 0
    )
    with open(out / "results.csv", newline="") as handle:
        rows = {row["point"]: row for row in csv.DictReader(handle)}
    study = load_study(STUDIES / f"{name}.yaml", reduced=True)
    assert list(rows) == [p.name for p in study.points]
    assert all(row["status"] == "ok" and row["backend"] == "embedded" for row in rows.values())
    report = (out / "report.md").read_text()
    assert report.startswith(f"# {study.file.title}")
    for figure in study.file.figures:
        assert f"![{figure.title}]({figure.name}.png)" in report
        check_png(out / f"{figure.name}.png")
    return rows


def check_png(path: Path) -> None:
    from matplotlib.image import imread

    image = imread(path)
    height, width = image.shape[:2]
    assert height == round(4.6 * DPI) and 2.5 * DPI <= width <= 16 * DPI
    drawn = (image[..., :3].min(axis=2) < 0.9).mean()
    assert 0.02 < drawn < 0.9


def value(rows, point: str, column: str) -> float:
    return float(rows[point][column])


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    return tmp_path_factory.mktemp("studies")


def test_every_shipped_study_has_a_reduced_version_and_validates():
    assert SHIPPED == [
        "heterogeneity_impact",
        "heterogeneity_levels",
        "packet_fidelity",
        "planner_gains",
        "shared_cluster",
    ]
    for name in SHIPPED:
        full, reduced = (
            load_study(STUDIES / f"{name}.yaml"),
            load_study(STUDIES / f"{name}.yaml", reduced=True),
        )
        cheaper = (
            0 < len(reduced.points) < len(full.points)
            or reduced.points[0].spec_data != full.points[0].spec_data
        )
        assert cheaper  # fewer points, or each one cut down (a scope, fewer layers)


def test_heterogeneity_impact(outputs):
    rows = run_reduced("heterogeneity_impact", outputs / "impact")
    for placement in ("by-stage", "by-replica"):
        assert value(rows, f"homogeneous_{placement}", "slowdown_pct") == 0
        for mix in ("v100", "l40s", "nic100"):
            assert value(rows, f"{mix}_{placement}", "slowdown_pct") > 5  # every mix costs time
        # slower NICs change communication only; slower GPUs add compute and the bubbles it causes
        assert value(rows, f"nic100_{placement}", "compute_change_us") == 0
        assert value(rows, f"nic100_{placement}", "exposed_comm_change_us") > 0
        assert value(rows, f"v100_{placement}", "compute_change_us") > 0
        assert value(rows, f"v100_{placement}", "idle_change_us") > 0


def test_heterogeneity_levels(outputs):
    rows = run_reduced("heterogeneity_levels", outputs / "levels")
    # H0 of GPT-3 175B is the homogeneous example, run as it is (with the reduced study's scope)
    study = load_study(STUDIES / "heterogeneity_levels.yaml", reduced=True)
    scope = study.file.reduced.set["scope"]
    example = load_spec(EXAMPLES / "gpt3_175b_128gpu_h100.yaml").model_copy(
        update={"scope": ScopeSpec(**scope)}
    )
    run_dir = pipeline.build_run_dir(example, outputs / "example").root
    direct = pipeline.execute(run_dir, timeline="none").iteration_time_us
    assert value(rows, "gpt3-175b_H0_heterogeneous", "iteration_time_us") == pytest.approx(direct, abs=1e-3)
    for model in ("gpt3-175b", "llama-65b"):
        for prediction in ("most-common", "average"):
            assert value(rows, f"{model}_H0_{prediction}", "homogeneity_error_pct") == 0
            for level in ("H2", "H4"):
                # a mixed cluster of slower devices: the homogeneous simulator is optimistic, never exact
                assert value(rows, f"{model}_{level}_{prediction}", "homogeneity_error_pct") < -5
        times = [
            value(rows, f"{model}_{level}_heterogeneous", "iteration_time_us") for level in ("H0", "H2", "H4")
        ]
        assert times == sorted(times)


def test_packet_fidelity_on_the_embedded_backend(outputs):
    rows = run_reduced("packet_fidelity", outputs / "fidelity")
    data = yaml.safe_load((STUDIES / "packet_fidelity.yaml").read_text())
    assert data["backend"] == "ns3"  # the study's own backend; CI overrides it
    for cluster in ("8gpu", "16gpu-shared-nic"):
        # both sides embedded here: the ideal flow model is the reference exactly; ns-3's packets cost
        # these NIC-bound runs at most 1000 B per 22 ns of 20 at 400 Gbit/s (10 %) plus ACK round trips,
        # and throttled step-down links only add to that
        assert value(rows, f"{cluster}_flow-ideal", "flow_vs_packet_pct") == 0
        packets = value(rows, f"{cluster}_flow-packets", "flow_vs_packet_pct")
        assert 0 < packets < 15
        assert value(rows, f"{cluster}_flow-calibrated", "flow_vs_packet_pct") > packets


def test_planner_gains(outputs):
    rows = run_reduced("planner_gains", outputs / "gains")
    for level in ("H0", "H4"):
        planner = value(rows, f"planner_llama-65b_{level}", "iteration_time_us")
        assert value(rows, f"planner_llama-65b_{level}", "speedup_over") == 1
        assert value(rows, f"homogeneous_llama-65b_{level}", "iteration_time_us") >= planner
    # all GPUs alike: knowing them apart gains at most what finer layer splits give
    assert value(rows, "homogeneous_llama-65b_H0", "speedup_over") < 1.1
    # a third of the GPUs are PCIe L40S: a planner blind to that loads them as much as the H100s
    assert value(rows, "homogeneous_llama-65b_H4", "speedup_over") > 1.2
    assert len(list((outputs / "gains" / "plans").glob("*/picks.json"))) == 2  # one search per level


def test_shared_cluster(outputs):
    rows = run_reduced("shared_cluster", outputs / "shared")
    for plan in ("as-written", "planned-alone", "planned-beside"):
        # on leaves of their own the jobs never meet; job c's A100 rack never meets anyone
        assert value(rows, f"{plan}_own-leaf", "job_b_slowdown") == 1
        assert value(rows, f"{plan}_own-leaf", "job_a_slowdown") == 1
        for placement in ("own-leaf", "shared-leaves"):
            assert value(rows, f"{plan}_{placement}", "job_c_slowdown") == 1
    # on shared leaves the data-parallel plans slow both jobs; the planner that simulates the
    # neighbours picks a pipeline instead, faster beside them than the plan picked alone
    alone, beside = "planned-alone_shared-leaves", "planned-beside_shared-leaves"
    assert value(rows, "as-written_shared-leaves", "job_b_slowdown") > 1.1
    assert (value(rows, alone, "job_b_pp"), value(rows, alone, "job_b_dp")) == (1, 2)
    assert (value(rows, beside, "job_b_pp"), value(rows, beside, "job_b_dp")) == (2, 1)
    assert value(rows, beside, "job_b_iteration_time_us") < value(rows, alone, "job_b_iteration_time_us")
    assert value(rows, alone, "job_b_alone_us") < value(rows, beside, "job_b_alone_us")  # alone, dp wins
    assert value(rows, beside, "job_a_slowdown") < value(rows, alone, "job_a_slowdown")
