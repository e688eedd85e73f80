"""The ideal collective model as ASTRA-sim runs it (`network.astrasim`), against real ASTRA-sim.

Every expected time below was printed by the real ASTRA-sim 518bd51 congestion-unaware analytical
binary running ASTRA-sim's own 1 MiB microbenchmark traces (examples/workload/microbenchmarks) on
ASTRA-sim's own network and system files (examples/ and inputs/; `direct2` and `halvingDoubling`
are Ring_4chunks.json with those implementations). The model must reproduce them to the cycle.
"""

from __future__ import annotations

import json
import math

import pytest

from astra_hetero.astrasim_inputs.analytical import AnalyticalNetwork, Dimension, NetworkDelays
from astra_hetero.astrasim_inputs.system import read_system
from astra_hetero.backends.embedded.network import astrasim_phases
from astra_hetero.backends.embedded.network.astrasim import AstraSimCommPlanner
from astra_hetero.backends.embedded.network.astrasim_streams import Step, collective_ns, num_chunks
from astra_hetero.errors import RunDirError

MIB = 1 << 20
NETWORKS = {
    "Ring_4npus": (Dimension("Ring", 4, 50.0, 500.0),),
    "Ring_8npus": (Dimension("Ring", 8, 50.0, 500.0),),
    "Ring_16npus": (Dimension("Ring", 16, 50.0, 500.0),),
    "tpu_v3_8": (Dimension("Ring", 8, 80.0, 1000.0),),
    "hgx_h100_16gpu": (Dimension("Switch", 8, 400.0, 936.25), Dimension("Ring", 2, 50.0, 1000.0)),
}
SYSTEMS = {
    "Ring_4chunks": {"endpoint-delay": 10, "active-chunks-per-dimension": 1, "local-mem-bw": 1600},
    "HGX-H100-validated": {"endpoint-delay": 10, "active-chunks-per-dimension": 2, "local-mem-bw": 3350},
    "hgx_h100_16gpu": {"endpoint-delay": 1, "active-chunks-per-dimension": 2, "local-mem-bw": 3350},
    "direct2": {
        "endpoint-delay": 10,
        "active-chunks-per-dimension": 1,
        "local-mem-bw": 1600,
        "a2a": "direct2",
    },
    "halvingDoubling": {
        "endpoint-delay": 10,
        "active-chunks-per-dimension": 1,
        "local-mem-bw": 1600,
        "others": "halvingDoubling",
    },
}
REAL = [  # network, system, collective, real ASTRA-sim cycles for 1 MiB
    ("Ring_4npus", "Ring_4chunks", "all_reduce", 43000),
    ("Ring_4npus", "Ring_4chunks", "all_gather", 64744),
    ("Ring_4npus", "Ring_4chunks", "reduce_scatter", 22240),
    ("Ring_4npus", "Ring_4chunks", "all_to_all", 41560),
    ("tpu_v3_8", "HGX-H100-validated", "all_reduce", 39346),
    ("tpu_v3_8", "HGX-H100-validated", "all_gather", 56874),
    ("tpu_v3_8", "HGX-H100-validated", "reduce_scatter", 19872),
    ("tpu_v3_8", "HGX-H100-validated", "all_to_all", 77916),
    ("hgx_h100_16gpu", "hgx_h100_16gpu", "all_reduce", 54954),
    ("hgx_h100_16gpu", "hgx_h100_16gpu", "all_gather", 49202),
    ("hgx_h100_16gpu", "hgx_h100_16gpu", "reduce_scatter", 28985),
    ("hgx_h100_16gpu", "hgx_h100_16gpu", "all_to_all", 112589),
    ("Ring_8npus", "direct2", "all_to_all", 25960),
    ("Ring_8npus", "halvingDoubling", "all_reduce", 63168),
    ("Ring_8npus", "halvingDoubling", "all_gather", 150872),
    ("Ring_8npus", "halvingDoubling", "reduce_scatter", 31964),
    ("Ring_16npus", "halvingDoubling", "all_reduce", 97808),
]


def planner(tmp_path, network: str, system: str, **extra) -> AstraSimCommPlanner:
    dims = NETWORKS[network]
    settings = dict(SYSTEMS[system])
    a2a, others = settings.pop("a2a", "ring"), settings.pop("others", "ring")
    data = {
        "scheduling-policy": "LIFO",
        "preferred-dataset-splits": 4,
        "collective-optimization": "localBWAware",
        **{
            f"{k}-implementation": [others] * len(dims)
            for k in ("all-reduce", "all-gather", "reduce-scatter")
        },
        "all-to-all-implementation": [a2a] * len(dims),
        **settings,
        **extra,
    }
    path = tmp_path / "system.json"
    path.write_text(json.dumps(data))
    network_model = AnalyticalNetwork(dims)
    return AstraSimCommPlanner(None, read_system(path), [d.npus for d in dims], NetworkDelays(network_model))


@pytest.mark.parametrize(("network", "system", "kind", "cycles"), REAL)
def test_collectives_take_real_astrasims_time_to_the_cycle(tmp_path, network, system, kind, cycles):
    model = planner(tmp_path, network, system)
    (phase,) = model.collective(tuple(range(model.num_npus)), kind, MIB)
    assert phase.latency_ns == cycles and not phase.links


def test_ring_all_reduce_closed_form(tmp_path):
    """4 chunks of 256 KiB one after another; each: e + 2(N−1)·(hop + e) + (N−1)·3·⌊msg/mem⌋ with
    hop = 500 + 65536 / (50 GiB/s) = 1720 ns (truncated) and 3·⌊65536 B / 1600 GB/s⌋ = 3·40 ns."""
    model = planner(tmp_path, "Ring_4npus", "Ring_4chunks")
    assert model.collective((0, 1, 2, 3), "all_reduce", MIB)[0].latency_ns == 4 * (10 + 6 * 1730 + 3 * 120)


def test_comm_group_ring_has_the_fixed_local_endpoint_delay(tmp_path):
    """A group smaller than the job is one ring of its members with ASTRA-sim's 10 ns local endpoint
    delay (this system file says 1 ns). 64 KiB all-gather: 4 chunks of 16 KiB (each NPU's input), two
    at a time; each chunk e + 3·(hop + e) on the 8-NPU Switch (two hops of 936.25 ns at 400 GiB/s)."""
    model = planner(tmp_path, "hgx_h100_16gpu", "hgx_h100_16gpu")
    hop = int(2 * 936.25 + 16384 / (400 * 2**30 / 1e9))
    chunk = 10 + 3 * (hop + 10)
    assert model.collective((0, 1, 2, 3), "all_gather", 65536)[0].latency_ns == 2 * chunk


def test_transfer_is_one_message_on_the_first_differing_dimension(tmp_path):
    model = planner(tmp_path, "hgx_h100_16gpu", "hgx_h100_16gpu")
    # NPU 0 -> 8 differ in dimension 1 only (a Ring of 2: one hop of 1000 ns at 50 GiB/s)
    assert model.transfer(0, 8, MIB)[0].latency_ns == int(1000 + MIB / (50 * 2**30 / 1e9))
    # NPU 3 -> 12 differ in both: the first, a Switch (two hops of 936.25 ns at 400 GiB/s)
    assert model.transfer(3, 12, MIB)[0].latency_ns == int(2 * 936.25 + MIB / (400 * 2**30 / 1e9))


def test_active_chunks_run_side_by_side_on_a_congestion_free_dimension():
    steps = (Step(0, 100),)
    assert collective_ns(4, steps, 1) == 400
    assert collective_ns(4, steps, 2) == 200
    # three phases over two queues: the middle queue is the bottleneck once the pipeline fills
    assert collective_ns(4, (Step(0, 10), Step(1, 100), Step(0, 10)), 1) == 10 + 4 * 100 + 10


@pytest.mark.parametrize(
    ("size", "splits", "npus", "gather", "expected"),
    [
        (MIB, 4, 16, False, (4, MIB // 4)),
        (10, 4, 2, False, (5, 2)),  # every chunk is whole: 5 chunks of 2 bytes carry 10
        (10, 4, 16, False, (4, 16)),  # at least one byte per NPU: 4 chunks of 16
        (10, 4, 16, True, (5, 2)),  # all-gather chunks are not rounded up
        (3, 4, 16, True, (0, 0)),  # ASTRA-sim would loop forever on empty chunks
    ],
)
def test_chunking(size, splits, npus, gather, expected):
    assert num_chunks(size, splits, npus, gather) == expected


def test_ring_with_uneven_links_is_timed_npu_by_npu():
    """A comm-group ring over two dimensions: its slow link delays every NPU only once per lap, so it
    finishes before a ring of slow links and after a ring of fast ones."""
    network = AnalyticalNetwork((Dimension("Switch", 2, 400.0, 100.0), Dimension("Switch", 2, 50.0, 1000.0)))
    delays = NetworkDelays(network)
    ring = (0, 1, 3, 2)  # 0->1 and 3->2 on dimension 0, 1->3 and 2->0 on dimension 1

    def none(size: int) -> int:
        return 0

    uneven = astrasim_phases.ring_phase("all_gather", ring, MIB, delays, 10, none)
    slow = astrasim_phases.ring_phase("all_gather", (0, 2), MIB, delays, 10, none)
    fast = astrasim_phases.ring_phase("all_gather", (0, 1), MIB, delays, 10, none)
    assert 3 * (fast - 10) + 10 < uneven < 3 * (slow - 10) + 10


def test_missing_local_mem_bw_is_named_when_a_reduction_needs_it(tmp_path):
    model = planner(tmp_path, "Ring_4npus", "Ring_4chunks", **{"local-mem-bw": 0})
    assert model.collective((0, 1, 2, 3), "all_gather", MIB)[0].latency_ns > 0  # no reduction
    with pytest.raises(RunDirError, match="local-mem-bw is missing"):
        model.collective((0, 1, 2, 3), "all_reduce", MIB)


def test_network_address_is_astrasims():
    network = AnalyticalNetwork(tuple(NETWORKS["hgx_h100_16gpu"]))
    assert network.address(13) == (5, 1) and network.num_npus == 16
    assert math.isclose(network.dims[0].bytes_per_ns, 400 * 2**30 / 1e9)
