"""`scope`: the plan is made for the whole model and batch, then each stage keeps its first layers and
each replica its first micro-batches; the simulated iteration shrinks accordingly."""

from __future__ import annotations

import json

import pytest

from astra_hetero import pipeline
from astra_hetero.errors import SpecError
from astra_hetero.spec import parse_spec
from astra_hetero.spec.schema import ScopeSpec
from astra_hetero.workload.generate import plan_workload
from astra_hetero.workload.partition import Partition
from astra_hetero.workload.scope import scoped
from tests.conftest import make_spec_data


@pytest.mark.parametrize(
    ("layers", "batches", "scope", "expected"),
    [
        ((3, 5), (4, 4), {"layers_per_stage": 2}, ((2, 2), (4, 4))),
        ((3, 5), (4, 4), {"layers_per_stage": 4}, ((3, 4), (4, 4))),  # a stage with fewer keeps them all
        ((3, 5), (2, 6), {"micro_batches_per_replica": 3}, ((3, 5), (2, 3))),
        ((3, 5), (2, 6), {"layers_per_stage": 1, "micro_batches_per_replica": 1}, ((1, 1), (1, 1))),
    ],
)
def test_scope_caps_each_stage_and_replica(layers, batches, scope, expected):
    cut = scoped(Partition(layers, batches), ScopeSpec(**scope))
    assert (cut.layers_per_stage, cut.micro_batches_per_replica) == expected


def test_no_scope_leaves_the_partition_alone():
    partition = Partition((3, 5), (2, 6))
    assert scoped(partition, None) is partition


def test_an_empty_scope_is_an_error_naming_the_field():
    with pytest.raises(SpecError) as error:
        parse_spec(make_spec_data(scope={}))
    assert error.value.field == "scope"
    with pytest.raises(SpecError) as error:
        parse_spec(make_spec_data(scope={"layers_per_stage": 0}))
    assert error.value.field == "scope.layers_per_stage"


def test_auto_split_is_planned_for_the_whole_model_before_the_cut():
    data = make_spec_data(partition={"layers": "auto"})
    full = plan_workload(parse_spec(data)).partition
    cut = plan_workload(parse_spec({**data, "scope": {"layers_per_stage": 2}})).partition
    assert sum(full.layers_per_stage) == 8 and len(set(full.layers_per_stage)) > 1  # H100 stage holds more
    assert cut.layers_per_stage == tuple(min(n, 2) for n in full.layers_per_stage)


def test_scoped_run_simulates_fewer_layers_and_is_shorter(tmp_path):
    data = make_spec_data()
    times = {}
    for name, scope in (
        ("full", None),
        ("wide", {"layers_per_stage": 99, "micro_batches_per_replica": 99}),
        ("cut", {"layers_per_stage": 1, "micro_batches_per_replica": 1}),
    ):
        spec = parse_spec({**data, "scope": scope})
        run_dir = pipeline.build_run_dir(spec, tmp_path / name).root
        times[name] = pipeline.execute(run_dir, timeline="none").iteration_time_us
        manifest = json.loads((run_dir / "manifest.json").read_text())
        assert manifest["scope"] == (None if scope is None else spec.scope.model_dump(mode="json"))
        if name == "cut":
            assert manifest["layers_per_stage"] == [1, 1]
            assert manifest["micro_batches_per_replica"] == [1, 1, 1, 1]
    assert times["wide"] == times["full"]  # a scope wider than the plan changes nothing
    assert times["cut"] < times["full"] / 2
