"""Study files → points: the product of the axes in file order, overrides in order, pinned backends,
the reduced version, and errors that name the field for every reference that does not resolve."""

from __future__ import annotations

import copy

import pytest
import yaml

from astra_hetero.errors import SpecError
from astra_hetero.studies.plan import load_study, plan_study
from astra_hetero.studies.schema import HomogenizeTransform
from tests.conftest import make_spec_data


def study_data(**extra):
    data = {
        "name": "tiny",
        "title": "a tiny study",
        "base": make_spec_data(),
        "axes": {
            "a100_gpu": [
                {"name": "a100", "description": "as in the base"},
                {
                    "name": "v100",
                    "set": {
                        "cluster.node_groups[1].gpu": "v100",
                        "cluster.node_groups[1].intra_node_fabric": "nvlink2",
                    },
                },
            ],
            "nic_gbps": {"path": "cluster.node_groups[1].nic.gbps", "values": [100, 200.0]},
            "prediction": [
                {"name": "ours"},
                {"name": "homogeneous", "transform": {"kind": "homogenize", "device": "most_common"}},
            ],
        },
        "derived": [{"name": "error_pct", "of": "iteration_time_us", "relative_to": {"prediction": "ours"}}],
        "figures": [
            {
                "name": "error",
                "title": "error",
                "kind": "bar",
                "x": "nic_gbps",
                "y": ["error_pct"],
                "series": "prediction",
                "panels": "a100_gpu",
            }
        ],
    }
    data.update(extra)
    return data


def plan(data, tmp_path, reduced=False):
    return plan_study(data, tmp_path, reduced)


def test_points_are_the_product_of_the_axes_in_file_order(tmp_path):
    study = plan(study_data(), tmp_path)
    assert [p.name for p in study.points] == [
        "a100_nic_gbps=100_ours",
        "a100_nic_gbps=100_homogeneous",
        "a100_nic_gbps=200_ours",
        "a100_nic_gbps=200_homogeneous",
        "v100_nic_gbps=100_ours",
        "v100_nic_gbps=100_homogeneous",
        "v100_nic_gbps=200_ours",
        "v100_nic_gbps=200_homogeneous",
    ]
    point = study.points[6]
    assert point.levels == {"a100_gpu": "v100", "nic_gbps": "200", "prediction": "ours"}
    spec = point.spec()
    assert (spec.cluster.node_groups[1].gpu.preset, spec.cluster.node_groups[1].nic.gbps) == ("v100", 200)
    assert spec.cluster.node_groups[0].gpu.preset == "h100-sxm"
    assert study.points[7].transforms == (HomogenizeTransform(kind="homogenize", device="most_common"),)
    assert study.axis("nic_gbps").numeric and not study.axis("a100_gpu").numeric


def test_overrides_apply_in_order_study_set_then_axes_then_reduced(tmp_path):
    data = study_data(
        set={"cluster.node_groups[1].nic.gbps": 50, "parallelism.global_batch_size": 32},
        reduced={
            "description": "one NIC speed, a cut-down iteration",
            "set": {"scope": {"layers_per_stage": 1}},
            "axes": {"nic_gbps": [200]},
        },
    )
    full = plan(data, tmp_path)
    assert all(p.spec().parallelism.global_batch_size == 32 for p in full.points)
    ours = [p for p in full.points if p.levels["prediction"] == "ours"]
    assert {p.spec().cluster.node_groups[1].nic.gbps for p in ours} == {100, 200}  # the axis wins
    assert all(p.spec().scope is None for p in full.points)
    reduced = plan(data, tmp_path, reduced=True)
    assert len(reduced.points) == 4 and reduced.axis("nic_gbps").labels == ("200",)
    assert all(p.spec().scope.layers_per_stage == 1 for p in reduced.points)


def test_a_variant_may_pin_a_backend_and_two_pins_on_one_point_must_agree(tmp_path):
    data = study_data()
    data["axes"]["simulator"] = [{"name": "packet", "backend": "ns3"}, {"name": "flow"}]
    data["figures"][0]["where"] = {"simulator": "flow"}
    study = plan(data, tmp_path)
    assert {p.levels["simulator"]: p.backend for p in study.points} == {"packet": "ns3", "flow": None}
    data["axes"]["prediction"][1]["backend"] = "embedded"
    with pytest.raises(SpecError) as error:
        plan(data, tmp_path)
    assert "pin different backends" in error.value.reason


def test_study_file_is_read_relative_to_its_directory(tmp_path):
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs/base.yaml").write_text(yaml.safe_dump(make_spec_data()))
    (tmp_path / "study.yaml").write_text(yaml.safe_dump(study_data(base="specs/base.yaml")))
    assert len(load_study(tmp_path / "study.yaml").points) == 8


def broken(path: str, value):
    """study_data() with the value at a dotted path (list indices as ints) replaced."""
    data = copy.deepcopy(study_data())
    *parents, last = [int(p) if p.isdigit() else p for p in path.split(".")]
    node = data
    for part in parents:
        node = node[part]
    node[last] = value
    return data


@pytest.mark.parametrize(
    ("data", "field", "words"),
    [
        (broken("figures.0.x", "gpu"), "figures[0].x", "no axis 'gpu'"),
        (broken("figures.0.y", ["iteration_ms"]), "figures[0].y[0]", "no column 'iteration_ms'"),
        (broken("figures.0.y", ["error_pct", "iteration_time_us"]), "figures[0].y", "different units"),
        (broken("figures.0.series", None), "figures[0]", "axis 'prediction' has 2 values"),
        (broken("figures.0.where", {"prediction": "average"}), "figures[0].where.prediction", "not a value"),
        (broken("figures.0.kind", "pie"), "figures[0].kind", ""),
        # a file name the OS would refuse (an OSError after the points had run, before)
        (broken("figures.0.name", "x" * 300), "figures[0].name", "at most 100 characters"),
        (
            broken("derived.0.relative_to", {"prediction": "best"}),
            "derived[0].relative_to.prediction",
            "not a value",
        ),
        (broken("derived.0.of", "speed"), "derived[0].of", "no column"),
        (
            broken("axes.nic_gbps.path", "cluster.node_groups[5].nic.gbps"),
            "axes.nic_gbps.path.cluster.node_groups[5].nic.gbps",
            "no item [5]",
        ),
        (
            broken("axes.a100_gpu.1.set", {"cluster.node_groups[1].gpu.colour": "red"}),
            "axes.a100_gpu[1].set.cluster.node_groups[1].gpu.colour",
            "no field 'colour'",
        ),
        (broken("axes.a100_gpu.1.backend", "gem5"), "axes.a100_gpu[1].backend", "unknown backend"),
        (
            broken("axes.prediction.1.transform", {"kind": "homogenize", "device": "median"}),
            "axes.prediction[1].transform.device",
            "",
        ),
        (broken("axes.prediction.1.colour", "red"), "axes.prediction[1].colour", "unknown field"),
        (broken("axes.a100_gpu.1.name", "a100"), "axes.a100_gpu", "repeated: a100"),
        (
            broken("tables", [{"title": "t", "rows": ["a100_gpu"], "values": ["iteration_time_us"]}]),
            "tables[0]",
            "axis 'nic_gbps' has 2 values",
        ),
    ],
)
def test_errors_name_the_field(tmp_path, data, field, words):
    with pytest.raises(SpecError) as error:
        plan(data, tmp_path)
    assert error.value.field.startswith(field), error.value
    assert words in error.value.reason


def test_an_axis_may_not_take_the_name_of_a_column(tmp_path):
    data = study_data()
    data["axes"]["backend"] = data["axes"].pop("nic_gbps")
    with pytest.raises(SpecError) as error:
        plan(data, tmp_path)
    assert error.value.field == "axes.backend"


def test_reduced_version_must_exist_and_keep_what_derived_columns_compare_against(tmp_path):
    with pytest.raises(SpecError) as error:
        plan(study_data(), tmp_path, reduced=True)
    assert error.value.field == "reduced"
    data = study_data(reduced={"description": "d", "axes": {"prediction": ["homogeneous"]}})
    with pytest.raises(SpecError) as error:
        plan(data, tmp_path, reduced=True)
    assert error.value.field == "reduced.axes.prediction" and "error_pct" in error.value.reason


@pytest.mark.parametrize(
    ("reduced", "field", "words"),
    [
        ({"description": "d", "axes": {"speed": [1]}}, "reduced.axes.speed", "no such axis"),
        ({"description": "d", "axes": {"nic_gbps": [50]}}, "reduced.axes.nic_gbps[0]", "not a value"),
        (
            {"description": "d", "axes": {"prediction": ["homogeneous"]}},
            "reduced.axes.prediction",
            "error_pct",
        ),
        ({"description": "d", "set": {"scope.depth": 1}}, "reduced.set.scope.depth", ""),
        ({"description": "d", "set": {"parallelism.tp": 0}}, "reduced.set.parallelism.tp", "greater than"),
    ],
)
def test_the_reduced_version_is_checked_when_the_file_loads_not_only_under_reduced(
    tmp_path, reduced, field, words
):
    with pytest.raises(SpecError) as error:
        plan(study_data(reduced=reduced), tmp_path)  # the full study: --reduced not given
    assert error.value.field == field and words in error.value.reason


@pytest.mark.parametrize(
    ("where", "field"),
    [
        ({"set": {"parallelism.tp": 0}}, "set.parallelism.tp"),
        ({"set": {"parallelism.micro_batch_size": -1}}, "set.parallelism.micro_batch_size"),
        ({"axes.a100_gpu.1.set": {"parallelism.pp": 0}}, "axes.a100_gpu[1].set.parallelism.pp"),
        ({"axes.nic_gbps.values": [100, -5]}, "axes.nic_gbps.values[1]"),
    ],
)
def test_an_override_that_can_never_be_valid_is_an_input_error_before_any_point_runs(tmp_path, where, field):
    ((key, value),) = where.items()
    data = broken(key, value) if "." in key else study_data(**{key: value})
    with pytest.raises(SpecError) as error:
        plan(data, tmp_path)
    assert error.value.field == field, error.value


def test_a_study_whose_every_point_is_invalid_is_refused_naming_the_reason(tmp_path):
    # dp 5 is a valid number but no point of this study has 5 × tp × pp GPUs
    with pytest.raises(SpecError) as error:
        plan(study_data(set={"parallelism.dp": 5}), tmp_path)
    assert "every one of the study's 8 points" in error.value.reason and "parallelism" in error.value.field


def test_a_study_some_of_whose_points_are_invalid_still_runs_the_others(tmp_path):
    data = study_data()
    data["axes"]["nic_gbps"]["values"] = [100, 200]
    data["axes"]["dp"] = {"path": "parallelism.dp", "values": [4, 5]}  # dp 5 fits no point
    data["figures"] = []
    assert len(plan(data, tmp_path).points) == 16


def test_a_study_past_max_points_is_refused_naming_its_axes_and_count(tmp_path):
    data = study_data()
    data["axes"]["nic_gbps"]["values"] = list(range(1, 10_001))
    data["axes"]["seed"] = {"path": "iterations", "values": list(range(1, 10_001))}
    with pytest.raises(SpecError) as error:
        plan_study(data, tmp_path, max_points=1000)
    reason = error.value.reason
    assert error.value.field == "axes"
    assert "400,000,000 points" in reason
    assert "a100_gpu (2) × nic_gbps (10,000) × prediction (2) × seed (10,000)" in reason
    assert "--max-points 1,000" in reason


def test_study_cli_refuses_a_huge_study_up_front_with_exit_2(tmp_path, capsys):
    from astra_hetero.cli.main import main

    data = study_data()
    data["axes"]["nic_gbps"]["values"] = list(range(1, 101))
    (tmp_path / "study.yaml").write_text(yaml.safe_dump(data))
    argv = ["study", str(tmp_path / "study.yaml"), "-o", str(tmp_path / "out"), "--max-points", "50"]
    assert main(argv) == 2
    assert "400 points (a100_gpu (2) × nic_gbps (100) × prediction (2))" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
