"""Events resolved against the cluster graph: the topology.txt link lines and ranks each one touches."""

from __future__ import annotations

import json

import pytest

from astra_hetero.dynamics.selection import resolve_events
from astra_hetero.errors import SpecError
from astra_hetero.pipeline import build_run_dir
from astra_hetero.spec import parse_spec
from astra_hetero.topology import build_cluster_graph
from astra_hetero.topology.ns3 import _ordered_edges
from tests.conftest import make_spec_data

# make_spec_data: h100 nodes 0-1 (ranks 0-7), a100 nodes 2-3 (ranks 8-15), 4 GPUs each, one NIC per
# GPU, two nodes per leaf


def resolved(*events, network=None):
    data = make_spec_data(dynamics=list(events))
    if network is not None:
        data["network"] = network
    spec = parse_spec(data)
    graph = build_cluster_graph(spec)
    lines = [(u, v, attrs) for u, v, attrs in _ordered_edges(graph)]
    return resolve_events(spec, graph), graph, lines


def link(kind, **extra):
    return {"event": "link_rate", "kind": kind, "factor": 0.5, **extra}


def test_a_nodes_nic_links_are_its_gpu_nic_and_nic_leaf_links():
    [event], graph, lines = resolved(link("nic", node_group="a100", node=0))
    assert event["ranks"] == [8, 9, 10, 11]
    chosen = [lines[j] for j in event["links"]]
    assert len(chosen) == 8 and all(attrs["kind"] == "nic" for _, _, attrs in chosen)
    hosts = {graph.nodes[n].get("host") for u, v, _ in chosen for n in (u, v)} - {None}
    assert hosts == {2}


def test_intra_selects_the_nvlink_of_every_node_of_a_group():
    [event], _, lines = resolved(link("intra", node_group="h100"))
    assert event["ranks"] == list(range(8))
    assert len(event["links"]) == 8 and {lines[j][2]["kind"] for j in event["links"]} == {"nvlink"}


def test_uplinks_to_one_spine_from_every_leaf():
    network = {"topology": "spine_leaf", "nodes_per_leaf": 2, "num_spines": 2}
    [event], graph, lines = resolved(link("uplink", spine=0), network=network)
    chosen = [lines[j] for j in event["links"]]
    assert len(chosen) == 2  # two leaves, one link each to spine 0
    for u, v, attrs in chosen:
        assert attrs["kind"] == "uplink"
        assert {graph.nodes[u]["role"], graph.nodes[v]["role"]} == {"leaf", "spine"}
        assert 0 in {graph.nodes[u].get("index"), graph.nodes[v].get("index")}
    assert event["ranks"] == list(range(16))


def test_uplinks_of_one_groups_leaves_only():
    network = {"topology": "spine_leaf", "nodes_per_leaf": 2, "num_spines": 2}
    [event], _, _ = resolved(link("uplink", node_group="a100"), network=network)
    assert len(event["links"]) == 2 and event["ranks"] == list(range(8, 16))


def test_a_selection_that_matches_nothing_is_refused():
    with pytest.raises(SpecError) as info:
        resolved(link("uplink"), network={"topology": "single_switch"})
    assert info.value.field == "dynamics[0]" and "selects no uplink link" in str(info.value)


def test_a_spine_index_beyond_the_spines_is_refused():
    with pytest.raises(SpecError) as info:
        resolved(
            link("uplink", spine=7), network={"topology": "spine_leaf", "nodes_per_leaf": 2, "num_spines": 2}
        )
    assert info.value.field == "dynamics[0].spine"


def test_times_are_nanoseconds_and_other_events_name_their_ranks():
    events, _, _ = resolved(
        {
            "event": "device_slowdown",
            "node_group": "h100",
            "node": 1,
            "factor": 0.5,
            "start_ms": 1.5,
            "end_ms": 2,
        },
        {
            "event": "background_traffic",
            "from": {"node_group": "a100"},
            "to": {"node_group": "h100", "node": 1},
            "gbps": 50,
        },
        {"event": "jitter", "sigma": 0.1, "seed": 3},
    )
    slow, background, jitter = events
    assert (slow["start_ns"], slow["end_ns"], slow["ranks"]) == (1_500_000, 2_000_000, [4, 5, 6, 7])
    assert (background["src_rank"], background["dst_rank"], background["end_ns"]) == (8, 4, None)
    assert jitter["ranks"] == list(range(16)) and jitter["seed"] == 3


def test_the_run_directory_carries_the_resolved_events(tmp_path):
    data = make_spec_data(dynamics=[link("nic", node_group="h100", node=0)], iterations=3)
    build_run_dir(parse_spec(data), tmp_path / "run")
    document = json.loads((tmp_path / "run/dynamics.json").read_text())
    assert document["iterations"] == 3 and document["events"][0]["ranks"] == [0, 1, 2, 3]
    build_run_dir(parse_spec(make_spec_data()), tmp_path / "static")
    assert not (tmp_path / "static/dynamics.json").exists()
