"""The engine's timed events and iterations against closed forms, on hand-built run directories.

`dynamics.json` is written as the pipeline resolves it: times in ns, link_rate links as topology.txt
link lines (0 = the first link line), ranks as rank numbers.
"""

from __future__ import annotations

import json

import pytest

from astra_hetero.backends.embedded.backend import EmbeddedBackend
from astra_hetero.errors import FieldError
from tests.embedded.rundirs import coll, comp, machines, recv, send, single_switch, write_run_dir

IDEAL_RING = {"collective_model": "ideal", "collective_algorithm": "ring"}
B400 = 50.0  # 400 Gbit/s in bytes per ns
HOP_NS = 500


def with_dynamics(root, events, iterations=1):
    (root / "dynamics.json").write_text(json.dumps({"format": 1, "iterations": iterations, "events": events}))
    return root


def timed(event, start_ns=0, end_ns=None, index=0, **fields):
    return {"index": index, "event": event, "start_ns": start_ns, "end_ns": end_ns, "ranks": [], **fields}


def link_rate(lines, factor, **times):
    return timed("link_rate", links=lines, factor=factor, **times)


def slowdown(ranks, factor, **times):
    return timed("device_slowdown", ranks=ranks, factor=factor, **times)


@pytest.fixture(params=[True, False], ids=["folded", "plain"])
def simulate(request):
    return lambda root, **options: EmbeddedBackend(fold=request.param, **options).run(root).result


def ring_all_reduce_dir(root, n, size):
    traces = {r: [coll(0, "all_reduce", size)] for r in range(n)}
    return write_run_dir(root, traces, single_switch(n), manifest=IDEAL_RING)


def ring_ns(n, size, rate):
    return 2 * (n - 1) / n * size / rate + 2 * (n - 1) * 2 * HOP_NS


def test_halving_one_gpus_link_stretches_a_ring_all_reduce_to_its_bottleneck(tmp_path, simulate):
    n, size = 4, 8_000_000
    with_dynamics(ring_all_reduce_dir(tmp_path, n, size), [link_rate([2], 0.5)])  # line 2: GPU 2 - switch
    result = simulate(tmp_path)
    assert result.iteration_time_us * 1000 == pytest.approx(ring_ns(n, size, B400 / 2), abs=2.0)
    assert result.events[0]["links"] == [2]


def test_a_rate_change_mid_collective_moves_the_rest_of_the_bytes_at_the_new_rate(tmp_path, simulate):
    n, size = 4, 8_000_000
    bandwidth_ns = 2 * (n - 1) / n * size / B400  # 120 us at full rate
    with_dynamics(ring_all_reduce_dir(tmp_path, n, size), [link_rate([0], 0.25, start_ns=40_000)])
    # ring phases move their bytes first, then pay the step latencies: 40 us at full rate, the rest at 1/4
    expected = 40_000 + (bandwidth_ns - 40_000) * 4 + 2 * (n - 1) * 2 * HOP_NS
    assert simulate(tmp_path).iteration_time_us * 1000 == pytest.approx(expected, abs=2.0)


def test_an_event_that_ends_restores_the_static_time_in_the_next_iteration(tmp_path, simulate):
    n, size = 4, 8_000_000
    static = ring_ns(n, size, B400)
    with_dynamics(ring_all_reduce_dir(tmp_path, n, size), [link_rate([1], 0.5, end_ns=50_000)], iterations=3)
    result = simulate(tmp_path)
    times = [it["time_us"] * 1000 for it in result.iterations]
    assert len(times) == 3
    assert times[0] > static + 1000
    assert times[1] == pytest.approx(static, abs=2.0)
    assert times[2] == pytest.approx(static, abs=2.0)
    assert result.iteration_time_us == pytest.approx(sum(times) / 3 / 1000)


def test_iterations_without_events_repeat_the_static_iteration(tmp_path, simulate):
    n, size = 4, 1 << 20
    ring_all_reduce_dir(tmp_path, n, size)
    static = simulate(tmp_path).iteration_time_us
    result = simulate(tmp_path, iterations=4)
    assert [it["index"] for it in result.iterations] == [0, 1, 2, 3]
    assert all(it["time_us"] == pytest.approx(static, abs=1e-3) for it in result.iterations)
    assert result.iteration_time_us == pytest.approx(static, abs=1e-3)


@pytest.mark.parametrize("iterations", range(2, 16))
def test_a_rank_busy_all_run_long_has_zero_idle_for_any_iteration_count(tmp_path, simulate, iterations):
    # compute then an all-reduce: the last rank to compute is never idle. A slowdown makes the
    # iterations differ, so their mean is no exact multiple: per-iteration means taken by float
    # subtraction left its idle at -3e-11 us for 7 and 9 iterations (a run refused as a negative time).
    traces = {r: [comp(0, 1000 + r), coll(1, "all_reduce", 3_000_007, deps=(0,))] for r in range(3)}
    write_run_dir(tmp_path, traces, single_switch(3), manifest=IDEAL_RING)
    with_dynamics(tmp_path, [slowdown([2], 0.7, end_ns=1000)])
    result = simulate(tmp_path, iterations=iterations)
    for rank in result.ranks:
        assert rank.idle_us >= 0
        busy = rank.compute_us + rank.exposed_comm_us
        assert busy + rank.idle_us == pytest.approx(result.iteration_time_us, rel=1e-12)
    assert result.ranks[2].idle_us == 0


def pipeline_dir(root, stages, micro_batches, t_us):
    """A forward-only pipeline: stage s computes each micro-batch for t_us and sends it on (1 KB)."""
    traces = {}
    for s in range(stages):
        nodes, prev = [], ()
        for m in range(micro_batches):
            base = 3 * m
            deps = prev
            if s > 0:
                nodes.append(recv(base, s - 1, s, m, 1000, deps=prev))
                deps = (base,)
            nodes.append(comp(base + 1, t_us, deps=deps))
            prev = (base + 1,)
            if s < stages - 1:
                nodes.append(send(base + 2, s, s + 1, m, 1000, deps=(base + 1,)))
        traces[s] = nodes
    return write_run_dir(root, traces, single_switch(stages), manifest={"collective_model": "ideal"})


@pytest.mark.parametrize("slow_stage", [0, 1, 3])
def test_a_gpu_at_half_speed_in_one_stage_delays_a_uniform_pipeline_by_m_times_t(
    tmp_path, simulate, slow_stage
):
    stages, micro, t_us = 4, 6, 100
    static_dir = pipeline_dir(tmp_path / "static", stages, micro, t_us)
    static = simulate(static_dir).iteration_time_us
    slow_dir = pipeline_dir(tmp_path / "slow", stages, micro, t_us)
    with_dynamics(slow_dir, [slowdown([slow_stage], 0.5)])
    # makespan of a flow shop of identical jobs: sum of stage times + (M - 1) x the slowest; the slow
    # stage adds t once to the sum and makes the slowest 2t: M x t in all
    assert simulate(slow_dir).iteration_time_us == pytest.approx(static + micro * t_us, abs=0.01)


def test_a_slowdown_stretches_a_running_kernel_pro_rata(tmp_path, simulate):
    write_run_dir(tmp_path, {0: [comp(0, 1000)]}, single_switch(1), manifest={"collective_model": "ideal"})
    with_dynamics(tmp_path, [slowdown([0], 0.5, start_ns=200_000, end_ns=600_000)])
    # 200 us at full speed, 400 us at half speed (200 us of work), the remaining 600 us at full speed
    assert simulate(tmp_path).iteration_time_us == pytest.approx(1200, abs=0.002)


def spine_leaf_send_dir(root, size):
    """GPU 0 on leaf 4, GPU 1 on leaf 5, two spines (6, 7) at 200 Gbit/s: 400 Gbit/s across leaves."""
    links = [
        "0 4 400Gbps 0ms 0",  # line 0
        "1 5 400Gbps 0ms 0",  # line 1
        "4 6 200Gbps 0ms 0",  # line 2: leaf 4 - spine 6
        "4 7 200Gbps 0ms 0",  # line 3: leaf 4 - spine 7
        "5 6 200Gbps 0ms 0",  # line 4
        "5 7 200Gbps 0ms 0",  # line 5
    ]
    # nodes 2 and 3 are idle hosts so that the switches are 4..7
    topology = "8 4 6\n4 5 6 7\n" + "\n".join(links) + "\n"
    traces = {0: [send(0, 0, 1, 0, size)], 1: [recv(0, 0, 1, 0, size)]}
    return write_run_dir(root, traces, topology, manifest={"collective_model": "ideal"})


def test_removing_one_of_two_spines_halves_cross_leaf_bandwidth(tmp_path, simulate):
    size = 10_000_000
    static = simulate(spine_leaf_send_dir(tmp_path / "static", size)).iteration_time_us
    assert static * 1000 == pytest.approx(size / B400, abs=2.0)
    down = with_dynamics(spine_leaf_send_dir(tmp_path / "down", size), [link_rate([2, 4], 0.0)])
    assert simulate(down).iteration_time_us * 1000 == pytest.approx(size / (B400 / 2), abs=2.0)


def test_a_spine_that_comes_back_restores_the_full_rate(tmp_path, simulate):
    size = 10_000_000
    down = with_dynamics(spine_leaf_send_dir(tmp_path, size), [link_rate([2, 4], 0.0, end_ns=100_000)])
    # 100 us at 200 Gbit/s moves 2.5 MB; the other 7.5 MB at 400 Gbit/s
    expected = 100_000 + (size - 100_000 * B400 / 2) / B400
    assert simulate(down).iteration_time_us * 1000 == pytest.approx(expected, abs=2.0)


def test_flows_wait_for_a_link_that_is_down_and_resume_when_it_is_up(tmp_path, simulate):
    size = 10_000_000
    both = with_dynamics(
        spine_leaf_send_dir(tmp_path, size), [link_rate([0], 0.0, start_ns=50_000, end_ns=150_000)]
    )
    assert simulate(both).iteration_time_us * 1000 == pytest.approx(size / B400 + 100_000, abs=2.0)


def test_a_run_that_can_never_finish_fails_naming_the_link(tmp_path, simulate):
    with_dynamics(spine_leaf_send_dir(tmp_path, 1_000_000), [link_rate([1], 0.0)])
    with pytest.raises(FieldError, match=r"line 1 \(") as caught:
        simulate(tmp_path)
    assert caught.value.field == "dynamics[0]" and caught.value.exit_code == 2


def test_background_traffic_takes_its_rate_from_the_links_it_shares(tmp_path, simulate):
    size = 6_000_000
    traces = {0: [send(0, 0, 2, 0, size)], 1: [], 2: [recv(0, 0, 2, 0, size)], 3: []}
    write_run_dir(tmp_path, traces, machines([400, 400], 2), manifest={"collective_model": "ideal"})
    static = simulate(tmp_path).iteration_time_us
    event = {
        "index": 0,
        "event": "background_traffic",
        "start_ns": 0,
        "end_ns": None,
        "gbps": 100.0,
        "src_rank": 0,
        "dst_rank": 2,
        "ranks": [0, 2],
    }
    with_dynamics(tmp_path, [event])
    result = simulate(tmp_path)
    # the background flow wants 100 of the NIC's 400 Gbit/s (less than a fair half): the transfer gets 300
    assert (result.iteration_time_us - static) * 1000 == pytest.approx(
        size / (B400 * 3 / 4) - size / B400, abs=2.0
    )
    assert result.events[0]["links"]  # the NIC and top-switch links it loaded


def test_jitter_is_deterministic_for_a_seed_and_differs_between_seeds(tmp_path, simulate):
    pipeline_dir(tmp_path, 3, 4, 100)
    # without a synchronising collective, stage 0 starts iteration 2 while the last stage still runs 1
    static = [it["time_us"] for it in simulate(tmp_path, iterations=2).iterations]

    def jittered(seed, sigma=0.2):
        event = {
            "index": 0,
            "event": "jitter",
            "start_ns": 0,
            "end_ns": None,
            "sigma": sigma,
            "seed": seed,
            "ranks": [0, 1, 2],
        }
        with_dynamics(tmp_path, [event], iterations=2)
        return [it["time_us"] for it in simulate(tmp_path).iterations]

    assert jittered(7) == jittered(7)
    assert jittered(7) != jittered(8)
    assert jittered(7, sigma=0.0) == pytest.approx(static, abs=1e-3)


def test_jitter_for_the_whole_run_draws_what_the_timed_path_draws(tmp_path):
    """Jitter over the whole run is drawn per iteration up front (static compute paths); with a
    windowed event or a slowdown beside it, the timed path draws per kernel: the same kernels get the
    same times."""
    pipeline_dir(tmp_path, 3, 4, 100)
    jitter = timed("jitter", sigma=0.3, seed=11, ranks=[0, 1, 2])
    no_op = slowdown([0], 1.0, index=1)  # changes nothing, but sends compute through the timed path

    def run(events):
        with_dynamics(tmp_path, events, iterations=3)
        result = EmbeddedBackend().run(tmp_path).result
        return [it["time_us"] for it in result.iterations], [r.compute_us for r in result.ranks]

    up_front = run([jitter])
    assert up_front == run([jitter, no_op])
    windowed = run([{**jitter, "end_ns": 10**15}])  # ends long after the run: the same draws
    assert windowed == up_front
    with_dynamics(tmp_path, [], iterations=3)
    static = EmbeddedBackend().run(tmp_path).result
    assert up_front[0] != [it["time_us"] for it in static.iterations]
