"""`dynamics:` and `iterations:` in a spec: valid events load, bad ones are refused naming the field."""

from __future__ import annotations

import json

import pytest

from astra_hetero.errors import SpecError
from astra_hetero.spec import parse_spec
from tests.conftest import make_spec_data

NIC = {"event": "link_rate", "node_group": "a100", "node": 0, "kind": "nic", "factor": 0.25}


def spec_with(*events, **extra):
    return parse_spec(make_spec_data(dynamics=list(events), **extra))


def test_the_issue_example_loads():
    spec = spec_with(
        {**NIC, "start_ms": 0, "end_ms": 200},
        {"event": "device_slowdown", "node_group": "h100", "factor": 0.5, "start_ms": 100},
        {
            "event": "background_traffic",
            "from": {"node_group": "a100", "node": 0},
            "to": {"node_group": "h100", "node": 1},
            "gbps": 100,
            "start_ms": 0,
        },
        {"event": "jitter", "distribution": "lognormal", "sigma": 0.05, "seed": 7},
        iterations=5,
    )
    assert [e.event for e in spec.dynamics] == [
        "link_rate",
        "device_slowdown",
        "background_traffic",
        "jitter",
    ]
    assert spec.dynamics[0].end_ms == 200 and spec.dynamics[1].end_ms is None
    assert spec.iterations == 5


def test_a_spec_without_dynamics_is_static():
    spec = parse_spec(make_spec_data())
    assert spec.dynamics == [] and spec.iterations == 1


@pytest.mark.parametrize(
    "event, field, reason",
    [
        ({**NIC, "node_group": "v100"}, "dynamics[0].node_group", "unknown node group 'v100'"),
        ({**NIC, "node": 2}, "dynamics[0].node", "node 2 outside 0..1"),
        ({**NIC, "factor": -0.5}, "dynamics[0].factor", "greater than or equal to 0"),
        ({**NIC, "start_ms": 5, "end_ms": 2}, "dynamics[0].end_ms", "must be after start_ms"),
        # the same nanosecond on the engine's clock: refused in the run directory only, before
        ({**NIC, "start_ms": 0, "end_ms": 1e-9}, "dynamics[0].end_ms", "by at least 1 ns"),
        ({**NIC, "kind": "wifi"}, "dynamics[0].kind", ""),
        ({**NIC, "spine": 0}, "dynamics[0]", "spine selects uplinks"),
        ({"event": "link_rate", "kind": "nic", "factor": 0.5}, "dynamics[0]", "needs node_group"),
        (
            {"event": "device_slowdown", "ranks": [16], "factor": 0.5},
            "dynamics[0].ranks[0]",
            "rank 16 outside",
        ),
        (
            {"event": "device_slowdown", "node_group": "h100", "factor": 0},
            "dynamics[0].factor",
            "greater than or equal to 0.001",
        ),
        (
            {"event": "link_rate", "node_group": "h100", "kind": "nic", "factor": 1e-300},
            "dynamics[0].factor",
            "0 (links down) or at least 0.001",
        ),
        ({"event": "device_slowdown", "factor": 0.5}, "dynamics[0]", "exactly one"),
        (
            {
                "event": "background_traffic",
                "from": {"node_group": "a100"},
                "to": {"node_group": "h100", "node": 9},
                "gbps": 10,
            },
            "dynamics[0].to.node",
            "node 9 outside",
        ),
        (
            {
                "event": "background_traffic",
                "from": {"node_group": "a100"},
                "to": {"node_group": "a100"},
                "gbps": 10,
            },
            "dynamics[0].to",
            "two different nodes",
        ),
        (
            {"event": "jitter", "distribution": "normal", "sigma": 0.1},
            "dynamics[0].distribution",
            "lognormal",
        ),
        ({"event": "jitter", "sigma": 0.1, "color": 1}, "dynamics[0].color", "unknown field"),
        ({"event": "earthquake"}, "dynamics[0]", "earthquake"),
    ],
)
def test_bad_events_are_refused_naming_the_field(event, field, reason):
    with pytest.raises(SpecError) as info:
        spec_with(event)
    assert info.value.field == field
    assert reason in str(info.value)


def test_iterations_must_be_a_positive_count():
    with pytest.raises(SpecError) as info:
        parse_spec(make_spec_data(iterations=0))
    assert info.value.field == "iterations"


def test_too_many_iterations_for_the_work_limit_are_refused_naming_iterations():
    from astra_hetero.bounds import WorkLimits, WorkTooLarge, check_work

    spec = parse_spec(make_spec_data(iterations=100))
    check_work(spec, WorkLimits())  # 100 iterations of the tiny model fit
    with pytest.raises(WorkTooLarge) as info:
        check_work(spec, WorkLimits(max_rank_nodes=5_000))
    assert info.value.field == "iterations"


def test_the_spec_written_into_a_run_directory_loads_back_with_its_events(tmp_path):
    from astra_hetero.pipeline import build_run_dir
    from astra_hetero.spec import load_spec

    background = {
        "event": "background_traffic",
        "from": {"node_group": "a100", "node": 0},
        "to": {"node_group": "h100", "node": 1},
        "gbps": 50,
        "start_ms": 1,
    }
    spec = spec_with(background, NIC, iterations=2)
    build_run_dir(spec, tmp_path / "run")
    again = load_spec(tmp_path / "run/spec.yaml")
    assert again.dynamics == spec.dynamics and again.iterations == 2


@pytest.mark.parametrize(
    "change",
    [
        {"event": "jitter", "sigma": 1e308, "seed": 1},
        {"event": "device_slowdown", "factor": 1e-200, "ranks": [0]},
        {"event": "device_slowdown", "factor": 0.0, "ranks": [0]},
        {"event": "link_rate", "factor": float("nan"), "links": [0]},
        {"event": "link_rate", "factor": 0.5, "links": [10**6]},
        {"event": "jitter", "sigma": 0.1, "seed": 1, "end_ns": 1e300},
        {"event": "background_traffic", "gbps": float("inf"), "src_rank": 0, "dst_rank": 1},
    ],
    ids=["sigma", "tiny-speed", "zero-speed", "nan-rate", "line", "end", "gbps"],
)
def test_a_hand_written_dynamics_file_is_held_to_the_specs_bounds(tmp_path, change):
    """dynamics.json is input like a spec: what the spec refuses, the reader refuses (RunDirError,
    exit 2), never a number that overflows the engine's clock."""
    from astra_hetero.backends.embedded.rundir.dynamics import read_dynamics
    from astra_hetero.errors import RunDirError

    event = {"index": 0, "start_ns": 0, "end_ns": None, "ranks": [], **change}
    (tmp_path / "dynamics.json").write_text(json.dumps({"format": 1, "iterations": 1, "events": [event]}))
    with pytest.raises(RunDirError, match=r"dynamics.json: events\[0\]"):
        read_dynamics(tmp_path, 4, 8)
