"""The `plan` transform: a study point whose plan the planner picks — the best plan, or the
homogeneous-assumption baseline of the same search — simulated on the real cluster.

Properties: the planner's plan is never slower than the baseline on the simulated cluster; each pick is
a complete spec that `astra-hetero run` accepts and whose simulation is the time the planner recorded;
one search serves every point of a cluster and is kept, so resuming searches nothing again.
"""

from __future__ import annotations

import copy
import csv
import json
from pathlib import Path

import pytest
import yaml

from astra_hetero.cli.main import main
from astra_hetero.errors import SpecError
from astra_hetero.results.io import read_result
from astra_hetero.spec import parse_spec
from astra_hetero.studies import build_table, load_study, plan_study, run_study, write_report
from astra_hetero.studies.planning import PICKS, planned_spec
from astra_hetero.studies.run import plans_dir, points_dir
from astra_hetero.studies.schema import PlanTransform
from tests.conftest import node_group
from tests.planner.specs import NARROW, plan_data

STUDIES = Path(__file__).parents[2] / "examples" / "studies"
# The narrow space of the planner tests (tp 2/4, one set of options): a search takes a few seconds.
SEARCH = {**NARROW, "refine_top": 1, "refine_rounds": 1, "max_simulations": 12, "baseline_simulations": 6}
LEVELS = {
    "two-types": [  # one H100 node, one A100 node (slower GPUs, half the NIC speed)
        node_group("h100", "h100-sxm", count=1, gpus_per_node=4),
        node_group("a100", "a100-80", count=1, gpus_per_node=4, fabric="nvlink3", nic=200),
    ],
    "pcie-l40s": [  # the A100 node replaced by a PCIe L40S node on 100 Gbit/s
        node_group("h100", "h100-sxm", count=1, gpus_per_node=4),
        node_group("l40s", "l40s", count=1, gpus_per_node=4, fabric="pcie4", nic=100),
    ],
}


def base_spec() -> dict:
    """8 GPUs, a 4-layer model, a complete written plan (TP2·PP2·DP2, layers split uniformly)."""
    data = plan_data()
    del data["search"]
    data["parallelism"] = {"tp": 2, "pp": 2, "dp": 2, "micro_batch_size": 1, "global_batch_size": 8}
    return data


def gains_study(search: dict | None = None) -> dict:
    search = {**SEARCH, **(search or {})}
    return {
        "name": "tiny-gains",
        "title": "Planner against the homogeneous-assumption plan on 8 GPUs",
        "base": base_spec(),
        "axes": {
            "plan": [
                {"name": "planner", "transform": {"kind": "plan", "pick": "best", "search": search}},
                {"name": "homogeneous", "transform": {"kind": "plan", "pick": "baseline", "search": search}},
            ],
            "level": [
                {"name": name, "set": {"cluster.node_groups": groups}} for name, groups in LEVELS.items()
            ],
        },
        "derived": [
            {
                "name": "speedup_over",
                "of": "iteration_time_us",
                "kind": "ratio",
                "relative_to": {"plan": "planner"},
            }
        ],
    }


def run(study, out, jobs=2):
    outcomes = run_study(study, out, jobs=jobs)
    write_report(build_table(study, outcomes), out)
    with open(out / "results.csv", newline="") as handle:
        return outcomes, {row["point"]: row for row in csv.DictReader(handle)}


def picks_files(out: Path) -> dict[str, float]:
    """Each search's picks.json, with the time it was last written."""
    return {str(p): p.stat().st_mtime_ns for p in plans_dir(out).glob(f"*/{PICKS}")}


@pytest.fixture(scope="module")
def gains(tmp_path_factory):
    out = tmp_path_factory.mktemp("gains") / "out"
    study = plan_study(gains_study(), out.parent)
    outcomes, rows = run(study, out)
    return study, out, outcomes, rows


def test_the_planners_plan_is_never_slower_than_the_homogeneous_assumption_plan(gains):
    study, out, outcomes, rows = gains
    assert all(o.ok for o in outcomes), [o.error for o in outcomes if not o.ok]
    for level in LEVELS:
        planner, baseline = rows[f"planner_{level}"], rows[f"homogeneous_{level}"]
        assert float(planner["iteration_time_us"]) <= float(baseline["iteration_time_us"])
        assert float(baseline["speedup_over"]) >= 1.0 and float(planner["speedup_over"]) == 1.0
    # a PCIe L40S node next to an H100 node: a planner blind to the difference loses time
    assert float(rows["homogeneous_pcie-l40s"]["speedup_over"]) > 1.05


def test_one_search_per_cluster_and_each_point_simulates_what_the_planner_recorded(gains):
    study, out, outcomes, rows = gains
    kept = sorted(plans_dir(out).glob(f"*/{PICKS}"))
    assert len(kept) == len(LEVELS)  # the two picks of a cluster share its search
    for path in kept:
        picks = json.loads(path.read_text())
        assert {"best.yaml", "plans.csv", "report.md", "search.json"} <= {
            p.name for p in path.parent.iterdir()
        }
        assert picks["speedup_vs_baseline"] >= 1.0
        for level in LEVELS:
            groups = {g["name"] for g in picks["picks"]["best"]["spec"]["cluster"]["node_groups"]}
            if groups == {g["name"] for g in LEVELS[level]}:
                break
        for plan, pick in (("planner", "best"), ("homogeneous", "baseline")):
            result = read_result(points_dir(out) / f"{plan}_{level}")
            assert result.iteration_time_us == pytest.approx(
                picks["picks"][pick]["iteration_time_us"], rel=1e-9
            )


def test_the_baseline_treats_every_gpu_as_the_most_common_one(gains):
    """Uniform layers over the cluster in order: what a planner that cannot tell GPUs apart does."""
    study, out, outcomes, rows = gains
    for level in LEVELS:
        spec = yaml.safe_load((points_dir(out) / f"homogeneous_{level}" / "spec.yaml").read_text())
        layers = spec["partition"]["layers"]
        assert max(layers) - min(layers) <= 1
        assert spec["mapping"]["grid"] is None  # the default mapping: node groups in cluster order


def test_a_pick_is_a_spec_that_astra_hetero_run_accepts(tmp_path):
    spec = parse_spec(base_spec() | {"cluster": {"node_groups": LEVELS["pcie-l40s"]}})
    transform = PlanTransform.model_validate({"kind": "plan", "pick": "best", "search": SEARCH})
    planned = planned_spec(spec, transform, tmp_path / "plans")
    assert planned.cluster == spec.cluster and planned.model == spec.model
    path = tmp_path / "best.yaml"
    path.write_text(yaml.safe_dump(planned.model_dump(mode="json")))
    assert main(["run", str(path), "-o", str(tmp_path / "run"), "--quiet"]) == 0
    picks = json.loads(next((tmp_path / "plans").glob(f"*/{PICKS}")).read_text())
    recorded = picks["picks"]["best"]["iteration_time_us"]
    assert read_result(tmp_path / "run").iteration_time_us == pytest.approx(recorded, rel=1e-9)


def test_resume_reruns_no_complete_point_and_no_search(gains, tmp_path):
    study, out, outcomes, rows = gains
    before = picks_files(out)
    again, again_rows = run(study, out)
    assert all(o.resumed for o in again) and again_rows.keys() == rows.keys()
    # a point that lost its result runs again, from the kept search: no picks.json is rewritten
    (points_dir(out) / "homogeneous_two-types" / "result.json").unlink()
    third, third_rows = run(study, out, jobs=1)
    assert [o.point.name for o in third if not o.resumed] == ["homogeneous_two-types"]
    assert picks_files(out) == before
    assert (
        third_rows["homogeneous_two-types"]["iteration_time_us"]
        == rows["homogeneous_two-types"]["iteration_time_us"]
    )
    # other search settings are another search
    changed = plan_study(gains_study({"max_simulations": 11}), out.parent)
    run(changed, out)
    assert len(picks_files(out)) == 2 * len(LEVELS)


def test_the_search_section_is_checked_when_the_study_is_loaded(tmp_path):
    bad = gains_study({"tp": [0]})
    with pytest.raises(SpecError) as error:
        plan_study(bad, tmp_path)
    assert error.value.field == "axes.plan[0].transform.search.tp[0]" and "greater than 0" in str(error.value)
    unknown = gains_study()
    unknown["axes"]["plan"][0]["transform"]["kind"] = "replan"
    with pytest.raises(SpecError) as error:
        plan_study(unknown, tmp_path)
    assert error.value.field == "axes.plan[0].transform" and "homogenize, plan" in str(error.value)
    no_baseline = gains_study({"baseline": False})
    with pytest.raises(SpecError) as error:
        plan_study(no_baseline, tmp_path)
    assert error.value.field == "axes.plan[1].transform.search"


def test_the_shipped_study_imports_study_2s_levels_and_models_unchanged():
    study = load_study(STUDIES / "planner_gains.yaml")
    levels = load_study(STUDIES / "heterogeneity_levels.yaml")
    for axis in ("model", "level"):
        assert study.file.axes[axis] == levels.file.axes[axis]
    assert study.file.base == levels.file.base
    assert [a.name for a in study.axes] == ["plan", "model", "level"]
    picks = {p.levels["plan"]: [t.pick for t in p.transforms] for p in study.points}
    assert picks == {"planner": ["best"], "homogeneous": ["baseline"], "uniform": []}
    reduced = load_study(STUDIES / "planner_gains.yaml", reduced=True)
    assert {p.levels["level"] for p in reduced.points} == {"H0", "H4"}
    # the reduced study narrows every search; what it does not name stays as the full study has it
    full_search = study.points[0].transforms[0].search
    for point in reduced.points:
        search = point.transforms[0].search
        assert search.tp == 8 and search.max_simulations == 6 and search.baseline_simulations == 3
        assert search.mapping == full_search.mapping and search.layers == full_search.layers


def test_the_reduced_search_is_checked(tmp_path):
    data = gains_study() | {"reduced": {"description": "less", "search": {"max_simulations": 0}}}
    for reduced in (False, True):  # checked with the file, whether or not the reduced study is run
        with pytest.raises(SpecError) as error:
            plan_study(data, tmp_path, reduced=reduced)
        assert error.value.field == "reduced.search.max_simulations"
    data["axes"]["plan"], data["derived"] = [{"name": "written"}], []
    with pytest.raises(SpecError) as error:
        plan_study(data, tmp_path)
    assert error.value.field == "reduced.search" and "no `plan` transform" in str(error.value)


def test_an_imported_axis_names_what_is_wrong(tmp_path):
    other = tmp_path / "other.yaml"
    other.write_text(yaml.safe_dump({"axes": {"level": [{"name": "a"}]}}))
    data = gains_study()
    for axis, field in (
        ({"from": "other.yaml", "axis": "nope"}, "axes.level.axis"),
        ({"from": "missing.yaml"}, "axes.level.from"),
        ({"from": "other.yaml", "extra": 1}, "axes.level.extra"),
    ):
        broken = copy.deepcopy(data)
        broken["axes"]["level"] = axis
        with pytest.raises(SpecError) as error:
            plan_study(broken, tmp_path)
        assert error.value.field == field
    data["axes"]["level"] = {"from": "other.yaml"}
    assert [p.levels["level"] for p in plan_study(data, tmp_path).points] == ["a", "a"]


def test_each_row_says_which_plan_ran_and_its_throughput(gains):
    study, out, outcomes, rows = gains
    for name, row in rows.items():
        spec = yaml.safe_load((points_dir(out) / name / "spec.yaml").read_text())
        parallelism = spec["parallelism"]
        for key in ("tp", "pp", "dp", "micro_batch_size"):
            assert float(row[f"plan_{key}"]) == parallelism[key]
        assert float(row["gpus_used"]) == 8  # the search uses every GPU by default
        tokens = parallelism["global_batch_size"] * spec["model"]["seq_len"]
        assert float(row["tokens_per_s"]) * float(row["iteration_time_us"]) * 1e-6 == pytest.approx(tokens)
