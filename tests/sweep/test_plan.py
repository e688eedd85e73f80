"""Sweep files → points: grids are full products, paths address the validated spec, typos are named."""

from __future__ import annotations

import pytest
import yaml

from astra_hetero.errors import SpecError
from astra_hetero.spec import parse_spec
from astra_hetero.sweep.plan import load_sweep, parse_path, plan_sweep, set_path
from tests.conftest import make_spec_data


def test_grid_is_the_full_product_in_file_order(tmp_path):
    sweep = plan_sweep(
        {
            "base": make_spec_data(),
            "grid": {
                "cluster.node_groups[1].nic.gbps": [100, 200, 400],
                "partition.layers": ["uniform", "auto"],
            },
        },
        tmp_path,
    )
    assert len(sweep.points) == 6
    assert sweep.override_keys == ("cluster.node_groups[1].nic.gbps", "partition.layers")
    speeds = [p.overrides["cluster.node_groups[1].nic.gbps"] for p in sweep.points]
    assert speeds == [100, 100, 200, 200, 400, 400]
    assert len({p.name for p in sweep.points}) == 6
    assert sweep.points[0].name == "000-nic.gbps=100_partition.layers=uniform"
    for point in sweep.points:
        spec = parse_spec(point.spec_data)
        assert spec.cluster.node_groups[1].nic.gbps == point.overrides["cluster.node_groups[1].nic.gbps"]
        assert spec.cluster.node_groups[0].nic.gbps == 400  # only the named group changes
        assert spec.partition.layers == point.overrides["partition.layers"]


def test_paths_reach_fields_the_base_wrote_as_shorthand(tmp_path):
    base = make_spec_data()
    assert base["cluster"]["node_groups"][1]["nic"] == 200  # a bare number in the base spec
    (point,) = plan_sweep(
        {
            "base": base,
            "variants": [{"name": "slow", "set": {"cluster.node_groups[1].gpu.compute_multiplier": 0.5}}],
        },
        tmp_path,
    ).points
    assert point.name == "000-slow"
    assert parse_spec(point.spec_data).cluster.node_groups[1].gpu.compute_multiplier == 0.5


def test_base_spec_file_is_read_relative_to_the_sweep_file(tmp_path):
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs/base.yaml").write_text(yaml.safe_dump(make_spec_data()))
    (tmp_path / "sweep.yaml").write_text(
        yaml.safe_dump(
            {
                "base": "specs/base.yaml",
                "backend": "analytical",
                "timeout_s": 60,
                "grid": {"parallelism.dp": [4]},
            }
        )
    )
    sweep = load_sweep(tmp_path / "sweep.yaml")
    assert (sweep.backend, sweep.timeout_s, len(sweep.points)) == ("analytical", 60, 1)


@pytest.mark.parametrize(
    ("key", "says"),
    [
        ("cluster.node_groups[5].nic.gbps", "cluster.node_groups has no item [5]"),
        ("cluster.node_groups[1].nic.gbbs", "cluster.node_groups[1].nic has no field 'gbbs'; fields: gbps"),
        ("parallelism..tp", "cannot read path segment ''"),
        ("[1].x", "cannot read path segment '[1]'"),
    ],
)
def test_a_path_that_does_not_exist_is_a_sweep_file_error(tmp_path, key, says):
    with pytest.raises(SpecError, match="grid") as info:
        plan_sweep({"base": make_spec_data(), "grid": {key: [1]}}, tmp_path)
    assert says in str(info.value)


@pytest.mark.parametrize(
    ("data", "says"),
    [
        ({"grid": {"a.b": [1]}, "variants": []}, "exactly one of"),
        ({}, "exactly one of"),
        ({"grid": {"parallelism.tp": []}}, "at least one value"),
        ({"grid": {"parallelism.tp": [1]}, "extra": 1}, "unknown field"),
    ],
)
def test_malformed_sweep_files_are_rejected(tmp_path, data, says):
    with pytest.raises(SpecError, match=says):
        plan_sweep({"base": make_spec_data(), **data}, tmp_path)


def test_set_path_replaces_nested_items_and_parse_path_splits_indices():
    data = {"a": {"b": [1, 2]}}
    set_path(data, "a.b[1]", {"deep": [3]})
    assert data == {"a": {"b": [1, {"deep": [3]}]}}
    assert parse_path("cluster.node_groups[1].nic.gbps") == ["cluster", "node_groups", 1, "nic", "gbps"]


def test_a_bad_base_spec_is_named(tmp_path):
    with pytest.raises(SpecError, match="parallelism"):
        plan_sweep(
            {"base": make_spec_data(parallelism={"tp": 3, "global_batch_size": 4}), "grid": {"name": ["x"]}},
            tmp_path,
        )


def test_a_billion_laughs_value_in_a_variant_is_refused_while_reading(tmp_path):
    from tests.spec.test_yamlfile import billion_laughs

    (tmp_path / "base.yaml").write_text(yaml.safe_dump(make_spec_data()))
    laughs = billion_laughs().replace("\n", "\n  ")
    (tmp_path / "sweep.yaml").write_text(
        f"base: base.yaml\nlaughs:\n  {laughs}\nvariants:\n  - {{name: a, set: {{name: *l8}}}}\n"
    )
    with pytest.raises(SpecError, match="expands to more than"):
        load_sweep(tmp_path / "sweep.yaml")


def test_a_grid_with_too_many_points_is_refused_before_it_is_expanded(tmp_path):
    grid = {
        "parallelism.dp_bucket_mib": list(range(1, 101)),
        "network.link_latency_ns": list(range(100)),
        "network.oversubscription": list(range(1, 101)),
    }
    with pytest.raises(SpecError, match="1,000,000 points") as caught:
        plan_sweep({"base": make_spec_data(), "grid": grid}, tmp_path)
    assert caught.value.field == "grid" and "--max-points" in str(caught.value)
    small = {key: values[:2] for key, values in grid.items()}
    assert len(plan_sweep({"base": make_spec_data(), "grid": small}, tmp_path, max_points=8).points) == 8


@pytest.mark.parametrize(("text", "kind"), [("", "nothing"), ("- a\n", "a list"), ("7\n", "a int")])
@pytest.mark.parametrize("command", ["sweep", "study"])
def test_a_file_that_is_not_a_mapping_is_named(tmp_path, capsys, command, text, kind):
    """Before: "Input should be a valid dictionary or instance of SweepFile", naming no file."""
    from astra_hetero.cli.main import main

    (tmp_path / "f.yaml").write_text(text)
    assert main([command, str(tmp_path / "f.yaml"), "-o", str(tmp_path / "out"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"f.yaml: a {command} file holds a mapping of keys, not {kind}" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("base", "field", "says"),
    [
        ("missing.yaml", "base", "spec file not found"),
        (
            {**make_spec_data(), "parallelism": {"tp": 3, "pp": 1, "dp": 1, "global_batch_size": 4}},
            "base.parallelism",
            "",
        ),
        ("odd.yaml", "base.parallelism", "odd.yaml"),
    ],
)
def test_errors_in_the_base_name_the_base(tmp_path, base, field, says):
    """Before: "parallelism: ..." alone, which could be the sweep's or any file's."""
    odd = {**make_spec_data(), "parallelism": {"tp": 3, "pp": 1, "dp": 1, "global_batch_size": 4}}
    (tmp_path / "odd.yaml").write_text(yaml.safe_dump(odd))
    with pytest.raises(SpecError) as error:
        plan_sweep({"base": base, "grid": {"parallelism.tp": [1]}}, tmp_path)
    assert error.value.field == field and says in error.value.reason
