"""`astra-hetero plan` end to end: every printed plan passes the memory check, best.yaml runs
unchanged with the time the planner printed, bad input writes nothing and exits 2."""

from __future__ import annotations

import csv
import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from astra_hetero.cli.main import main
from astra_hetero.planner.dimensions import active_dimensions
from astra_hetero.spec import parse_spec
from astra_hetero.workload.generate import plan_workload
from tests.conftest import node_group
from tests.planner.specs import plan_data

REQUIRED_COLUMNS = {
    "iteration_time_us",
    "tokens_per_s",
    "tp",
    "pp",
    "dp",
    "micro_batch_size",
    "schedule",
    "mapping",
    "layers",
    "micro_batches",
    "memory_headroom_gib",
}


def write(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def plan(tmp_path: Path, data: dict, *extra: str) -> tuple[int, Path]:
    out = tmp_path / "out"
    code = main(
        ["plan", str(write(tmp_path, data)), "-o", str(out), "--jobs", "1", "--no-cache", "--quiet", *extra]
    )
    return code, out


def rows(out: Path) -> list[dict[str, str]]:
    with open(out / "plans.csv", newline="") as handle:
        return list(csv.DictReader(handle))


def row_spec(data: dict, row: dict[str, str]) -> dict[str, Any]:
    """The spec a plans.csv row describes, rebuilt from its columns alone."""
    spec = {k: v for k, v in data.items() if k != "search"}
    for dimension in active_dimensions():  # each option into its own section
        section = spec.setdefault(dimension.section, {})
        spec[dimension.section] = {**section, dimension.key: yaml.safe_load(row[dimension.field])}
    spec["parallelism"] = {
        **spec["parallelism"],
        "tp": int(row["tp"]),
        "pp": int(row["pp"]),
        "dp": int(row["dp"]),
        "cp": int(row["cp"]),
    }
    grid = None if row["mapping"] == "cluster order" else [s.split() for s in row["mapping"].split(" | ")]
    spec["mapping"] = {"grid": grid, "allow_idle_gpus": int(row["idle_gpus"]) > 0}
    spec["partition"] = {
        "layers": [int(x) for x in row["layers"].split()],
        "micro_batches": [int(x) for x in row["micro_batches"].split()],
    }
    return spec


def tight_memory() -> dict:
    """A100s with 3 GiB: some plans do not fit, so memory prunes part of the space."""
    data = plan_data(
        {
            "tp": [2, 4],
            "micro_batch_size": [1, 2],
            "schedule": ["1f1b", "gpipe"],
            "recompute": ["none", "full"],
            "sequence_parallel": False,
            "distributed_optimizer": False,
            "baseline": True,
            "refine_top": 2,
            "prices_per_gpu_hour": {"h100-sxm": 4.0, "a100-80": 1.5},
        }
    )
    data["cluster"]["node_groups"][1]["gpu"] = {"preset": "a100-80", "memory_gib": 3}
    return data


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("plan")
    data = tight_memory()
    code, out = plan(tmp_path, data)
    return code, out, data


def test_plan_writes_every_output(planned):
    code, out, _ = planned
    assert code == 0
    names = {p.name for p in out.iterdir()}
    assert {"best.yaml", "plans.csv", "report.md", "search.json"} <= names
    assert {"best_plans.png", "time_breakdown.png", "throughput_vs_gpus.png"} <= names
    assert REQUIRED_COLUMNS <= set(rows(out)[0])
    report = (out / "report.md").read_text()
    assert "Homogeneous-assumption baseline" in report and "best_plans.png" in report


def test_plans_are_listed_fastest_first_and_each_passes_the_memory_check(planned):
    _, out, data = planned
    listed = [r for r in rows(out) if r["status"] == "ok"]
    times = [float(r["iteration_time_us"]) for r in listed]
    assert times == sorted(times) and len(listed) > 1
    for row in listed:
        assert float(row["memory_headroom_gib"]) >= 0
        plan_workload(parse_spec(row_spec(data, row)))  # raises InfeasiblePlan if any cell overflows


def test_memory_prunes_part_of_the_space_and_the_counts_add_up(planned):
    _, out, _ = planned
    summary = json.loads((out / "search.json").read_text())
    space = summary["space"]
    assert space["pruned_by_reason"].get("memory", 0) > 0
    skipped = sum(space["pruned_by_key"].get(k, 0) for k in ("bound", "estimate", "budget"))
    assert space["feasible"] == space["simulated"] + skipped
    assert summary["speedup_vs_baseline"] >= 1.0
    cheapest = summary["cheapest_within_slowdown"]
    assert cheapest["cost_per_iteration"] <= summary["best"]["cost_per_iteration"]


def test_best_yaml_runs_unchanged_with_the_printed_time(planned, tmp_path):
    _, out, _ = planned
    run = tmp_path / "run"
    assert main(["run", str(out / "best.yaml"), "-o", str(run), "--quiet", "--timeline", "none"]) == 0
    result = json.loads((run / "result.json").read_text())
    assert result["iteration_time_us"] == pytest.approx(float(rows(out)[0]["iteration_time_us"]), abs=1e-3)


def slow_group_data(**search):
    data = plan_data(
        {
            "tp": 4,
            "micro_batch_size": 1,
            "schedule": "1f1b",
            "sequence_parallel": False,
            "recompute": "none",
            "distributed_optimizer": False,
            "use_all_gpus": False,
            **search,
        }
    )
    data["cluster"]["node_groups"].append(
        node_group(
            "slow",
            {"preset": "v100", "compute_multiplier": 0.1},
            count=1,
            gpus_per_node=4,
            fabric="nvlink2",
            nic=100,
        )
    )
    return data


def test_a_plan_may_leave_a_slow_node_group_idle(tmp_path):
    code, out = plan(tmp_path, slow_group_data())
    assert code == 0
    best = rows(out)[0]
    assert int(best["idle_gpus"]) >= 4 and "slow" not in best["mapping"]
    report = (out / "report.md").read_text().split("\n## ")[0]
    idle = int(best["idle_gpus"])
    assert f"**The best plan leaves {idle} of 12 GPUs idle**: {idle} of the 4 v100. Why: " in report
    assert report.index("leaves") < report.index("**Best plan**")  # the first thing report.md says
    run = tmp_path / "run"
    assert main(["run", str(out / "best.yaml"), "-o", str(run), "--quiet", "--timeline", "none"]) == 0
    result = json.loads((run / "result.json").read_text())
    assert sum(r["stage"] is None for r in result["ranks"]) == int(best["idle_gpus"])


@pytest.mark.slow
def test_the_report_says_why_against_the_fastest_plan_using_every_gpu(tmp_path):
    # exhaustive: plans using every GPU are simulated too, so the report can compare with them
    code, out = plan(tmp_path, slow_group_data(planner="exhaustive"))
    assert code == 0
    best = rows(out)[0]
    all_used = next(r for r in rows(out) if r["status"] == "ok" and int(r["idle_gpus"]) == 0)
    slower = float(all_used["iteration_time_us"]) / float(best["iteration_time_us"]) - 1
    report = (out / "report.md").read_text()
    assert f"takes {float(all_used['iteration_time_us']) / 1e3:,.3f} ms, {slower:.1%} longer" in report


def test_bad_search_settings_exit_2_and_write_nothing(tmp_path, capsys):
    code, out = plan(tmp_path, plan_data({"tp": "eight"}))
    assert code == 2 and not out.exists()
    assert "search.tp" in capsys.readouterr().err


def test_no_feasible_plan_exits_2_with_the_reasons(tmp_path, capsys):
    data = plan_data({"tp": 4})
    for group in data["cluster"]["node_groups"]:
        group["gpu"] = {"preset": group["gpu"], "memory_gib": 1}
    code, out = plan(tmp_path, data)
    assert code == 2 and not out.exists()
    assert "memory" in capsys.readouterr().err


def test_a_search_space_without_a_feasible_plan_exits_2_even_when_the_spec_has_its_own(tmp_path, capsys):
    # the spec's own plan (tp 2, pp 1, dp 4) runs, but it is not in the space asked for: no dp of 5
    # tiles 8 GPUs, so the answer is that the space holds no plan, not the spec's plan as best.yaml
    data = plan_data({"dp": [5]})
    data["parallelism"].update({"tp": 2, "pp": 1, "dp": 4, "micro_batch_size": 1})
    code, out = plan(tmp_path, data)
    assert code == 2 and not out.exists()
    err = capsys.readouterr().err
    assert err.startswith("error: search: the search space is empty")


@pytest.mark.skipif(importlib.util.find_spec("ray") is not None, reason="ray is installed here")
def test_ray_without_the_extra_says_how_to_install_it(tmp_path, capsys):
    code, out = plan(tmp_path, plan_data({"tp": 4}), "--ray", "auto")
    assert code == 1 and not out.exists()
    assert "pip install 'astra-hetero[ray]'" in capsys.readouterr().err
