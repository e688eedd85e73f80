"""Every network_configs preset is a cluster + network pair that validates and renders."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from astra_hetero.spec import parse_spec
from astra_hetero.topology import checked_graph, figures, write_topology
from tests.topology.files import with_workload

PRESET_DIR = Path(__file__).resolve().parents[2] / "network_configs"
PRESETS = sorted(PRESET_DIR.glob("*.yaml"))
REQUIRED = {
    "h100_2node_nvlink4_400g.yaml",
    "mixed_h100_a100.yaml",
    "mixed_with_l40s_pcie.yaml",
    "rail_optimized_128gpu.yaml",
}


def test_the_required_presets_exist_and_are_listed_in_the_readme():
    assert REQUIRED <= {p.name for p in PRESETS}
    readme = (PRESET_DIR / "README.md").read_text()
    for preset in PRESETS:
        assert preset.name in readme, preset.name


@pytest.mark.parametrize("preset", PRESETS, ids=lambda p: p.stem)
def test_preset_validates_and_renders(preset, tmp_path):
    data = yaml.safe_load(preset.read_text())
    assert set(data) == {"cluster", "network"}
    spec = parse_spec(with_workload(data))
    graph = checked_graph(spec)
    assert figures(graph).num_gpus == spec.cluster.num_gpus
    write_topology(spec, tmp_path, graph)
    assert (tmp_path / "ns3/topology.txt").is_file()


def test_rail_preset_has_128_gpus_on_8_rails():
    data = yaml.safe_load((PRESET_DIR / "rail_optimized_128gpu.yaml").read_text())
    result = figures(checked_graph(parse_spec(with_workload(data))))
    assert result.num_gpus == 128 and result.switches_by_role["rail"] == 8
