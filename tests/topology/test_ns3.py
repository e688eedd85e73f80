"""The ns-3 files, parsed back: counts, numbering, ECN coverage, DCQCN, and self-contained paths."""

from __future__ import annotations

import json
import math

import pytest

from astra_hetero import rundir
from astra_hetero.errors import SpecError
from astra_hetero.spec import parse_spec
from astra_hetero.topology import write_topology
from tests.conftest import make_spec_data, node_group
from tests.topology.files import read_config, read_map, read_topology

SHAPES = ("single_switch", "spine_leaf", "rail_optimized")
CONFIG_PATH_KEYS = (
    "TOPOLOGY_FILE",
    "FLOW_FILE",
    "TRACE_FILE",
    "TRACE_OUTPUT_FILE",
    "FCT_OUTPUT_FILE",
    "PFC_OUTPUT_FILE",
    "QLEN_MON_FILE",
)


def render(tmp_path, name="run", **network):
    data = make_spec_data(network={"topology": "spine_leaf", "nodes_per_leaf": 2, **network})
    return render_data(tmp_path, data, name)


def render_data(tmp_path, data, name="run"):
    root = tmp_path / name
    root.mkdir()
    write_topology(parse_spec(data), root)
    return root


@pytest.mark.parametrize("topology", SHAPES)
def test_first_lines_match_the_links_and_switches_listed(tmp_path, topology):
    topo = read_topology(render(tmp_path, topology=topology) / rundir.NS3_TOPOLOGY)
    total, num_switches, num_links = topo.header
    assert num_links == len(topo.links)
    assert num_switches == len(topo.switches) == len(set(topo.switches))
    # NPUs first: ids 0..15 are the GPUs, every switch id follows them, and every id is used.
    assert sorted(topo.switches) == list(range(16, total))
    used = {n for link in topo.links for n in link[:2]}
    assert used == set(range(total))
    assert len({(min(a, b), max(a, b)) for a, b, *_ in topo.links}) == num_links  # no parallel links


def test_every_link_rate_has_ecn_entries(tmp_path):
    data = make_spec_data(network={"topology": "spine_leaf", "nodes_per_leaf": 1, "num_spines": 3})
    data["cluster"]["node_groups"].append(
        node_group("l40s", "l40s", count=2, fabric="pcie4", nic={"gbps": 100, "count": 1})
    )
    data["parallelism"] = {"tp": 1, "pp": 1, "dp": 24, "global_batch_size": 24}
    root = render_data(tmp_path, data)
    rates = {round(link[2] * 1e9) for link in read_topology(root / rundir.NS3_TOPOLOGY).links}
    config = read_config(root / rundir.NS3_CONFIG)
    assert len(rates) >= 5  # NVLink 4 and 3, PCIe, three NIC speeds, uplinks that follow from num_spines
    for key in ("KMIN_MAP", "KMAX_MAP", "PMAX_MAP"):
        assert rates <= set(read_map(config[key])), key


def test_default_ecn_thresholds_grow_with_rate_and_stay_under_the_buffer(tmp_path):
    config = read_config(render(tmp_path, ns3={"buffer_size_mb": 64}) / rundir.NS3_CONFIG)
    kmin, kmax = read_map(config["KMIN_MAP"]), read_map(config["KMAX_MAP"])
    rates = sorted(kmin)
    assert [kmin[r] for r in rates] == sorted(kmin[r] for r in rates)
    for rate in rates:
        assert 0 < kmin[rate] <= kmax[rate] <= 0.1 * 64 * 1000
    # 4 KB per Gbit/s and KMAX = 4 KMIN until KMAX reaches a tenth of the 64 MB buffer (6400 KB).
    assert (kmin[200_000_000_000], kmax[200_000_000_000]) == (800, 3200)
    assert (kmin[3_600_000_000_000], kmax[3_600_000_000_000]) == (1600, 6400)


def test_ecn_override_replaces_the_default_for_its_rate(tmp_path):
    ecn = {400: {"kmin_kb": 123, "kmax_kb": 456, "pmax": 0.5}}
    config = read_config(render(tmp_path, ns3={"ecn": ecn}) / rundir.NS3_CONFIG)
    key = 400_000_000_000
    assert (
        read_map(config["KMIN_MAP"])[key],
        read_map(config["KMAX_MAP"])[key],
        read_map(config["PMAX_MAP"])[key],
    ) == (123, 456, 0.5)


def test_ecn_override_for_an_absent_rate_names_the_field(tmp_path):
    ecn = {25: {"kmin_kb": 100, "kmax_kb": 400, "pmax": 0.2}}
    with pytest.raises(SpecError, match=r"network\.ns3\.ecn\.25.*no link runs at 25"):
        render(tmp_path, ns3={"ecn": ecn})


def test_dcqcn_is_on_with_the_specs_parameters(tmp_path):
    dcqcn = {"rate_ai_mbps": 40, "rp_timer_us": 300, "ewma_gain": 0.0625, "clamp_target_rate": True}
    config = read_config(render(tmp_path, dcqcn=dcqcn) / rundir.NS3_CONFIG)
    assert config["CC_MODE"] == ["1"]
    assert config["RATE_AI"] == ["40Mb/s"]
    assert config["RP_TIMER"] == ["300"]
    assert config["EWMA_GAIN"] == ["0.0625"]
    assert config["CLAMP_TARGET_RATE"] == ["1"]
    assert config["ERROR_RATE_PER_LINK"] == ["0"]
    assert config["ENABLE_TRACE"] == ["0"]
    assert config["BUFFER_SIZE"] == ["32"]
    assert config["PACKET_PAYLOAD_SIZE"] == ["1000"]


def test_disabled_dcqcn_leaves_no_congestion_control(tmp_path):
    config = read_config(render(tmp_path, dcqcn={"enabled": False}) / rundir.NS3_CONFIG)
    assert config["CC_MODE"] == ["12"]


def test_config_paths_are_relative_and_resolve_inside_the_run_directory(tmp_path):
    root = render(tmp_path)
    config = read_config(root / rundir.NS3_CONFIG)
    for key in CONFIG_PATH_KEYS:
        (value,) = config[key]
        assert not value.startswith("/"), key
        target = (root / value).resolve()
        assert target.is_relative_to(root.resolve()), key
        assert target.parent.is_dir(), key  # ns-3 does not create directories for its outputs
    for key in ("TOPOLOGY_FILE", "FLOW_FILE", "TRACE_FILE"):
        assert (root / config[key][0]).is_file(), key


def test_flow_trace_and_logical_topology_files(tmp_path):
    root = render(tmp_path)
    assert (root / "ns3/flow.txt").read_text().split() == ["0"]
    assert (root / "ns3/trace.txt").read_text().split() == ["0"]
    dims = json.loads((root / rundir.NS3_LOGICAL_TOPOLOGY).read_text())["logical-dims"]
    assert all(isinstance(d, str) for d in dims)
    assert math.prod(int(d) for d in dims) == 16


def test_enabled_trace_lists_every_npu(tmp_path):
    root = render(tmp_path, ns3={"enable_trace": True})
    count, *ids = (root / "ns3/trace.txt").read_text().split()
    assert int(count) == len(ids) == 16
    assert [int(i) for i in ids] == list(range(16))
    assert read_config(root / rundir.NS3_CONFIG)["ENABLE_TRACE"] == ["1"]


def test_changing_one_groups_nic_speed_changes_exactly_those_links(tmp_path):
    base = make_spec_data()
    slower = make_spec_data()
    slower["cluster"]["node_groups"][1]["nic"] = 100
    before = read_topology(render_data(tmp_path, base, "before") / rundir.NS3_TOPOLOGY)
    after = read_topology(render_data(tmp_path, slower, "after") / rundir.NS3_TOPOLOGY)
    assert before.header == after.header and before.switches == after.switches
    changed = [(b, a) for b, a in zip(before.links, after.links, strict=True) if b != a]
    # Group a100 owns GPUs 8..15 and their 8 NICs: each NIC has a GPU link and a leaf link.
    assert len(changed) == 16
    for old, new in changed:
        assert old[:2] == new[:2] and old[3:] == new[3:]
        assert (old[2], new[2]) == (200.0, 100.0)
    gpu_ends = sorted(min(b[:2]) for b, _ in changed if min(b[:2]) < 16)
    assert gpu_ends == list(range(8, 16))


def test_link_delays_come_from_the_spec(tmp_path):
    root = render(tmp_path, link_latency_ns=1500)
    topo = read_topology(root / rundir.NS3_TOPOLOGY)
    gpu_links = [link for link in topo.links if link[0] < 16 and link[2] > 1000]
    assert {link[3] for link in gpu_links} == {500.0}  # NVLink hop latency from the fabric catalog
    assert 1500.0 in {link[3] for link in topo.links}


@pytest.mark.parametrize("value", [float("inf"), float("nan"), -1.0])
def test_writers_refuse_numbers_ns3_would_misread(value):
    from astra_hetero.units import format_delay_ns, format_rate_gbps

    with pytest.raises(ValueError):
        format_delay_ns(value)
    with pytest.raises(ValueError):
        format_rate_gbps(value)
