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
