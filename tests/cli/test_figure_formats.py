"""`--figure-format png|svg|pdf`: every command that draws writes its figures in the format asked,
under the same names, and report.md shows (or, a PDF, links) them."""

from __future__ import annotations

import pytest
import yaml

from astra_hetero.cli.main import main
from astra_hetero.results.io import write_result
from tests.conftest import make_spec_data
from tests.results.builders import homogeneous_result, mixed_result

MAGIC = {"png": b"\x89PNG", "svg": b"<?xml", "pdf": b"%PDF"}


@pytest.mark.parametrize("fmt", ["svg", "pdf"])
def test_report_writes_its_plots_in_the_format_asked(tmp_path, fmt):
    write_result(tmp_path / "homo", homogeneous_result())
    write_result(tmp_path / "mixed", mixed_result())
    out = tmp_path / "out"
    argv = ["report", str(tmp_path / "homo"), str(tmp_path / "mixed"), "-o", str(out), "--figure-format", fmt]
    assert main(argv) == 0
    for name in ("stages", "iteration", "ranks-homo", "ranks-mixed"):
        assert (out / f"{name}.{fmt}").read_bytes()[:5].startswith(MAGIC[fmt])
    assert not list(out.glob("*.png"))
    markdown = (out / "report.md").read_text()
    shown = f"[stages.{fmt} (PDF)](stages.{fmt})" if fmt == "pdf" else f"![stages.{fmt}](stages.{fmt})"
    assert shown in markdown


def test_topology_draws_the_cluster_as_a_vector_drawing(tmp_path, capsys):
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(make_spec_data()))
    run = tmp_path / "run"
    argv = ["topology", str(tmp_path / "spec.yaml"), "-o", str(run), "--draw", "--figure-format", "svg"]
    assert main(argv) == 0
    assert (run / "topology.svg").read_bytes()[:5] == MAGIC["svg"] and not (run / "topology.png").exists()
    assert f"wrote {run / 'topology.svg'}" in capsys.readouterr().out
    # drawn again as PNG: the run directory keeps one drawing part, replaced whole
    assert main([*argv[:-1], "png"]) == 0
    assert (run / "topology.png").is_file() and not (run / "topology.svg").exists()


def test_plan_figures_take_the_format_from_their_names(tmp_path):
    from astra_hetero.planner.plots import plot_best_plans
    from tests.planner.test_plots import LONG, row

    path = plot_best_plans([row(1, "search", LONG)], tmp_path / "best_plans.pdf")
    assert path.read_bytes()[:4] == MAGIC["pdf"]


def test_an_unknown_figure_format_is_a_usage_error(tmp_path, capsys):
    assert main(["report", str(tmp_path), "--figure-format", "jpg"]) == 2
    assert "invalid choice: 'jpg'" in capsys.readouterr().err
