"""The rendered files run in real ASTRA-sim: ns-3 and both analytical binaries, on a small all-reduce.

Needs ASTRA_SIM_BIN_DIR (a directory holding AstraSim_Analytical_Congestion_Aware,
AstraSim_Analytical_Congestion_Unaware and ns3.42-AstraSimNetwork-default); skipped without it.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from astra_hetero import chakra_io, rundir
from astra_hetero.chakra_io import pb
from astra_hetero.spec import parse_spec
from astra_hetero.topology import write_topology
from tests.conftest import node_group
from tests.topology.files import with_workload

pytestmark = pytest.mark.integration

BIN_DIR = os.environ.get("ASTRA_SIM_BIN_DIR")
ALL_REDUCE_BYTES = 1 << 20
FINISHED = re.compile(r"sys\[(\d+)\] finished, (\d+) cycles")


def binary(name: str) -> Path:
    if not BIN_DIR:
        pytest.skip("ASTRA_SIM_BIN_DIR is not set (no ASTRA-sim binaries to run)")
    path = Path(BIN_DIR) / name
    if not os.access(path, os.X_OK):
        pytest.skip(f"{path} is not an executable file")
    return path


def build_run_dir(root: Path, slow_nic_gbps: float) -> Path:
    """4 NPUs (2 nodes x 2 GPUs, one NIC per GPU, the second node's NICs at `slow_nic_gbps`)."""
    groups = [
        node_group("fast", "h100-sxm", count=1, gpus_per_node=2),
        node_group("slow", "a100-80", count=1, gpus_per_node=2, fabric="nvlink3", nic=slow_nic_gbps),
    ]
    spec = parse_spec(
        with_workload({"cluster": {"node_groups": groups}, "network": {"topology": "single_switch"}})
    )
    root.mkdir()
    write_topology(spec, root)
    (root / rundir.WORKLOAD_DIR).mkdir()
    for rank in range(spec.cluster.num_gpus):
        node = pb.Node(
            id=0,
            name="all_reduce",
            type=chakra_io.COLL,
            attr=[
                pb.AttributeProto(name="is_cpu_op", bool_val=False),
                pb.AttributeProto(name="comm_type", int64_val=chakra_io.collective_type("all_reduce")),
                pb.AttributeProto(name="comm_size", uint64_val=ALL_REDUCE_BYTES),
            ],
        )
        chakra_io.write_trace(
            root / f"{rundir.WORKLOAD_PREFIX}.{rank}.et", [chakra_io.metadata_record(), chakra_io.frame(node)]
        )
    return root


def run(
    executable: Path, root: Path, network: str, system: str, extra: tuple[str, ...] = ()
) -> dict[int, int]:
    argv = [
        str(executable),
        f"--workload-configuration={root / rundir.WORKLOAD_PREFIX}",
        f"--system-configuration={root / system}",
        f"--remote-memory-configuration={root / rundir.REMOTE_MEMORY}",
        f"--network-configuration={root / network}",
        "--comm-group-configuration=empty",
        *extra,
    ]
    done = subprocess.run(argv, cwd=root, capture_output=True, text=True, timeout=300)
    cycles = {int(r): int(c) for r, c in FINISHED.findall(done.stdout)}
    assert sorted(cycles) == [0, 1, 2, 3], (
        f"exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    )
    return cycles


def test_ns3_runs_the_rendered_files_and_sees_the_slow_nics(tmp_path):
    ns3 = binary("ns3.42-AstraSimNetwork-default")
    times = {}
    for gbps in (400, 100):
        root = build_run_dir(tmp_path / f"nic{gbps}", gbps)
        logical = f"--logical-topology-configuration={root / rundir.NS3_LOGICAL_TOPOLOGY}"
        cycles = run(ns3, root, rundir.NS3_CONFIG, rundir.ANALYTICAL_SYSTEM_1D, (logical,))
        assert (root / "ns3/fct.txt").is_file()
        times[gbps] = max(cycles.values())
    assert times[100] > times[400]


@pytest.mark.parametrize(
    ("name", "network", "system"),
    [
        ("AstraSim_Analytical_Congestion_Aware", rundir.ANALYTICAL_NETWORK_1D, rundir.ANALYTICAL_SYSTEM_1D),
        ("AstraSim_Analytical_Congestion_Unaware", rundir.ANALYTICAL_NETWORK, rundir.ANALYTICAL_SYSTEM),
    ],
)
def test_analytical_binaries_run_the_rendered_files(tmp_path, name, network, system):
    executable = binary(name)
    root = build_run_dir(tmp_path / "run", 400)
    (root / rundir.LOGS_DIR).mkdir()
    cycles = run(executable, root, network, system)
    # A 1 MB ring all-reduce moves 2 (n-1)/n of the data through the slowest link at >= 25 GB/s in
    # this cluster (50 GB/s per GPU NIC, 300-450 GB/s NVLink), so it cannot beat 1 MB x 1.5 / 450 GB/s.
    assert min(cycles.values()) >= ALL_REDUCE_BYTES * 1.5 / 450
