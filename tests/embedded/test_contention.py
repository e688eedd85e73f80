"""Compute slowed by communication beside it (`compute.comm_overlap_slowdown`), against closed forms.

Rank 0 runs a compute kernel of T and, from the same instant, an all-reduce with rank 1 that takes C
alone (C < T). With slowdown s the kernel runs at 1/(1 + s) while the all-reduce lasts, so it has done
C/(1 + s) of its work when the all-reduce ends and finishes at C + T - C/(1 + s) = T + C·s/(1 + s).
"""

from __future__ import annotations

import json

import pytest

from astra_hetero.backends.astrasim.dynamics_check import refuse_dynamics
from astra_hetero.backends.embedded.backend import EmbeddedBackend
from astra_hetero.errors import RunDirError, SpecError
from astra_hetero.pipeline import build_run_dir
from astra_hetero.spec import parse_spec
from tests.conftest import make_spec_data
from tests.embedded.rundirs import coll, comp, single_switch, write_run_dir

IDEAL_RING = {"collective_model": "ideal", "collective_algorithm": "ring"}
T_US = 1000
SIZE = 8_000_000  # 2·(1/2)·8 MB over 50 B/ns: 160 µs and a hop's latency


def kernel_beside_all_reduce(root, slowdown: float, kernel_first: bool = True):
    """Rank 0: the kernel and the all-reduce, both roots; rank 1: the all-reduce alone."""
    kernel, reduce = comp(0, T_US), coll(1, "all_reduce", SIZE)
    traces = {0: [kernel, reduce] if kernel_first else [reduce, kernel], 1: [coll(0, "all_reduce", SIZE)]}
    manifest = {**IDEAL_RING, "comm_overlap_slowdown": slowdown}
    write_run_dir(root, traces, single_switch(2), manifest=manifest)
    return root


def finishes(root) -> tuple[float, float]:
    """(rank 0's finish, the all-reduce's time alone), µs."""
    result = EmbeddedBackend().run(root).result
    (reduce,) = result.collectives
    return result.ranks[0].finish_us, reduce.duration_us


@pytest.mark.parametrize("slowdown", [0.1, 0.25, 1.0])
def test_a_kernel_beside_an_all_reduce_is_stretched_while_it_lasts(tmp_path, slowdown):
    finish, c_us = finishes(kernel_beside_all_reduce(tmp_path, slowdown))
    assert c_us < T_US
    assert finish == pytest.approx(T_US + c_us * slowdown / (1 + slowdown), abs=0.002)


def test_no_slowdown_is_the_static_engine(tmp_path):
    static = finishes(kernel_beside_all_reduce(tmp_path / "a", 0.0))
    assert static[0] == pytest.approx(T_US, abs=0.002)
    # the contended path with a slowdown too small to matter gives the same, to the nanosecond it
    # rounds the re-timed kernel to
    assert finishes(kernel_beside_all_reduce(tmp_path / "b", 1e-12)) == pytest.approx(static, abs=0.0011)


def test_the_order_in_the_trace_does_not_matter(tmp_path):
    first = finishes(kernel_beside_all_reduce(tmp_path / "a", 0.5, kernel_first=True))
    second = finishes(kernel_beside_all_reduce(tmp_path / "b", 0.5, kernel_first=False))
    assert first == second


def test_compute_alone_is_not_slowed(tmp_path):
    """Rank 1's kernel runs after its all-reduce: nothing beside it, full speed."""
    traces = {
        0: [coll(0, "all_reduce", SIZE)],
        1: [coll(0, "all_reduce", SIZE), comp(1, T_US, deps=(0,))],
    }
    write_run_dir(tmp_path, traces, single_switch(2), manifest={**IDEAL_RING, "comm_overlap_slowdown": 0.5})
    result = EmbeddedBackend().run(tmp_path).result
    (reduce,) = result.collectives
    reduce_us = reduce.duration_us
    assert result.ranks[1].finish_us == pytest.approx(reduce_us + T_US, abs=0.002)


def small(slowdown: float) -> dict:
    data = make_spec_data(compute={"comm_overlap_slowdown": slowdown})
    data["model"] = {**data["model"], "num_layers": 4, "hidden_size": 512, "num_heads": 8, "num_kv_heads": 8}
    data["model"]["ffn_size"], data["model"]["seq_len"] = 2048, 256
    return data


def test_a_spec_slowdown_slows_overlapped_training_and_folds_exactly(tmp_path):
    """Gradient all-reduces overlap the backward: contention makes the iteration slower, never faster,
    and the folded simulation equals the rank-by-rank one."""
    static = EmbeddedBackend().run(build_run_dir(parse_spec(small(0.0)), tmp_path / "s").root).result
    run = build_run_dir(parse_spec(small(0.3)), tmp_path / "c").root
    folded = EmbeddedBackend().run(run).result
    plain = EmbeddedBackend(fold=False).run(run).result
    assert folded.iteration_time_us > static.iteration_time_us
    assert folded.iteration_time_us == plain.iteration_time_us
    assert [r.compute_us for r in folded.ranks] == [r.compute_us for r in plain.ranks]
    assert json.loads((run / "manifest.json").read_text())["comm_overlap_slowdown"] == 0.3
    assert folded.meta["comm_overlap_slowdown"] == 0.3 and "comm_overlap_slowdown" not in static.meta


def test_the_slowdown_is_validated_and_refused_by_astrasim(tmp_path):
    with pytest.raises(SpecError, match=r"compute\.comm_overlap_slowdown"):
        parse_spec(small(1.5))
    run = build_run_dir(parse_spec(small(0.3)), tmp_path / "c").root
    with pytest.raises(RunDirError, match="comm_overlap_slowdown 0.3: the ns3 backend cannot model it"):
        refuse_dynamics(run, "ns3", None)
    manifest = json.loads((run / "manifest.json").read_text())
    (run / "manifest.json").write_text(json.dumps({**manifest, "comm_overlap_slowdown": float("nan")}))
    with pytest.raises(RunDirError, match="comm_overlap_slowdown must be a number in 0..1"):
        EmbeddedBackend().run(run)


def test_contention_and_a_device_slowdown_multiply(tmp_path):
    """At half speed for the whole run, the kernel does C·(1/2)/(1 + s) of its work beside the
    all-reduce and the rest at 1/2: it ends at C + 2·(T - C/(2(1 + s))) = 2T + C·s/(1 + s)."""
    s = 0.5
    root = kernel_beside_all_reduce(tmp_path, s)
    event = {
        "index": 0,
        "event": "device_slowdown",
        "start_ns": 0,
        "end_ns": None,
        "factor": 0.5,
        "ranks": [0],
    }
    (root / "dynamics.json").write_text(json.dumps({"format": 1, "iterations": 1, "events": [event]}))
    finish, c_us = finishes(root)
    assert finish == pytest.approx(2 * T_US + c_us * s / (1 + s), abs=0.002)


def test_several_iterations_with_contention_run_each_one(tmp_path):
    """Each iteration is simulated and timed (the contended engine once shared the name of its
    per-kernel work with the count of sinks that ends an iteration, and stopped after the first)."""
    data = make_spec_data(compute={"comm_overlap_slowdown": 0.1}, iterations=2)
    result = EmbeddedBackend().run(build_run_dir(parse_spec(data), tmp_path / "run").root).result
    times = [i["time_us"] for i in result.iterations]
    assert len(times) == 2 and all(t > 0 for t in times)
    assert result.iteration_time_us == pytest.approx(sum(times) / 2)
