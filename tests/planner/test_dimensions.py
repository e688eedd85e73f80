"""The dimension table's claims, checked against the pipeline itself: an inert option leaves the
generated workload unchanged, and a plan with more recomputation is never faster."""

from __future__ import annotations

from pathlib import Path

import pytest

from astra_hetero import pipeline
from astra_hetero.planner.dimensions import DIMENSIONS, active_dimensions
from astra_hetero.planner.shape import Shape
from astra_hetero.spec import parse_spec
from astra_hetero.spec.schema import ParallelismSpec
from astra_hetero.workload.schedule import SCHEDULES
from tests.conftest import make_spec_data


def traces(tmp_path: Path, name: str, **parallelism: object) -> list[bytes]:
    data = make_spec_data()
    data["parallelism"] = {**data["parallelism"], **parallelism}
    run = pipeline.build_run_dir(parse_spec(data), tmp_path / name, topology=False)
    return [p.read_bytes() for p in sorted((run.root / "workload").glob("*.et"))]


INERT_CASES = [
    (dimension.field, shape)
    for dimension in active_dimensions()
    for shape in (Shape(2, 8, 1), Shape(2, 2, 4))
    if dimension.inert(shape) and isinstance(ParallelismSpec.model_fields[dimension.field].default, bool)
]


@pytest.mark.parametrize(("field", "shape"), INERT_CASES)
def test_an_inert_option_does_not_change_the_traces(tmp_path, field, shape):
    shape_fields = {"tp": shape.tp, "pp": shape.pp, "dp": shape.dp}
    default = ParallelismSpec.model_fields[field].default
    if field == "sequence_parallel" and shape.tp == 1:
        pytest.skip("not allowed without TP: the spec checks reject it instead")
    if field == "overlap_param_gather":  # an option of the distributed optimizer only
        shape_fields["distributed_optimizer"] = True
    assert traces(tmp_path, "off", **shape_fields, **{field: default}) == traces(
        tmp_path, "on", **shape_fields, **{field: not default}
    )


def test_the_table_claims_some_inert_options():
    assert ("distributed_optimizer", Shape(2, 8, 1)) in INERT_CASES


def test_more_recomputation_is_never_faster(tmp_path):
    times = []
    for level in ("none", "selective", "full"):
        data = make_spec_data()
        data["parallelism"] = {**data["parallelism"], "recompute": level}
        run = pipeline.build_run_dir(parse_spec(data), tmp_path / level)
        times.append(pipeline.execute(run.root, timeline="none").iteration_time_us)
    assert times == sorted(times) and times[0] < times[-1]


def test_schedules_come_from_the_registry_and_absent_fields_are_skipped():
    schedule = next(d for d in DIMENSIONS if d.field == "schedule")
    assert schedule.values(parse_spec(make_spec_data())) == tuple(SCHEDULES)
    present = {d.field for d in active_dimensions()}
    parallelism = {d.field for d in DIMENSIONS if d.section == "parallelism"}
    assert present == (parallelism & set(ParallelismSpec.model_fields)) | {"precision"}
