"""The cluster graph: numbering, reachability, and the sizes each network shape must have."""

from __future__ import annotations

import math
from itertools import combinations

import networkx as nx
import pytest

from astra_hetero.errors import InfeasiblePlan
from astra_hetero.spec import parse_spec
from astra_hetero.spec.devices import enumerate_devices
from astra_hetero.topology import build_cluster_graph, figures
from astra_hetero.topology.cluster import gpu_ids, switch_ids
from astra_hetero.topology.figures import check_connected
from tests.conftest import make_spec_data, node_group

SHAPES = ("single_switch", "spine_leaf", "rail_optimized")


def graph_for(topology: str = "spine_leaf", groups=None, **network) -> nx.Graph:
    data = make_spec_data(network={"topology": topology, "nodes_per_leaf": 2, **network})
    if groups is not None:
        data["cluster"] = {"node_groups": groups}
        num_gpus = sum(g["count"] * g["gpus_per_node"] for g in groups)
        data["parallelism"] = {"tp": 1, "pp": 1, "dp": num_gpus, "global_batch_size": num_gpus}
    return build_cluster_graph(parse_spec(data))


def reachable_gpus(graph: nx.Graph, source: int) -> set[int]:
    """GPUs reachable from `source` when only switches forward (ns-3 hosts never do)."""
    seen, frontier, gpus = {source}, [source], set()
    while frontier:
        node = frontier.pop()
        for nbr in graph.neighbors(node):
            if nbr in seen:
                continue
            seen.add(nbr)
            if graph.nodes[nbr]["role"] == "gpu":
                gpus.add(nbr)
            else:
                frontier.append(nbr)
    return gpus


@pytest.mark.parametrize("topology", SHAPES)
def test_gpus_are_the_first_ids_in_rank_order(topology, spec):
    graph = graph_for(topology)
    devices = enumerate_devices(spec.cluster)
    assert gpu_ids(graph) == list(range(len(devices)))
    for device in devices:
        node = graph.nodes[device.rank]
        assert (node["host"], node["local"], node["group"]) == (
            device.node,
            device.local_gpu,
            device.group_name,
        )
    assert min(switch_ids(graph)) == len(devices)


@pytest.mark.parametrize("topology", SHAPES)
@pytest.mark.parametrize("nic", [400, {"gbps": 200, "count": 1}, {"gbps": 100, "count": 8}])
def test_every_gpu_pair_is_connected_through_switches(topology, nic):
    groups = [
        node_group("h100", "h100-sxm", count=3, nic=nic),
        node_group("l40s", "l40s", count=2, fabric="pcie4", nic=100),
    ]
    graph = graph_for(topology, groups)
    gpus = set(gpu_ids(graph))
    for gpu in gpus:
        assert reachable_gpus(graph, gpu) == gpus - {gpu}
    check_connected(graph)


@pytest.mark.parametrize("topology", SHAPES)
def test_gpus_of_one_node_have_only_the_intra_node_path_as_shortest(topology):
    """No hop-count tie between the NVSwitch and the NIC path, so ECMP keeps intra-node traffic on NVLink."""
    graph = graph_for(topology)
    forwarding = nx.Graph(graph.subgraph(switch_ids(graph) + [0, 1]))
    for path in nx.all_shortest_paths(forwarding, 0, 1):
        assert [graph.nodes[n]["role"] for n in path] == ["gpu", "intra", "gpu"]


def test_intra_node_links_carry_the_groups_fabric(spec):
    graph = graph_for(
        groups=[
            node_group("h100", "h100-sxm", count=2),
            node_group("l40s", "l40s", count=2, fabric="pcie4", nic=100),
        ]
    )
    for gpu in gpu_ids(graph):
        (intra,) = [n for n in graph.neighbors(gpu) if graph.nodes[n]["role"] == "intra"]
        edge = graph.edges[gpu, intra]
        expected = (
            (3600.0, 500.0, "nvlink") if graph.nodes[gpu]["group"] == "h100" else (256.0, 1000.0, "pcie")
        )
        assert (edge["rate_gbps"], edge["latency_ns"], edge["kind"]) == expected


def test_shared_nics_hang_off_the_intra_node_switch():
    graph = graph_for(
        groups=[node_group("l40s", "l40s", count=2, fabric="pcie4", nic={"gbps": 200, "count": 2})]
    )
    nics = [n for n, role in graph.nodes(data="role") if role == "nic"]
    assert len(nics) == 4
    for nic in nics:
        roles = sorted(graph.nodes[n]["role"] for n in graph.neighbors(nic))
        assert roles == ["intra", "leaf"]
        assert all(graph.edges[nic, n]["rate_gbps"] == 200 for n in graph.neighbors(nic))


@pytest.mark.parametrize(
    ("nodes", "oversubscription", "spines", "uplink"),
    [
        # two leaves of 2 nodes x 4 GPUs x 400 Gbit/s = 3200 Gbit/s down each: at most one spine per
        # leaf (at least two), the uplinks to each bundled into one faster link
        (4, 1.0, 2, 1600),
        (4, 2.0, 2, 800),
        (4, 3.0, 2, 534),
        (4, 8.0, 1, 400),  # 400 Gbit/s up per leaf: one NIC's worth, one spine
        # eight leaves: as many spines as a leaf has NIC-rate uplinks to fill, at the NIC's rate
        (16, 1.0, 8, 400),
        (16, 2.0, 4, 400),
    ],
)
def test_spine_count_follows_oversubscription_and_stays_below_the_leaf_count(
    nodes, oversubscription, spines, uplink
):
    groups = [node_group("h100", "h100-sxm", count=nodes)]
    graph = graph_for(groups=groups, oversubscription=oversubscription)
    assert figures(graph).switches_by_role["spine"] == spines
    assert {d["rate_gbps"] for _, _, d in graph.edges(data=True) if d["kind"] == "uplink"} == {uplink}
    for leaf in (n for n, role in graph.nodes(data="role") if role == "leaf"):
        up = sum(d["rate_gbps"] for _, _, d in graph.edges(leaf, data=True) if d["kind"] == "uplink")
        assert 3200 / up <= oversubscription  # the bandwidth asked for, whatever the spine count


def test_a_four_node_spine_leaf_cluster_gets_two_spines_not_sixteen():
    groups = [node_group("h100", "h100-sxm", count=4, gpus_per_node=8)]  # leaves of 16 x 400G NICs
    graph = graph_for(groups=groups)
    assert figures(graph).switches_by_role["spine"] == 2
    assert figures(graph).bisection_gbps == pytest.approx(16 * 400)  # full bisection kept


def test_num_spines_override_sets_the_uplink_rate():
    graph = graph_for(groups=[node_group("h100", "h100-sxm", count=4)], num_spines=3, oversubscription=2.0)
    uplinks = [d for _, _, d in graph.edges(data=True) if d["kind"] == "uplink"]
    assert len(uplinks) == 2 * 3
    assert {d["rate_gbps"] for d in uplinks} == {math.ceil(3200 / 2 / 3)}


def test_uplink_override_sets_the_spine_count():
    graph = graph_for(groups=[node_group("h100", "h100-sxm", count=4)], uplink_gbps=800)
    assert figures(graph).switches_by_role["spine"] == 4


def test_leaves_do_not_mix_node_groups():
    graph = graph_for()  # 2 H100 nodes then 2 A100 nodes, nodes_per_leaf 2
    for leaf in (n for n, role in graph.nodes(data="role") if role == "leaf"):
        groups = {graph.nodes[n]["group"] for n in graph.neighbors(leaf) if graph.nodes[n]["role"] == "nic"}
        assert len(groups) == 1


def test_rail_switch_i_serves_gpu_i_of_every_node():
    graph = graph_for("rail_optimized")
    for gpu in gpu_ids(graph):
        (nic,) = [n for n in graph.neighbors(gpu) if graph.nodes[n]["role"] == "nic"]
        (rail,) = [n for n in graph.neighbors(nic) if graph.nodes[n]["role"] == "rail"]
        assert graph.nodes[rail]["index"] == graph.nodes[gpu]["local"]


def test_changing_one_groups_nic_changes_exactly_its_nic_links():
    slow = [
        node_group("h100", "h100-sxm", count=2),
        node_group("a100", "a100-80", count=2, fabric="nvlink3", nic=100),
    ]
    before, after = graph_for(), graph_for(groups=slow)
    assert set(before.edges) == set(after.edges)
    changed = {e for e in before.edges if before.edges[e] != after.edges[e]}
    a100_nics = {n for n, d in before.nodes(data=True) if d["role"] == "nic" and d["group"] == "a100"}
    assert changed == {e for e in before.edges if a100_nics & set(e)}
    assert {after.edges[e]["rate_gbps"] for e in changed} == {100}


def test_figures_closed_forms():
    # single switch, 2 H100 + 2 A100 nodes of 4 GPUs: per node 1 intra + 4 NICs, plus one core switch.
    result = figures(graph_for("single_switch"))
    assert (result.num_gpus, result.num_switches, result.num_nodes) == (16, 4 * 5 + 1, 37)
    assert result.num_links == 16 + 16 + 16  # GPU-fabric, GPU-NIC, NIC-switch
    assert result.links_by_kind == {"nvlink": 16, "nic": 32}
    # The first half is the H100 nodes: 8 GPUs x 400 Gbit/s; the A100 half could take 8 x 200 only.
    assert result.bisection_gbps == pytest.approx(8 * 200)
    per_gpu = {i.group: (i.scale_up_gbps, i.scale_out_gbps) for i in result.injection}
    assert per_gpu == {"h100": (3600.0, 400.0), "a100": (2400.0, 200.0)}


def test_bisection_sees_an_oversubscribed_spine():
    graph = graph_for(groups=[node_group("h100", "h100-sxm", count=4)], oversubscription=4.0)
    assert figures(graph).bisection_gbps == pytest.approx(3200 / 4)


def test_a_disconnected_network_is_rejected():
    graph = graph_for()
    graph.remove_nodes_from([n for n, role in list(graph.nodes(data="role")) if role == "spine"])
    with pytest.raises(InfeasiblePlan, match="disconnected"):
        check_connected(graph)


def test_gpu_pairs_across_every_shape_reach_each_other_in_a_one_gpu_node_cluster():
    groups = [node_group("solo", "h100-sxm", count=3, gpus_per_node=1)]
    for topology in SHAPES:
        graph = graph_for(topology, groups)
        check_connected(graph)
        assert all(reachable_gpus(graph, a) >= {b} for a, b in combinations(gpu_ids(graph), 2))
