"""A scale-up domain larger than a server (GB200 NVL72: 18 trays of 4 GPUs on one NVLink fabric): TP
groups may span its trays, and every backend's files show one switch fabric per domain."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from astra_hetero.errors import SpecError
from astra_hetero.pipeline import build_run_dir, execute
from astra_hetero.spec import parse_spec
from astra_hetero.spec.devices import enumerate_devices
from astra_hetero.topology import checked_graph
from astra_hetero.topology.schematic import schematic
from tests.conftest import TINY_MODEL
from tests.topology.files import read_topology

TRAYS, PER_TRAY, DOMAIN = 8, 4, 16  # two domains of four trays


def nvl_spec(tp: int = 16, domain: int | None = DOMAIN, **parallelism) -> dict:
    group = {
        "name": "gb200",
        "count": TRAYS,
        "gpus_per_node": PER_TRAY,
        "gpu": "gb200",
        "intra_node_fabric": "nvlink5",
        "nic": 400,
    }
    if domain is not None:
        group["scale_up_domain"] = {"gpus": domain}
    num_gpus = TRAYS * PER_TRAY
    return {
        "model": {**TINY_MODEL, "num_heads": 32, "num_kv_heads": 32},
        "cluster": {"node_groups": [group]},
        "network": {"topology": "single_switch"},
        "parallelism": {
            "tp": tp,
            "pp": 1,
            "dp": num_gpus // tp,
            "global_batch_size": 2 * num_gpus // tp,
            **parallelism,
        },
    }


def test_tp_may_span_the_trays_of_a_domain_but_not_two_domains():
    parse_spec(nvl_spec(tp=16))
    with pytest.raises(SpecError) as across_nodes:
        parse_spec(nvl_spec(tp=8, domain=None))
    assert across_nodes.value.field == "cluster.node_groups[0].gpus_per_node"
    with pytest.raises(SpecError) as across_domains:
        parse_spec(nvl_spec(tp=32))
    assert across_domains.value.field == "cluster.node_groups[0].scale_up_domain.gpus"


@pytest.mark.parametrize(("domain", "reason"), [(6, "multiple of gpus_per_node"), (24, "do not split")])
def test_a_domain_holds_whole_nodes_and_the_group_whole_domains(domain, reason):
    with pytest.raises(SpecError, match=reason):
        parse_spec(nvl_spec(tp=4, domain=domain))


def test_devices_count_domains_and_their_local_indices():
    devices = enumerate_devices(parse_spec(nvl_spec()).cluster)
    assert [d.domain for d in devices] == [0] * DOMAIN + [1] * DOMAIN
    assert [d.domain_local for d in devices] == list(range(DOMAIN)) * 2
    assert [d.node for d in devices[:DOMAIN]] == [0] * 4 + [1] * 4 + [2] * 4 + [3] * 4


def test_the_cluster_graph_has_one_nvlink_switch_per_domain():
    graph = checked_graph(parse_spec(nvl_spec()))
    switches = [n for n, role in graph.nodes(data="role") if role == "intra"]
    assert len(switches) == 2
    for switch in switches:
        gpus = [n for n in graph.neighbors(switch) if graph.nodes[n]["role"] == "gpu"]
        assert len(gpus) == DOMAIN
        assert {graph.edges[switch, g]["kind"] for g in gpus} == {"nvlink"}
        assert {graph.edges[switch, g]["rate_gbps"] for g in gpus} == {900 * 8}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("nvl") / "run"
    return build_run_dir(parse_spec(nvl_spec(tp=16)), root).root


def test_ns3_topology_links_every_gpu_of_a_domain_to_one_switch(run_dir):
    topo = read_topology(run_dir / "ns3/topology.txt")
    kinds = json.loads((run_dir / "ns3/link_kinds.json").read_text())["kinds"]
    gpus = set(range(2 * DOMAIN))
    by_switch: dict[int, set[int]] = {}
    for (src, dst, *_), kind in zip(topo.links, kinds, strict=True):
        if kind == "nvlink":
            gpu, switch = (src, dst) if src in gpus else (dst, src)
            by_switch.setdefault(switch, set()).add(gpu)
    assert sorted(map(sorted, by_switch.values())) == [list(range(DOMAIN)), list(range(DOMAIN, 2 * DOMAIN))]


def test_analytical_dimension_0_is_the_domain(run_dir):
    network = yaml.safe_load((run_dir / "analytical/network.yml").read_text())
    assert network["npus_count"] == [DOMAIN, 2]
    system = json.loads((run_dir / "analytical/system.json").read_text())
    assert len(system["all-reduce-implementation"]) == 2


def test_the_manifest_and_the_nccl_model_see_one_machine_per_domain(run_dir):
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert [r["scale_up_domain"] for r in manifest["ranks"]] == [0] * DOMAIN + [1] * DOMAIN
    result = execute(run_dir, "embedded")
    tp = [c for c in result.meta["nccl_choices"] if c["num_ranks"] == 16]
    assert tp and {c["num_nodes"] for c in tp} == {1}


def test_nvls_prices_a_large_all_reduce_across_the_trays_of_a_domain(tmp_path):
    """Without sequence parallelism TP all-reduces the activations: megabytes, where NCCL takes NVLS
    on an NVLink-switch domain (Blackwell), as it does inside one NVSwitch node."""
    spec = parse_spec(nvl_spec(tp=16, micro_batch_size=8, global_batch_size=16))
    result = execute(build_run_dir(spec, tmp_path / "run").root, "embedded")
    tp = [c for c in result.meta["nccl_choices"] if c["type"] == "all_reduce" and c["num_ranks"] == 16]
    big = [c for c in tp if c["bytes"] >= 1 << 24]
    assert big and {c["algorithm"] for c in big} == {"nvls"}


def test_the_schematic_draws_a_domain(run_dir):
    spec = parse_spec(nvl_spec())
    drawing = schematic(checked_graph(spec))
    (group,) = [f for f in drawing.frames if f.style == "group"]
    assert "scale-up domains of 4 nodes (16 GPUs)" in group.label


BIN_DIR = os.environ.get("ASTRA_SIM_BIN_DIR")


@pytest.mark.integration
@pytest.mark.skipif(not BIN_DIR, reason="set ASTRA_SIM_BIN_DIR to a directory holding ASTRA-sim binaries")
@pytest.mark.parametrize("backend", ["analytical", "analytical-unaware"])
def test_real_analytical_binaries_run_a_multi_tray_domain(tmp_path, backend):
    from astra_hetero.backends.astrasim.command import FLAVORS

    binary = Path(BIN_DIR or "") / FLAVORS[backend].binary_name
    if not os.access(binary, os.X_OK):
        pytest.skip(f"{binary} is not an executable file")
    spec = parse_spec({**nvl_spec(tp=16), "collectives": {"model": "ideal"}})
    root = build_run_dir(spec, tmp_path / "run").root
    result = execute(root, backend, timeout_s=1800)
    embedded = execute(root, "embedded", force=True)
    assert result.num_ranks == 2 * DOMAIN and result.iteration_time_us > 0
    ideal = embedded.iteration_time_us
    print(f"\n{backend}: {result.iteration_time_us:.1f} us, embedded (ideal) {ideal:.1f} us")
