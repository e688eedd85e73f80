"""The embedded engine's NCCL-like model on hand-built clusters: closed forms from NCCL's constants.

Times alone on the network are NCCL's price (latency + bytes / algorithm bandwidth, each link at its
kind's achievable fraction); concurrent traffic shares links; a measured nccl-tests table replaces the
price; run directories without the facts the model needs fall back to the ideal model and say so.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from astra_hetero.backends.embedded.backend import EmbeddedBackend
from astra_hetero.comm.catalog import nccl_constants
from astra_hetero.errors import RunDirError
from tests.embedded.rundirs import coll, machines, recv, send, single_switch, write_run_dir

DATA = Path(__file__).parents[1] / "data" / "nccl_tests"
MiB = 1 << 20
M = nccl_constants()  # with the measured corrections, as the engine prices
A100_SIMPLE_STEP = M.hop_us("nvlink", "ring", "simple", "ampere")  # measured (nccl.yaml), not NCCL's 3.4


def nccl_run_dir(
    root: Path,
    traces,
    topology: str,
    kinds: list[str],
    archs: list[str],
    machine_of: list[int] | None = None,
    groups=None,
    **manifest,
) -> Path:
    ranks = [
        {"rank": r, "node": (machine_of or [0] * len(archs))[r], "architecture": a, "node_group": a}
        for r, a in enumerate(archs)
    ]
    write_run_dir(root, traces, topology, groups, {"collective_model": "nccl", "ranks": ranks, **manifest})
    (root / "ns3/link_kinds.json").write_text(json.dumps({"kinds": kinds}))
    return root


def simulate(root: Path):
    return EmbeddedBackend().run(root).result


def _one_collective(tmp_path, n, kind, size, gbps, arch, **manifest):
    traces = {r: [coll(0, kind, size)] for r in range(n)}
    nccl_run_dir(tmp_path, traces, single_switch(n, gbps), ["nvlink"] * n, [arch] * n, **manifest)
    return simulate(tmp_path)


def test_ring_all_reduce_takes_base_plus_2n_minus_2_hops_plus_bus_bytes_over_achievable_busbw(tmp_path):
    n, size = 8, 256 * MiB  # 8 A100 on an NVLink switch at 300 GB/s per direction (2400 Gbit/s)
    result = _one_collective(tmp_path, n, "all_reduce", size, 2400, "ampere", collective_protocol="simple")
    busbw = 0.80 * 300  # NCCL's 20 of 25 GB/s per NVLink on Ampere
    expected_us = 8.4 + 2 * (n - 1) * A100_SIMPLE_STEP + 2 * (n - 1) / n * size / (busbw * 1000)
    assert result.iteration_time_us == pytest.approx(expected_us, abs=0.002)
    assert result.meta["nccl_choices"][0] | {"plans": 0} == {
        "type": "all_reduce",
        "num_ranks": 8,
        "num_nodes": 1,
        "bytes": size,
        "algorithm": "ring",
        "protocol": "simple",
        "plans": 0,
    }


def test_the_protocol_follows_the_size(tmp_path):
    protocols = {}
    for size in (4096, 4 * MiB, 512 * MiB):
        result = _one_collective(tmp_path / str(size), 8, "all_gather", size // 8, 2400, "ampere")
        protocols[size] = result.meta["nccl_choices"][0]["protocol"]
    assert protocols == {4096: "ll", 4 * MiB: "ll128", 512 * MiB: "simple"}


def test_all_gather_prices_the_gathered_buffer(tmp_path):
    n, per_rank = 4, 32 * MiB  # comm_size is each rank's input; NCCL's size is the output, n x that
    result = _one_collective(
        tmp_path, n, "all_gather", per_rank, 2400, "ampere", collective_protocol="simple"
    )
    expected_us = 8.4 + (n - 1) * A100_SIMPLE_STEP + (n - 1) / n * (n * per_rank) / (240 * 1000)
    assert result.iteration_time_us == pytest.approx(expected_us, abs=0.002)


def test_nvls_runs_large_all_reduces_of_hopper_groups_but_a_mixed_group_is_tuned_by_its_a100s(tmp_path):
    size = 1 << 30
    archs = ["hopper"] * 4 + ["ampere"] * 4
    traces = {r: [coll(0, "all_reduce", size, "h")] for r in range(4)}
    traces.update({r: [coll(0, "all_reduce", size, "a")] for r in range(4, 8)})
    traces = {r: [*traces[r], coll(1, "all_reduce", size, "all", deps=(0,))] for r in range(8)}
    groups = {"h": [0, 1, 2, 3], "a": [4, 5, 6, 7], "all": list(range(8))}
    nccl_run_dir(tmp_path, traces, single_switch(8, 3600), ["nvlink"] * 8, archs, groups=groups)
    result = simulate(tmp_path)
    by_group = {c.group: c for c in result.collectives}
    chosen = {(c["num_ranks"], c["algorithm"]) for c in result.meta["nccl_choices"]}
    assert chosen == {(4, "nvls"), (4, "ring"), (8, "ring")}
    # NVLS: each H100 sends and receives S(1 + 1/4) at 0.85 of its achievable NVLink (0.824 x 450 GB/s)
    nvls_us = M.hop_us("nvlink", "nvls", "simple", "hopper") + size * 5 / 4 / (0.85 * 0.824 * 450 * 1000)
    nvls_took_us = by_group["h"].duration_us
    assert nvls_took_us == pytest.approx(nvls_us, abs=0.002)
    # the mixed ring runs at its slowest links: the A100s' 0.80 x 450 GB/s
    ring_us = 8.4 + 14 * A100_SIMPLE_STEP + 2 * 7 / 8 * size / (0.80 * 450 * 1000)
    ring_took_us = by_group["all"].duration_us
    assert ring_took_us == pytest.approx(ring_us, abs=0.002)


def test_two_all_reduces_on_the_same_links_share_them(tmp_path):
    n, size = 4, 64 * MiB
    traces = {r: [coll(0, "all_reduce", size, "a"), coll(1, "all_reduce", size, "b")] for r in range(n)}
    groups = {"a": list(range(n)), "b": list(range(n))}
    nccl_run_dir(
        tmp_path,
        traces,
        single_switch(n, 2400),
        ["nvlink"] * n,
        ["ampere"] * n,
        groups=groups,
        collective_protocol="simple",
    )
    simulated_us = [c.duration_us for c in simulate(tmp_path).collectives]
    latency, transfer = 8.4 + 6 * A100_SIMPLE_STEP, 2 * 3 / 4 * size / (240 * 1000)
    assert simulated_us == pytest.approx([latency + 2 * transfer] * 2, abs=0.002)


def test_point_to_point_is_one_ring_step_ll_up_to_16_kib(tmp_path):
    sizes = (8192, 4 * MiB)
    traces = {
        0: [send(0, 0, 1, 1, sizes[0]), send(1, 0, 1, 2, sizes[1], (0,))],
        1: [recv(0, 0, 1, 1, sizes[0]), recv(1, 0, 1, 2, sizes[1], (0,))],
    }
    nccl_run_dir(tmp_path, traces, single_switch(2, 3600), ["nvlink"] * 2, ["hopper"] * 2)
    small, large = (c.duration_us for c in simulate(tmp_path).collectives)
    achievable = 0.824 * 450 * 1000  # bytes per us
    assert small == pytest.approx(6.6 + 0.6 + sizes[0] / (0.5 * achievable), abs=0.002)
    assert large == pytest.approx(8.4 + 3.4 + sizes[1] / achievable, abs=0.002)


def test_across_nodes_steps_pay_the_network_hop_and_the_nic_rate(tmp_path):
    per_rank = 2048  # two ranks on two machines, one member per node
    traces = {
        0: [coll(0, "all_gather", per_rank, "x")],
        2: [coll(0, "all_gather", per_rank, "x")],
        1: [],
        3: [],
    }
    kinds = ["nvlink", "nic", "nic"] * 4
    nccl_run_dir(
        tmp_path, traces, machines([400, 400], 2), kinds, ["ampere"] * 4, [0, 0, 1, 1], groups={"x": [0, 2]}
    )
    (result,) = simulate(tmp_path).collectives
    # NCCL's own latencies (LL: 6.6 + 5.0 us) are all below the measured floor across nodes, so every
    # protocol starts there and the one with the most bandwidth wins: Simple at an A100's NIC rate,
    # 0.86 x 50 GB/s; algbw = bus x 2 / 1
    took_us = result.duration_us
    floor = M.latency_floor_us["inter_node"]
    assert floor > 6.6 + 5.0
    assert took_us == pytest.approx(floor + 2 * per_rank / (2 * 0.86 * 50 * 1000), abs=0.002)


def test_a_measured_table_replaces_the_modelled_price(tmp_path):
    size = 16 * MiB  # a size the table measured: 8 ranks, the table's own bus factor
    traces = {r: [coll(0, "all_reduce", size)] for r in range(8)}
    nccl_run_dir(
        tmp_path,
        traces,
        single_switch(8, 3600),
        ["nvlink"] * 8,
        ["hopper"] * 8,
        nccl_tests=[{"scope": "intra_node", "path": "nccl_tests/ar.txt"}],
    )
    (tmp_path / "nccl_tests").mkdir()
    shutil.copyfile(DATA / "all_reduce_perf_8xh100.txt", tmp_path / "nccl_tests/ar.txt")
    result = simulate(tmp_path)
    assert result.iteration_time_us == pytest.approx(123.31, abs=0.002)  # the in-place time, the better
    assert result.meta["nccl_choices"][0]["algorithm"] == "nccl-tests"


def test_a_measured_table_carries_its_bus_bandwidth_to_a_smaller_communicator(tmp_path):
    size = 12 * MiB  # between two measured sizes, on 4 ranks: same busbw, bus bytes 2(4-1)/4 of S
    traces = {r: [coll(0, "all_reduce", size)] for r in range(4)}
    nccl_run_dir(
        tmp_path,
        traces,
        single_switch(4, 3600),
        ["nvlink"] * 4,
        ["hopper"] * 4,
        nccl_tests=[{"scope": "intra_node", "path": "nccl_tests/ar.txt"}],
    )
    (tmp_path / "nccl_tests").mkdir()
    shutil.copyfile(DATA / "all_reduce_perf_8xh100.txt", tmp_path / "nccl_tests/ar.txt")
    t8, t16 = 80.02, 123.31  # measured at 8 and 16 MiB (the better placement)
    at_12 = t8 + (t16 - t8) * (12 - 8) / (16 - 8)
    assert simulate(tmp_path).iteration_time_us == pytest.approx(at_12 * (2 * 3 / 4) / 1.75, rel=1e-3)


def test_a_run_directory_from_before_the_nccl_model_runs_the_ideal_one_and_says_so(tmp_path):
    traces = {r: [coll(0, "all_reduce", MiB)] for r in range(2)}
    write_run_dir(tmp_path / "old", traces, single_switch(2), manifest={"collective_algorithm": "ring"})
    old = simulate(tmp_path / "old")
    assert old.meta["collective_model"] == "ideal"
    assert "predates the NCCL model" in old.warnings[0]
    nccl_run_dir(tmp_path / "bare", traces, single_switch(2), ["nvlink"] * 2, ["hopper"] * 2)
    (tmp_path / "bare/ns3/link_kinds.json").unlink()
    bare = simulate(tmp_path / "bare")
    assert bare.meta["collective_model"] == "ideal" and "link_kinds.json missing" in bare.warnings[0]
    ideal_us = MiB / 50 / 1000 + 2 * 1.0  # full 400 Gbit/s link, 2 steps of a 2 x 0.5 us path
    assert bare.iteration_time_us == old.iteration_time_us == pytest.approx(ideal_us, abs=0.001)


@pytest.mark.parametrize(
    ("kinds", "archs", "message"),
    [
        (["nvlink", "warp"], ["hopper"] * 2, "unknown link kind"),
        (["nvlink"], ["hopper"] * 2, "one kind per link"),
        (["nvlink"] * 2, ["hopper", "kepler"], "unknown architecture"),
    ],
)
def test_malformed_comm_facts_name_the_file(tmp_path, kinds, archs, message):
    traces = {r: [coll(0, "all_reduce", MiB)] for r in range(2)}
    nccl_run_dir(tmp_path, traces, single_switch(2), kinds, archs)
    with pytest.raises(RunDirError, match=message):
        simulate(tmp_path)


def test_forcing_an_algorithm_a_communicator_cannot_run_fails_like_nccl(tmp_path):
    with pytest.raises(RunDirError, match="no algorithm/protocol available"):
        _one_collective(tmp_path, 4, "all_reduce", MiB, 2400, "ampere", collective_algorithm="nvls")
