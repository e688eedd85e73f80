"""Plain ASTRA-sim inputs run too; the same directory gives the same result; topology parsing."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from astra_hetero.backends.base import create_backend
from astra_hetero.backends.embedded.network.routing import Router
from astra_hetero.backends.embedded.rundir.topology import host_groups, parse_topology
from astra_hetero.errors import RunDirError
from tests.embedded.rundirs import coll, comp, machines, recv, send, single_switch, write_run_dir

SAMPLE = Path("/work/shared/reference/samples/chakra/all_reduce_4npus_1MB")


@pytest.mark.skipif(not SAMPLE.is_dir(), reason="reference sample traces not present on this machine")
def test_astra_sim_sample_all_reduce_matches_the_analytical_closed_form(tmp_path):
    """ASTRA-sim's 4-NPU 1 MB all-reduce sample (prefix all_reduce, no manifest, no comm groups) on a
    400 Gbps switch with 500 ns links. Analytical ASTRA-sim runs a ring: 2(N-1) steps, each sending S/N
    bytes over 2 hops, i.e. 2(N-1)·(2L + S/(N·B)); its per-step endpoint delay (1-10 ns in the sample
    system files) is the only difference, well inside 2 %."""
    (tmp_path / "workload").mkdir()
    for trace in SAMPLE.glob("*.et"):
        shutil.copy(trace, tmp_path / "workload" / trace.name)
    (tmp_path / "ns3").mkdir()
    (tmp_path / "ns3/topology.txt").write_text(single_switch(4))
    result = create_backend("embedded").run(tmp_path).result
    n, size, bandwidth, hop = 4, 1 << 20, 50.0, 500
    analytical_ns = 2 * (n - 1) * (2 * hop + size / (n * bandwidth))
    assert result.iteration_time_us * 1000 == pytest.approx(analytical_ns, rel=0.02)
    assert [r.exposed_comm_us for r in result.ranks] == [result.iteration_time_us] * 4


def _busy_run_dir(root: Path) -> Path:
    groups = {f"m{m}": [2 * m, 2 * m + 1] for m in range(4)} | {"x": [0, 2, 4, 6], "y": [1, 3, 5, 7]}
    traces = {}
    for r in range(8):
        nodes = [
            comp(0, 5 + r),
            coll(1, "all_reduce", 3_000_000, f"m{r // 2}", (0,)),
            coll(2, "all_gather", 2_000_000, "x" if r % 2 == 0 else "y", (0,)),
        ]
        peer = r ^ 2
        nodes += [send(3, r, peer, 1, 4_000_000, (1,)), recv(4, peer, r, 1, 4_000_000), comp(5, 7, (0, 4))]
        traces[r] = nodes
    return write_run_dir(root, traces, machines([100, 200, 400, 100], 2), groups)


def test_same_directory_same_result(tmp_path):
    root = _busy_run_dir(tmp_path)
    first, second = create_backend("embedded").run(root), create_backend("embedded").run(root)
    assert first.result.iteration_time_us > 0
    assert first.result.to_json() | {"wall_time_s": 0} == second.result.to_json() | {"wall_time_s": 0}
    assert first.spans == second.spans


def test_every_rank_time_is_compute_plus_exposed_plus_idle(tmp_path):
    result = create_backend("embedded").run(_busy_run_dir(tmp_path)).result
    for rank in result.ranks:
        assert min(rank.compute_us, rank.exposed_comm_us, rank.idle_us) >= 0
        total = rank.compute_us + rank.exposed_comm_us + rank.idle_us
        assert total == pytest.approx(result.iteration_time_us)


def test_topology_lines_become_full_duplex_links_with_their_own_rates():
    topo = parse_topology("3 1 2\n2\n0 2 400Gbps 0.0005ms 0\n1 2 100Gbps 0.001ms 0\n")
    assert topo.npus == [0, 1]
    assert topo.link_bytes_per_ns == [50.0, 50.0, 12.5, 12.5]
    assert topo.link_delay_ns == [500, 500, 1000, 1000]


def test_bad_topology_line_names_the_line():
    with pytest.raises(RunDirError, match=r"topology.txt:3"):
        parse_topology("3 1 1\n2\n0 2 fastGbps 0.0005ms 0\n")


def test_equal_cost_paths_through_twin_spines_become_one_bundle_of_their_summed_capacity():
    # two hosts under two leaves joined by two spines: each spine carries half of the flow, so the
    # two leaf->spine links act as one link of twice the rate
    text = (
        "6 4 6\n2 3 4 5\n0 2 100Gbps 0ms 0\n1 3 100Gbps 0ms 0\n2 4 100Gbps 0ms 0\n2 5 100Gbps 0ms 0\n"
        "3 4 100Gbps 0ms 0\n3 5 100Gbps 0ms 0\n"
    )
    router = Router(parse_topology(text))
    route = router.route(0, 1)
    assert [share for _, share in route.links] == [1.0] * 4
    assert sorted(router.bundle_bytes_per_ns[b] for b, _ in route.links) == [12.5, 12.5, 25.0, 25.0]


def test_machines_are_gpus_sharing_an_intra_node_switch():
    assert host_groups(parse_topology(machines([100, 100, 100], 2)), 6) == [0, 0, 1, 1, 2, 2]
