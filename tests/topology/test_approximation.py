"""The one-line notes on what ASTRA-sim's one-description-for-all-NPUs inputs flattened."""

from __future__ import annotations

import json

import pytest
import yaml

from astra_hetero import rundir
from astra_hetero.spec import parse_spec
from astra_hetero.topology import checked_graph, write_topology
from astra_hetero.topology.approximation import group_figures
from tests.conftest import node_group
from tests.topology.files import with_workload

GIB_IN_GB = 2**30 / 1e9


def spec_of(groups, **network):
    network = {"topology": "spine_leaf", "nodes_per_leaf": 2, **network}
    return parse_spec(with_workload({"cluster": {"node_groups": groups}, "network": network}))


def notes_of(tmp_path, spec) -> dict[str, str]:
    write_topology(spec, tmp_path)
    return json.loads((tmp_path / rundir.APPROXIMATIONS).read_text())


def bandwidths(root, relative):
    return [b * GIB_IN_GB for b in yaml.safe_load((root / relative).read_text())["bandwidth"]]


def test_a_homogeneous_single_node_needs_no_note(tmp_path):
    assert notes_of(tmp_path, spec_of([node_group("h100", "h100-sxm", gpus_per_node=8)])) == {}


def test_homogeneous_nodes_are_exact_in_two_dimensions_but_not_in_one(tmp_path):
    notes = notes_of(tmp_path, spec_of([node_group("h100", "h100-sxm", count=4)], nodes_per_leaf=4))
    assert set(notes) == {rundir.ANALYTICAL_NETWORK_1D}
    # The congestion-aware binary's single dimension runs NVLink traffic at the NIC's 50 GB/s per GPU.
    note = notes[rundir.ANALYTICAL_NETWORK_1D]
    assert "one network dimension" in note and "50 GB/s per GPU" in note and "h100 450" in note


def test_mixed_groups_name_the_bottleneck_written_and_every_group_figure(tmp_path):
    spec = spec_of(
        [
            node_group("h100", "h100-sxm", count=2),
            node_group("a100", "a100-80", count=2, fabric="nvlink3", nic=200),
        ]
    )
    notes = notes_of(tmp_path, spec)
    assert set(notes) == {rundir.ANALYTICAL_NETWORK, rundir.ANALYTICAL_NETWORK_1D, rundir.NS3_CONFIG}
    note = notes[rundir.ANALYTICAL_NETWORK]
    # The figures the note quotes are the ones written into network.yml.
    assert bandwidths(tmp_path, rundir.ANALYTICAL_NETWORK) == pytest.approx([300, 25], rel=1e-5)
    assert "intra-node 300 GB/s per GPU (h100 450, a100 300)" in note
    assert "scale-out 25 GB/s per GPU (h100 50, a100 25)" in note
    assert "HBM for reductions 2.039 TB/s (h100 3.35, a100 2.039)" in note
    system = json.loads((tmp_path / rundir.ANALYTICAL_SYSTEM).read_text())
    assert system["local-mem-bw"] == pytest.approx(2039)
    # ns-3 simulates every link: only the system file's single memory bandwidth is approximate.
    assert "HBM" in notes[rundir.NS3_CONFIG] and "scale-out" not in notes[rundir.NS3_CONFIG]


def test_groups_differing_only_in_gpu_type_flatten_only_the_memory_bandwidth(tmp_path):
    spec = spec_of([node_group("h100", "h100-sxm", count=2), node_group("h200", "h200", count=2)])
    notes = notes_of(tmp_path, spec)
    note = notes[rundir.ANALYTICAL_NETWORK]
    assert "HBM for reductions" in note and "intra-node" not in note and "scale-out" not in note


def test_every_note_is_one_line(tmp_path):
    spec = spec_of(
        [
            node_group("h100", "h100-sxm", count=2, gpus_per_node=8),
            node_group("l40s", "l40s", count=2, fabric="pcie4", nic=100),
        ]
    )
    for note in notes_of(tmp_path, spec).values():
        assert "\n" not in note and note.startswith("ASTRA-sim simplified this cluster: ")


def test_rails_keep_the_inter_node_dimension_off_the_spines(tmp_path):
    spec = spec_of(
        [
            node_group("h100", "h100-sxm", count=2),
            node_group("a100", "a100-80", count=2, fabric="nvlink3", nic=200),
        ],
        topology="rail_optimized",
        oversubscription=2.0,
    )
    figures = {g.name: g for g in group_figures(spec, checked_graph(spec))}
    # Dimension 1 stays on a rail, so each group keeps its NIC share, undivided by oversubscription.
    assert {name: f.scale_out_same_rail_gbytes_per_s for name, f in figures.items()} == {
        "h100": 50,
        "a100": 25,
    }
    note = notes_of(tmp_path, spec)[rundir.ANALYTICAL_NETWORK]
    assert "scale-out 25 GB/s per GPU (h100 50, a100 25)" in note
    assert bandwidths(tmp_path, rundir.ANALYTICAL_NETWORK)[1] == pytest.approx(25, rel=1e-5)
