"""ns3/link_kinds.json: the kind of every topology.txt link, line by line, for the NCCL model."""

from __future__ import annotations

import json

from astra_hetero import rundir
from astra_hetero.spec import parse_spec
from astra_hetero.topology import write_topology
from tests.conftest import make_spec_data, node_group
from tests.topology.files import read_topology


def test_every_topology_line_has_its_kind(tmp_path):
    data = make_spec_data(
        cluster={
            "node_groups": [
                node_group("h100", "h100-sxm", count=2),
                node_group("l40s", "l40s", count=2, fabric="pcie4", nic={"gbps": 200, "count": 2}),
            ]
        },
        network={"topology": "spine_leaf", "nodes_per_leaf": 2},
    )
    write_topology(parse_spec(data), tmp_path)
    links = read_topology(tmp_path / rundir.NS3_TOPOLOGY).links
    kinds = json.loads((tmp_path / rundir.NS3_LINK_KINDS).read_text())["kinds"]
    assert len(kinds) == len(links)
    num_gpus = 16
    for (src, _, gbps, _, _), kind in zip(links, kinds, strict=True):
        if src < num_gpus and kind != "nic":  # a GPU's link to its node's switch
            assert kind == ("nvlink" if src < 8 else "pcie")
            assert gbps == (3600 if src < 8 else 256)  # 450 and 32 GB/s per direction
        else:
            assert kind in ("nic", "uplink")
    assert kinds.count("uplink") > 0 and kinds.count("nic") > 0
