"""NCCL's price of a collective, against the closed forms of src/graph/tuning.cc with its constants.

Latencies in us, bandwidths in GB/s (bytes per ns), sizes in bytes: time = latency + S / (1000 algbw).
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from astra_hetero.comm.catalog import nccl_constants
from astra_hetero.comm.tuning import Communicator, candidates, choose, p2p_choice

C = nccl_constants(measured=False)  # NCCL's own model; the measured corrections are tested below
M = nccl_constants()
MiB = 1 << 20

# One HGX node: 8 GPUs on an NVLink switch; rings at 0.824 x 450 GB/s (NCCL's 18 x 20.6 GB/s).
H100_NODE = Communicator(
    num_ranks=8,
    num_nodes=1,
    ranks_per_node=8,
    oldest_cc=90,
    newest_cc=90,
    intra_class="nvlink",
    nvls_fabric=True,
    ring_busbw=370.8,
    intra_gbs=370.8,
    net_gbs=math.inf,
)
A100_NODE = replace(
    H100_NODE, oldest_cc=80, newest_cc=80, nvls_fabric=True, ring_busbw=240.0, intra_gbs=240.0
)
# 16 nodes of 8 A100, 8 x 200G NICs per node at 0.9: one node's network rate 180 GB/s.
A100_16_NODES = replace(
    A100_NODE, num_ranks=128, num_nodes=16, ring_busbw=180.0, net_gbs=180.0, channels=8, nvls_fabric=False
)


def _by(choices, algorithm, protocol):
    return next(c for c in choices if (c.algorithm, c.protocol) == (algorithm, protocol))


def test_ring_all_reduce_is_base_latency_plus_2n_minus_2_hops_plus_bus_bytes_over_busbw():
    simple = _by(candidates(C, A100_NODE, "all_reduce", 256 * MiB), "ring", "simple")
    size, n = 256 * MiB, 8
    expected = 8.4 + 2 * (n - 1) * 3.4 + 2 * (n - 1) / n * size / (1000 * 240.0)
    assert simple.time_us(size) == pytest.approx(expected)


@pytest.mark.parametrize(("kind", "steps"), [("all_gather", 7), ("reduce_scatter", 7), ("all_reduce", 14)])
def test_ring_steps_and_bus_bytes_per_collective(kind, steps):
    size = 64 * MiB
    simple = _by(candidates(C, A100_NODE, kind, size), "ring", "simple")
    assert simple.latency_us == pytest.approx(8.4 + steps * 3.4)
    assert simple.time_us(size) - simple.latency_us == pytest.approx(steps / 8 * size / (1000 * 240.0))


def test_ll_moves_half_the_bandwidth_and_ll128_0_92_of_it():
    choices = candidates(C, A100_NODE, "all_gather", 1 * MiB)
    simple, ll128, ll = (_by(choices, "ring", p).algbw_gbs for p in ("simple", "ll128", "ll"))
    assert ll128 == pytest.approx(0.92 * simple)
    # LL's bus bandwidth 0.5 x 240 = 120 GB/s is above the Ampere single-node ceiling of 87.7
    assert ll == pytest.approx(87.7 * 8 / 7)
    slow = replace(A100_NODE, ring_busbw=100.0)
    assert _by(candidates(C, slow, "all_gather", MiB), "ring", "ll").algbw_gbs == pytest.approx(
        0.5 * 100 * 8 / 7
    )


def test_protocol_switches_from_ll_to_ll128_to_simple_where_their_prices_cross():
    comm = replace(A100_NODE, ring_busbw=100.0)  # keep LL under its ceiling: crossovers in closed form
    n, steps = 8, 7
    lat = {
        p: {"ll": 6.6, "ll128": 14.0, "simple": 8.4}[p] + steps * {"ll": 0.6, "ll128": 1.9, "simple": 3.4}[p]
        for p in ("ll", "ll128", "simple")
    }
    bw = {"ll": 50.0, "ll128": 92.0, "simple": 100.0}  # bus bandwidth per protocol
    per_byte = {p: steps / n / (1000 * bw[p]) for p in bw}  # us per byte of the buffer
    ll_to_ll128 = (lat["ll128"] - lat["ll"]) / (per_byte["ll"] - per_byte["ll128"])
    ll128_to_simple = (lat["simple"] - lat["ll128"]) / (per_byte["ll128"] - per_byte["simple"])
    assert ll_to_ll128 < ll128_to_simple
    for size, protocol in (
        (0.9 * ll_to_ll128, "ll"),
        (1.1 * ll_to_ll128, "ll128"),
        (0.9 * ll128_to_simple, "ll128"),
        (1.1 * ll128_to_simple, "simple"),
    ):
        assert choose(C, comm, "all_gather", size).protocol == protocol, size


def test_nvls_takes_large_all_reduces_inside_a_hopper_node():
    big = choose(C, H100_NODE, "all_reduce", 1 << 30)
    assert (big.algorithm, big.protocol) == ("nvls", "simple")
    # each GPU sends and receives S(1 + 1/N) through the switch at NCCL's NVLS efficiency 0.85
    assert big.algbw_gbs == pytest.approx(0.85 * 370.8 * 8 / 9)
    assert big.latency_us == pytest.approx(25.0)
    assert choose(C, H100_NODE, "all_reduce", 64 << 10).algorithm == "ring"  # NVLS's 25 us is too much


def test_a_communicator_is_tuned_by_its_oldest_member():
    mixed = replace(H100_NODE, oldest_cc=80, newest_cc=90)
    names = {(c.algorithm, c.protocol) for c in candidates(C, mixed, "all_reduce", 1 << 30)}
    assert not any(a.startswith("nvls") for a, _ in names)  # NVLS needs Hopper on every member
    assert not any(p == "ll128" for _, p in names)  # LL128 across generations only from Hopper on
    ampere_ll = _by(candidates(C, mixed, "all_reduce", MiB), "ring", "ll")
    assert ampere_ll.algbw_gbs == pytest.approx(87.7 * 8 / 14)  # Ampere's LL ceiling, not Hopper's 141
    same = {(c.algorithm, c.protocol) for c in candidates(C, A100_NODE, "all_reduce", MiB)}
    assert ("ring", "ll128") in same and ("nvls", "simple") not in same


def test_ll128_is_off_over_pcie():
    pcie = replace(A100_NODE, intra_class="pci", nvls_fabric=False, ring_busbw=24.0, intra_gbs=24.0)
    choices = candidates(C, pcie, "all_reduce", MiB)
    assert {c.protocol for c in choices} == {"ll", "simple"}
    assert _by(choices, "ring", "simple").latency_us == pytest.approx(8.4 + 14 * 5.7)  # PCI hops


def test_multi_node_ring_pays_network_hops_between_nodes_and_the_post_overhead_inside():
    comm = replace(
        A100_NODE, num_ranks=16, num_nodes=2, ring_busbw=180.0, net_gbs=180.0, channels=8, nvls_fabric=False
    )
    ll = _by(candidates(C, comm, "all_gather", 4096), "ring", "ll")
    # 15 steps, 1 of them between nodes (network LL hop 2.7 us); inside a node max(0.6, overhead 1.0)
    assert ll.latency_us == pytest.approx(6.6 + 14 * 1.0 + 1 * 2.7)
    simple = _by(candidates(C, comm, "all_reduce", 64 * MiB), "ring", "simple")
    # 30 steps, 2 between nodes; Simple's overhead is 3 us; multi-node plateau x1.4
    assert simple.latency_us == pytest.approx(1.4 * (8.4 + 28 * 3.4 + 2 * 14.0))


def test_tree_wins_all_reduces_across_many_nodes_until_the_rings_bandwidth_pays_for_their_steps():
    # ring: 254 steps (30 between nodes) -> 1.4 x (8.4 + 224 x 3.4 + 30 x 14) us; tree: log2(16) levels
    assert choose(C, A100_16_NODES, "all_reduce", 64 << 10).algorithm == "tree"
    assert choose(C, A100_16_NODES, "all_reduce", 1 << 30).algorithm == "tree"
    assert choose(C, A100_16_NODES, "all_reduce", 16 << 30).algorithm == "ring"
    tree = _by(candidates(C, A100_16_NODES, "all_reduce", 1 << 30), "tree", "simple")
    # 2 x ((ppn - 1) NVLink hops + log2(16) network hops); double binary tree: 2 S per node and direction
    assert tree.latency_us == pytest.approx(8.4 + 2 * (7 * 4.0 + 4 * 14.0))
    assert tree.algbw_gbs == pytest.approx(0.92 * min(240.0 / 2, 180.0 / 2))
    ring = _by(candidates(C, A100_16_NODES, "all_reduce", 1 << 30), "ring", "simple")
    assert ring.latency_us == pytest.approx(1.4 * (8.4 + 224 * 3.4 + 30 * 14.0))


def test_tree_bandwidth_follows_nccls_size_correction():
    sizes = (1 << 10, 1 << 16, 1 << 30)  # log2(S/64) = 4, 10, beyond the table
    simple = [_by(candidates(C, A100_16_NODES, "all_reduce", s), "tree", "simple").algbw_gbs for s in sizes]
    assert simple[0] / simple[2] == pytest.approx(0.9)
    assert simple[1] / simple[2] == pytest.approx(0.6)


def test_nvls_tree_across_two_nodes_moves_the_buffer_once_per_node_and_direction():
    two = replace(H100_NODE, num_ranks=16, num_nodes=2, ring_busbw=360.0, net_gbs=360.0, channels=8)
    choice = _by(candidates(C, two, "all_reduce", 1 << 30), "nvls_tree", "simple")
    assert choice.algbw_gbs == pytest.approx(min(0.85 * 370.8 * 8 / 9, 360.0))
    assert choice.latency_us == pytest.approx(25.0 + 2 * 1 * 20.9)


def test_forcing_an_algorithm_or_protocol_restricts_the_choice():
    assert choose(C, H100_NODE, "all_reduce", 1 << 30, algorithm="ring").algorithm == "ring"
    assert choose(C, H100_NODE, "all_reduce", 1 << 30, protocol="ll").protocol == "ll"
    with pytest.raises(ValueError, match="no algorithm/protocol"):
        choose(C, A100_NODE, "all_reduce", 1 << 30, algorithm="nvls")
    with pytest.raises(ValueError, match="no algorithm/protocol"):
        choose(C, H100_NODE, "all_reduce", 1 << 30, algorithm="nvls", protocol="ll")


def test_point_to_point_uses_ll_up_to_16_kib_then_simple_one_ring_step():
    small, large = p2p_choice(C, "nvlink", 370.8, 16384), p2p_choice(C, "nvlink", 370.8, 16385)
    assert (small.protocol, small.latency_us, small.algbw_gbs) == (
        "ll",
        pytest.approx(6.6 + 0.6),
        0.5 * 370.8,
    )
    assert (large.protocol, large.latency_us, large.algbw_gbs) == ("simple", pytest.approx(8.4 + 3.4), 370.8)
    network = p2p_choice(C, "net", 45.0, 1 << 20, floor_us=20.0)  # a long link outlasts NCCL's 14 us hop
    assert network.latency_us == pytest.approx(8.4 + 20.0)


# --- measured corrections (nccl.yaml, "Measured corrections") ---------------------------------------------


def test_measured_step_latencies_replace_nccls_where_a_sweep_gives_them():
    simple = _by(candidates(M, A100_NODE, "all_reduce", 256 * MiB), "ring", "simple")
    assert simple.latency_us == pytest.approx(8.4 + 14 * M.hop_us("nvlink", "ring", "simple", "ampere"))
    assert M.hop_us("nvlink", "ring", "simple", "ampere") > C.hop_us("nvlink", "ring", "simple")
    # an architecture without a measurement keeps NCCL's step
    assert M.hop_us("nvlink", "ring", "simple", "hopper") == C.hop_us("nvlink", "ring", "simple")
    nvls = _by(candidates(M, H100_NODE, "all_reduce", 256 * MiB), "nvls", "simple")
    assert nvls.latency_us == pytest.approx(M.hop_us("nvlink", "nvls", "simple", "hopper"))


@pytest.mark.parametrize("kind", ["all_reduce", "all_gather", "reduce_scatter"])
def test_no_collective_takes_less_than_the_measured_floor_of_its_scope(kind):
    for comm, scope in ((H100_NODE, "intra_node"), (A100_16_NODES, "inter_node")):
        floor = M.latency_floor_us[scope]
        assert floor > 0
        assert min(x.latency_us for x in candidates(M, comm, kind, 8)) >= floor
        assert choose(M, comm, kind, 8).time_us(8) >= floor
    # inside one node NCCL's own LL latency (6.6 + 7 x 0.6 us) is below the floor: the floor is the price
    assert min(x.latency_us for x in candidates(M, H100_NODE, kind, 8)) == pytest.approx(
        M.latency_floor_us["intra_node"]
    )


def test_the_corrections_only_slow_a_collective_down():
    for comm in (A100_NODE, H100_NODE, A100_16_NODES):
        for size in (4096, MiB, 64 * MiB, 1 << 30):
            assert (
                choose(M, comm, "all_reduce", size).time_us(size)
                >= choose(C, comm, "all_reduce", size).time_us(size) - 1e-9
            )
