"""The plots are written as real, non-empty PNG files."""

from __future__ import annotations

from astra_hetero.results.plots import MAX_RANK_BARS, plot_rank_breakdown, write_plots
from tests.results.builders import homogeneous_result, mixed_result, pipeline_result

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def is_png(path) -> bool:
    data = path.read_bytes()
    return data.startswith(PNG_SIGNATURE) and len(data) > 1000


def test_two_runs_give_breakdowns_stage_times_and_iteration_times(tmp_path) -> None:
    paths = write_plots([("homo", homogeneous_result()), ("mixed/het", mixed_result())], tmp_path)
    assert sorted(p.name for p in paths) == [
        "iteration.png",
        "ranks-homo.png",
        "ranks-mixed_het.png",
        "stages.png",
    ]
    assert all(is_png(p) for p in paths)


def test_one_run_has_no_iteration_comparison(tmp_path) -> None:
    paths = write_plots([("mixed", mixed_result())], tmp_path)
    assert sorted(p.name for p in paths) == ["ranks-mixed.png", "stages.png"]


def test_many_ranks_are_plotted_as_stage_and_gpu_groups(tmp_path) -> None:
    result = pipeline_result(["h100-sxm", "h100-sxm", "a100-80", "a100-80"], [50.0, 50.0, 80.0, 80.0], dp=256)
    assert result.num_ranks > MAX_RANK_BARS
    assert is_png(plot_rank_breakdown(result, tmp_path / "ranks.png", "1024 ranks"))
