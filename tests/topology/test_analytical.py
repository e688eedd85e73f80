"""Analytical network and system files: dimensions, bottleneck numbers, and the stated approximations."""

from __future__ import annotations

import json
import math

import pytest
import yaml

from astra_hetero import rundir
from astra_hetero.spec import parse_spec
from astra_hetero.topology import write_topology
from tests.conftest import make_spec_data, node_group
from tests.topology.files import with_workload


def render(tmp_path, groups=None, **network):
    data = make_spec_data(network={"topology": "spine_leaf", "nodes_per_leaf": 2, **network})
    if groups is not None:
        data = with_workload({"cluster": {"node_groups": groups}, "network": data["network"]})
    write_topology(parse_spec(data), tmp_path)
    return tmp_path


def network(root, relative=rundir.ANALYTICAL_NETWORK):
    """The YAML with `bandwidth` turned back into decimal GB/s, and the comment lines."""
    text = (root / relative).read_text()
    net = yaml.safe_load(text)
    net["bandwidth"] = pytest.approx([b * GIB_IN_GB for b in net["bandwidth"]], rel=1e-5)
    return net, [line for line in text.splitlines() if line.startswith("#")]


GIB_IN_GB = 2**30 / 1e9


def test_bandwidth_is_written_in_gib_per_s_because_astra_sim_multiplies_by_2_to_the_30(tmp_path):
    root = render(tmp_path, [node_group("h100", "h100-sxm", count=4)], nodes_per_leaf=4)
    raw = yaml.safe_load((root / rundir.ANALYTICAL_NETWORK).read_text())
    assert raw["bandwidth"] == pytest.approx([450 / GIB_IN_GB, 50 / GIB_IN_GB], rel=1e-5)


def test_homogeneous_cluster_has_an_intra_and_an_inter_node_dimension(tmp_path):
    root = render(tmp_path, [node_group("h100", "h100-sxm", count=4)], nodes_per_leaf=4)
    net, _ = network(root)
    assert net["topology"] == ["Switch", "Switch"]
    assert net["npus_count"] == [4, 4]
    # NVLink 4 per GPU; one 400 Gbit/s NIC per GPU = 50 GB/s; one leaf, so no spine on the path.
    assert net["bandwidth"] == [450, 50]
    # NVLink hop 500 ns; (GPU-NIC 100 + NIC-leaf 500) twice = 1200 ns one way, over a Switch's 2 links.
    assert net["latency"] == [500, 600]


def test_mixed_groups_take_the_bottleneck_and_say_so(tmp_path):
    net, comments = network(render(tmp_path))
    assert math.prod(net["npus_count"]) == 16
    assert net["bandwidth"] == [300, 25]  # NVLink 3 and 200 Gbit/s A100 NICs are the slower ones
    # GPU-NIC 100, NIC-leaf-spine-leaf-NIC 4 x 500, NIC-GPU 100, over the 2 links of a Switch.
    assert net["latency"][1] == pytest.approx((100 + 4 * 500 + 100) / 2)
    assert any("minimum bandwidth" in line for line in comments)


def test_oversubscription_divides_the_inter_node_bandwidth(tmp_path):
    root = render(tmp_path, [node_group("h100", "h100-sxm", count=4)], oversubscription=2.0)
    net, comments = network(root)
    assert net["bandwidth"] == [450, 50 / 2]
    assert any("oversubscription" in line for line in comments)


def test_each_group_is_divided_by_its_own_leafs_oversubscription(tmp_path):
    # 2:1 gives the H100 leaf (3200 Gbit/s down) 4 spines at 400 Gbit/s; the A100 leaf (1600 down)
    # reaches the same 4 spines, so it is not oversubscribed: min(400 / 2, 200 / 1) = 200 Gbit/s.
    net, _ = network(render(tmp_path, oversubscription=2.0))
    assert net["bandwidth"] == [300, 25]


def test_rail_traffic_between_nodes_stays_on_its_rail(tmp_path):
    net, _ = network(render(tmp_path, topology="rail_optimized", oversubscription=2.0))
    assert net["bandwidth"] == [300, 25]
    assert net["latency"][1] == pytest.approx((100 + 2 * 500 + 100) / 2)  # GPU-NIC-rail-NIC-GPU


def test_groups_with_different_gpus_per_node_fall_back_to_one_dimension(tmp_path):
    groups = [
        node_group("h100", "h100-sxm", count=2, gpus_per_node=8),
        node_group("l40s", "l40s", count=2, fabric="pcie4"),
    ]
    net, comments = network(render(tmp_path, groups))
    assert net["npus_count"] == [24]
    assert any("gpus_per_node" in line for line in comments)


def test_single_node_is_one_fabric_dimension(tmp_path):
    net, _ = network(render(tmp_path, [node_group("h100", "h100-sxm", count=1, gpus_per_node=8)]))
    assert net["npus_count"] == [8] and net["bandwidth"] == [450]


@pytest.mark.parametrize("topology", ["single_switch", "spine_leaf", "rail_optimized"])
def test_one_dimensional_variant_for_the_congestion_aware_binary(tmp_path, topology):
    root = render(tmp_path, topology=topology)
    net, comments = network(root, rundir.ANALYTICAL_NETWORK_1D)
    assert net["topology"] == ["Switch"] and net["npus_count"] == [16]
    assert net["bandwidth"] == [25]
    assert comments


def test_system_files_match_their_networks(tmp_path):
    root = render(tmp_path)
    for net_file, sys_file in (
        (rundir.ANALYTICAL_NETWORK, rundir.ANALYTICAL_SYSTEM),
        (rundir.ANALYTICAL_NETWORK_1D, rundir.ANALYTICAL_SYSTEM_1D),
    ):
        dims = len(network(root, net_file)[0]["npus_count"])
        system = json.loads((root / sys_file).read_text())
        for collective in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all"):
            assert system[f"{collective}-implementation"] == ["ring"] * dims
        assert system["roofline-enabled"] == 0
        for key in (
            "scheduling-policy",
            "endpoint-delay",
            "active-chunks-per-dimension",
            "preferred-dataset-splits",
            "collective-optimization",
            "local-mem-bw",
            "peak-perf",
            "boost-mode",
        ):
            assert key in system, key
    assert json.loads((root / rundir.REMOTE_MEMORY).read_text()) == {"memory-type": "NO_MEMORY_EXPANSION"}
