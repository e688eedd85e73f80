"""Specs with dynamics and iterations through the pipeline and the CLI, on the embedded backend."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from astra_hetero.backends.astrasim.dynamics_check import refuse_dynamics
from astra_hetero.cli.main import main
from astra_hetero.errors import RunDirError
from astra_hetero.pipeline import build_run_dir, run_spec
from astra_hetero.spec import parse_spec
from tests.conftest import make_spec_data
from tests.test_pipeline import small_spec

SLOW_NODE1 = {"event": "device_slowdown", "node_group": "h100", "node": 1, "factor": 0.5}


@pytest.fixture(scope="module")
def static_us(tmp_path_factory):
    return run_spec(parse_spec(small_spec()), tmp_path_factory.mktemp("static") / "run").iteration_time_us


@pytest.mark.parametrize(
    "event",
    [
        {"event": "link_rate", "node_group": "h100", "kind": "nic", "factor": 1.0},
        {"event": "device_slowdown", "node_group": "h100", "factor": 1.0},
        {"event": "jitter", "sigma": 0.0, "seed": 1},
    ],
    ids=["link", "device", "jitter"],
)
def test_events_that_change_nothing_give_the_static_time(tmp_path, static_us, event):
    result = run_spec(parse_spec(small_spec(dynamics=[event])), tmp_path / "run")
    assert result.iteration_time_us == pytest.approx(static_us, rel=1e-12)


def test_a_slower_node_slows_the_iteration_and_is_recorded(tmp_path, static_us):
    result = run_spec(parse_spec(small_spec(dynamics=[SLOW_NODE1], iterations=2)), tmp_path / "run")
    assert result.iteration_time_us > static_us * 1.2
    assert [it["index"] for it in result.iterations] == [0, 1]
    assert result.events[0]["ranks"] == [4, 5, 6, 7] and result.events[0]["event"] == "device_slowdown"
    assert sum(it["time_us"] for it in result.iterations) / 2 == pytest.approx(result.iteration_time_us)
    trace = json.loads((tmp_path / "run/trace.json").read_text())
    marks = [e for e in trace["traceEvents"] if e.get("cat") == "dynamics"]
    assert marks and "dynamics[0] device_slowdown" in marks[0]["name"]


def test_an_event_ending_in_the_first_iteration_leaves_the_later_ones_static(tmp_path, static_us):
    event = {**SLOW_NODE1, "end_ms": static_us / 1000 / 2}
    result = run_spec(parse_spec(small_spec(dynamics=[event], iterations=3)), tmp_path / "run")
    times = [it["time_us"] for it in result.iterations]
    assert times[0] > static_us
    # a data-parallel gradient all-reduce at the end of each iteration synchronises the ranks
    assert times[2] == pytest.approx(static_us, rel=1e-9)


def test_run_iterations_option_overrides_the_spec(tmp_path, static_us):
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(yaml.safe_dump(small_spec(iterations=2)))
    assert main(["run", str(spec_path), "-o", str(tmp_path / "run"), "--iterations", "3", "--quiet"]) == 0
    result = json.loads((tmp_path / "run/result.json").read_text())
    assert len(result["iterations"]) == 3
    assert result["iteration_time_us"] == pytest.approx(static_us, rel=1e-9)


def test_astrasim_backends_refuse_events_and_iterations_before_launching(tmp_path):
    build_run_dir(parse_spec(small_spec(dynamics=[SLOW_NODE1])), tmp_path / "run")
    with pytest.raises(RunDirError, match=r"dynamics\[0\] \(device_slowdown\): the ns3 backend cannot model"):
        refuse_dynamics(tmp_path / "run", "ns3", None)
    build_run_dir(parse_spec(small_spec()), tmp_path / "static")
    refuse_dynamics(tmp_path / "static", "analytical", None)
    with pytest.raises(RunDirError, match="iterations 4: the analytical backend simulates one iteration"):
        refuse_dynamics(tmp_path / "static", "analytical", 4)


def test_folding_splits_the_classes_a_slowdown_touches(tmp_path):
    from astra_hetero.backends.embedded.backend import EmbeddedBackend

    build_run_dir(
        parse_spec(small_spec(dynamics=[{**SLOW_NODE1, "start_ms": 0.5}], iterations=2)), tmp_path / "run"
    )
    folded = EmbeddedBackend(fold=True).run(tmp_path / "run").result
    plain = EmbeddedBackend(fold=False).run(tmp_path / "run").result
    assert folded.iterations == plain.iterations
    assert [r.finish_us for r in folded.ranks] == [r.finish_us for r in plain.ranks]


def mixed_spec(**overrides: object) -> dict:
    """The 16-GPU H100 + A100 spine-leaf cluster (two leaves, two spines) with small_spec's model."""
    data = make_spec_data(**overrides)
    data["model"] = small_spec()["model"]
    data["network"] = {**data["network"], "num_spines": 2}
    return data


@pytest.mark.parametrize(
    "events",
    [
        [{"event": "link_rate", "node_group": "h100", "node": 1, "kind": "nic", "factor": 0.25}],
        [{"event": "link_rate", "kind": "uplink", "spine": 0, "factor": 0.0, "start_ms": 0.2, "end_ms": 2}],
        [
            {
                "event": "background_traffic",
                "from": {"node_group": "h100", "node": 0},
                "to": {"node_group": "a100", "node": 1},
                "gbps": 150,
                "start_ms": 0.1,
            }
        ],
    ],
    ids=["one-nic", "spine-down", "background"],
)
def test_folding_keeps_the_links_an_event_changes_apart(tmp_path, events):
    """Link events and background flows keep folding on: the bundles they touch form link classes of
    their own, which splits the flow and rank classes that load them; the result equals the run rank
    by rank, iteration by iteration and rank by rank."""
    from astra_hetero.backends.embedded.backend import EmbeddedBackend

    build_run_dir(parse_spec(mixed_spec(dynamics=events, iterations=2)), tmp_path / "run")
    folded = EmbeddedBackend(fold=True).run(tmp_path / "run").result
    plain = EmbeddedBackend(fold=False).run(tmp_path / "run").result
    assert "folding_off" not in folded.meta and folded.meta["folding"]["rank_classes"] < len(folded.ranks)
    assert folded.iterations == plain.iterations
    assert [r.finish_us for r in folded.ranks] == [r.finish_us for r in plain.ranks]
    static = EmbeddedBackend().run(build_run_dir(parse_spec(mixed_spec()), tmp_path / "static").root)
    assert folded.iteration_time_us != static.result.iteration_time_us  # the events do change the run


@pytest.mark.parametrize("backend", ["analytical", "analytical-unaware", "ns3"])
def test_the_astrasim_backends_refuse_before_looking_for_a_binary(tmp_path, backend):
    from astra_hetero.backends.base import create_backend

    build_run_dir(parse_spec(small_spec(dynamics=[SLOW_NODE1])), tmp_path / "run")
    runner = create_backend(backend, bin_dir=str(tmp_path / "nowhere"))
    with pytest.raises(RunDirError, match=rf"dynamics\[0\] \(device_slowdown\): the {backend} backend"):
        runner.run(tmp_path / "run")


def test_a_bad_event_exits_2_naming_the_field(tmp_path, capsys):
    spec_path = tmp_path / "spec.yaml"
    bad = {"event": "link_rate", "node_group": "h100", "node": 5, "kind": "nic", "factor": 0.5}
    spec_path.write_text(yaml.safe_dump(small_spec(dynamics=[bad])))
    assert main(["run", str(spec_path), "-o", str(tmp_path / "run"), "--quiet"]) == 2
    assert "dynamics[0].node" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("recorded_in", ["manifest.json", "spec.yaml"])
def test_a_run_directory_that_lost_its_dynamics_fails_naming_the_file(tmp_path, capsys, recorded_in):
    # the spec records events and iterations; without dynamics.json the run would be silently static
    build_run_dir(parse_spec(small_spec(dynamics=[SLOW_NODE1], iterations=3)), tmp_path / "run")
    (tmp_path / "run/dynamics.json").unlink()
    if recorded_in == "spec.yaml":  # a run directory written before the manifest recorded dynamics
        manifest = json.loads((tmp_path / "run/manifest.json").read_text())
        manifest.pop("dynamics", None)
        (tmp_path / "run/manifest.json").write_text(json.dumps(manifest))
    assert main(["run", str(tmp_path / "run"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "dynamics.json: missing" in err and recorded_in in err
    assert not (tmp_path / "run/result.json").exists()
    with pytest.raises(RunDirError, match="dynamics.json: missing"):
        refuse_dynamics(tmp_path / "run", "analytical", None)


def test_iterations_alone_are_dynamics_the_run_directory_must_keep(tmp_path):
    build_run_dir(parse_spec(small_spec(iterations=2)), tmp_path / "run")
    (tmp_path / "run/dynamics.json").unlink()
    with pytest.raises(RunDirError, match="2 iterations"):
        from astra_hetero.backends.embedded.backend import EmbeddedBackend

        EmbeddedBackend().run(tmp_path / "run")


@pytest.mark.parametrize("fold", ["", "--no-fold"])
def test_the_shipped_flap_example_runs_for_iteration_counts_that_used_to_fail(tmp_path, fold):
    # 6 (and 7, 11, 15) iterations left a rank's mean idle time at -3e-11 us: no result written
    example = str(Path(__file__).parents[2] / "examples/dynamics_nic_flap.yaml")
    args = [
        "run",
        example,
        "-o",
        str(tmp_path / "run"),
        "--iterations",
        "6",
        "--quiet",
        *filter(None, [fold]),
    ]
    assert main(args) == 0
    ranks = json.loads((tmp_path / "run/result.json").read_text())["ranks"]
    assert min(rank["idle_us"] for rank in ranks) == 0
