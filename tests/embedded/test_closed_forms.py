"""The engine against closed forms: collectives, link sharing and pipelines on hand-built clusters."""

from __future__ import annotations

import pytest

from astra_hetero.backends.embedded.backend import EmbeddedBackend
from tests.embedded.rundirs import coll, comp, machines, recv, send, single_switch, write_run_dir

IDEAL = {"collective_model": "ideal"}  # ASTRA-sim's analytical model: full link rate, path latency per step
B400 = 50.0  # 400 Gbit/s in bytes per ns
HOP_NS = 500  # 0.0005 ms per link: GPU -> switch -> GPU is 2 hops


@pytest.fixture(params=[True, False], ids=["folded", "plain"])
def simulate(request):
    """Every closed form holds for the folded simulation and for the rank-by-rank reference."""
    return lambda root: EmbeddedBackend(fold=request.param).run(root).result


@pytest.mark.parametrize("num_gpus, size", [(2, 1 << 20), (4, 1 << 20), (8, 3_000_000)])
def test_ring_all_reduce_takes_2_n_minus_1_over_n_s_over_b_plus_latencies(tmp_path, simulate, num_gpus, size):
    traces = {r: [coll(0, "all_reduce", size)] for r in range(num_gpus)}
    write_run_dir(
        tmp_path, traces, single_switch(num_gpus), manifest={**IDEAL, "collective_algorithm": "ring"}
    )
    expected_ns = 2 * (num_gpus - 1) / num_gpus * size / B400 + 2 * (num_gpus - 1) * 2 * HOP_NS
    assert simulate(tmp_path).iteration_time_us * 1000 == pytest.approx(expected_ns, abs=1.0)


@pytest.mark.parametrize("kind", ["reduce_scatter", "all_gather"])
def test_ring_reduce_scatter_and_all_gather_take_half_an_all_reduce_of_bandwidth(tmp_path, simulate, kind):
    n, buffer = 4, 4_000_000
    # Chakra's comm_size, as ASTRA-sim reads it: the reduce-scatter input, each rank's all-gather input.
    size = buffer // n if kind == "all_gather" else buffer
    write_run_dir(tmp_path, {r: [coll(0, kind, size)] for r in range(n)}, single_switch(n), manifest=IDEAL)
    expected_ns = (n - 1) / n * buffer / B400 + (n - 1) * 2 * HOP_NS
    assert simulate(tmp_path).iteration_time_us * 1000 == pytest.approx(expected_ns, abs=1.0)


def test_direct_all_to_all_is_bound_by_each_gpus_uplink(tmp_path, simulate):
    n, size = 4, 4_000_000
    write_run_dir(
        tmp_path, {r: [coll(0, "all_to_all", size)] for r in range(n)}, single_switch(n), manifest=IDEAL
    )
    expected_ns = (n - 1) / n * size / B400 + 2 * HOP_NS  # n-1 chunks of S/n share one uplink; one step
    assert simulate(tmp_path).iteration_time_us * 1000 == pytest.approx(expected_ns, abs=1.0)


def test_hierarchical_all_reduce_is_intra_reduce_scatter_inter_rings_intra_all_gather(tmp_path, simulate):
    size = 8_000_000
    write_run_dir(
        tmp_path,
        {r: [coll(0, "all_reduce", size)] for r in range(4)},
        machines([400, 400], 2),
        manifest=IDEAL,
    )
    nvlink, nvlink_hop, nic_path = 3600 / 8, 250, 2 * HOP_NS
    intra = 0.5 * size / nvlink + 2 * nvlink_hop  # ring of 2: (n-1)/n of S, one step
    inter = 2 * (1 / 2) * (size / 2) / B400 + 2 * nic_path  # rings of 2 machines on S/2 each
    assert simulate(tmp_path).iteration_time_us * 1000 == pytest.approx(2 * intra + inter, abs=3.0)


def test_two_flows_through_one_link_each_get_half_of_it(tmp_path, simulate):
    size = 5_000_000
    traces = {
        0: [send(0, 0, 2, 7, size)],
        1: [send(0, 1, 2, 7, size)],
        2: [recv(0, 0, 2, 7, size), recv(1, 1, 2, 7, size)],
    }
    write_run_dir(tmp_path, traces, single_switch(3), manifest=IDEAL)
    transfer_ns = [c.duration_us * 1000 for c in simulate(tmp_path).collectives]
    assert transfer_ns == pytest.approx([size / (B400 / 2) + 2 * HOP_NS] * 2, abs=1.0)


def _pipeline(stage_us: list[int], num_micro_batches: int, backward: bool) -> dict[int, list]:
    """GPipe on p ranks: all forwards, then all backwards; zero-byte transfers between stages."""
    p, traces = len(stage_us), {}
    for s in range(p):
        nodes, last = [], ()
        passes = [("f", mb) for mb in range(num_micro_batches)]
        passes += [("b", mb) for mb in range(num_micro_batches)] if backward else []
        for phase, mb in passes:
            upstream, downstream = (s - 1, s + 1) if phase == "f" else (s + 1, s - 1)
            tag = 2 * mb + (phase == "b")
            deps = last
            if 0 <= upstream < p:
                nodes.append(recv(len(nodes), upstream, s, tag, 0))
                deps = (*last, len(nodes) - 1)
            nodes.append(comp(len(nodes), stage_us[s], deps))
            last = (len(nodes) - 1,)
            if 0 <= downstream < p:
                nodes.append(send(len(nodes), s, downstream, tag, 0, last))
        traces[s] = nodes
    return traces


@pytest.mark.parametrize("p, m", [(2, 1), (4, 4), (4, 8), (3, 5)])
def test_gpipe_takes_m_plus_p_minus_1_stage_times_per_direction(tmp_path, simulate, p, m):
    write_run_dir(
        tmp_path, _pipeline([100] * p, m, backward=True), single_switch(p, delay="0ms"), manifest=IDEAL
    )
    assert simulate(tmp_path).iteration_time_us == pytest.approx(2 * (m + p - 1) * 100)


def test_one_slower_stage_bounds_the_pipeline(tmp_path, simulate):
    stage_us, m = [100, 100, 250, 100], 6
    write_run_dir(
        tmp_path, _pipeline(stage_us, m, backward=False), single_switch(4, delay="0ms"), manifest=IDEAL
    )
    result = simulate(tmp_path)
    assert result.iteration_time_us == pytest.approx(sum(stage_us) + (m - 1) * max(stage_us))
    slow = result.ranks[2]
    assert slow.compute_us == pytest.approx(m * 250)
    assert all(r.idle_us > slow.idle_us for r in result.ranks if r.rank != 2)


def _two_level_run(tmp_path, nic_gbps: list[float]):
    """4 machines x 2 GPUs: an all-reduce inside every machine, then one across machines 0-1 and one
    across machines 2-3."""
    groups = {f"m{m}": [2 * m, 2 * m + 1] for m in range(4)}
    groups |= {"low": [0, 1, 2, 3], "high": [4, 5, 6, 7]}
    traces = {
        r: [
            coll(0, "all_reduce", 6_000_000, f"m{r // 2}"),
            coll(1, "all_reduce", 6_000_000, "low" if r < 4 else "high", (0,)),
        ]
        for r in range(8)
    }
    write_run_dir(tmp_path, traces, machines(nic_gbps, 2), groups, manifest=IDEAL)
    result = EmbeddedBackend(fold=False).run(tmp_path).result  # one record per group, even if alike
    return {c.group: c.duration_us for c in result.collectives}


def test_a_faster_nic_on_one_node_group_shortens_exactly_the_collectives_crossing_it(tmp_path):
    base = _two_level_run(tmp_path / "base", [100, 100, 100, 100])
    fast = _two_level_run(tmp_path / "fast", [100, 100, 400, 400])
    assert fast["high"] < 0.5 * base["high"]
    assert {g: fast[g] for g in fast if g != "high"} == {g: base[g] for g in base if g != "high"}


def test_waiting_for_a_peer_is_idle_and_the_collective_itself_is_exposed(tmp_path, simulate):
    traces = {
        0: [comp(0, 10), coll(1, "all_reduce", 1 << 20, deps=(0,))],
        1: [comp(0, 30), coll(1, "all_reduce", 1 << 20, deps=(0,))],
    }
    write_run_dir(tmp_path, traces, single_switch(2), manifest=IDEAL)
    early, late = simulate(tmp_path).ranks
    comm_us = (1 << 20) / B400 / 1000 + 2 * 2 * HOP_NS / 1000
    assert early.compute_us == 10 and early.idle_us == pytest.approx(20, abs=1e-3)
    assert early.exposed_comm_us == pytest.approx(comm_us, abs=1e-3)
    assert late.idle_us == pytest.approx(0, abs=1e-3) and late.exposed_comm_us == early.exposed_comm_us
    assert early.compute_us + early.exposed_comm_us + early.idle_us == pytest.approx(early.finish_us)


@pytest.mark.parametrize(("limit", "serial"), [(0, False), (1, True)])
def test_one_comm_op_in_flight_per_rank_serialises_independent_collectives(tmp_path, simulate, limit, serial):
    # Two all-reduces on disjoint rank pairs... except that rank 0 is in both groups.
    n_bytes = 4_000_000
    traces = {
        0: [coll(0, "all_reduce", n_bytes, pg="1"), coll(1, "all_reduce", n_bytes, pg="2")],
        1: [coll(0, "all_reduce", n_bytes, pg="1")],
        2: [coll(0, "all_reduce", n_bytes, pg="2")],
    }
    groups = {"1": [0, 1], "2": [0, 2]}
    manifest = {**IDEAL, "collective_algorithm": "ring", "max_comm_in_flight_per_rank": limit}
    write_run_dir(tmp_path, traces, single_switch(3), groups=groups, manifest=manifest)
    result = simulate(tmp_path)
    one = n_bytes / B400 + 2 * 2 * HOP_NS  # ring of 2: 2(N-1)/N·S = S over a link, two latency steps
    if serial:  # ASTRA-sim's rule: the second waits for the first
        assert result.iteration_time_us * 1000 == pytest.approx(2 * one, abs=2.0)
    else:  # both run at once, sharing rank 0's uplink and downlink
        assert result.iteration_time_us * 1000 < 2 * one
