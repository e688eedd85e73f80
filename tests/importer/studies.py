"""ASTRA-sim studies as a user has them: the STG fixture and small sets written in code."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

from astra_hetero import chakra_io
from astra_hetero.importer.study import StudyFiles

DATA = Path(__file__).parents[1] / "data"
STG_ARCHIVE = DATA / "astrasim_studies" / "stg_gpt3_16npu_4layers.tar.xz"
STG_STDOUT = DATA / "astrasim_outputs" / "stg_gpt3_16npu_analytical_unaware_stdout.txt"

SYSTEM = {
    "scheduling-policy": "LIFO",
    "endpoint-delay": 10,
    "active-chunks-per-dimension": 1,
    "preferred-dataset-splits": 4,
    "all-reduce-implementation": ["ring"],
    "all-gather-implementation": ["ring"],
    "reduce-scatter-implementation": ["ring"],
    "all-to-all-implementation": ["ring"],
    "collective-optimization": "localBWAware",
    "local-mem-bw": 1600,
    "boost-mode": 0,
}


def stg_study(root: Path) -> StudyFiles:
    """ASTRA-sim's own STG trace set (TP8 · PP2, 16 NPUs, roofline nodes) with its files."""
    with tarfile.open(STG_ARCHIVE) as archive:
        archive.extractall(root, filter="data")
    return StudyFiles(
        workload=str(root / "workload/workload"),
        system=root / "system_2d_roofline.json",
        network=root / "net_2d_16npu.yml",
        remote_memory=root / "memory.json",
        comm_groups=root / "workload/comm_groups.json",
    )


def write_study(
    root: Path,
    traces: dict[int, list],
    network: str,
    system: dict | None = None,
    groups: dict | None = None,
    name: str = "trace",
) -> StudyFiles:
    root.mkdir(parents=True, exist_ok=True)
    for rank, nodes in traces.items():
        records = [chakra_io.metadata_record()] + [chakra_io.frame(node) for node in nodes]
        chakra_io.write_trace(root / f"{name}.{rank}.et", records)
    (root / "network.yml").write_text(network)
    (root / "system.json").write_text(json.dumps(system or SYSTEM))
    if groups is not None:
        (root / "groups.json").write_text(json.dumps(groups))
    return StudyFiles(
        workload=str(root / name),
        system=root / "system.json",
        network=root / "network.yml",
        comm_groups=root / "groups.json" if groups is not None else None,
    )


def ring_network(npus: int) -> str:
    return f"topology: [ Ring ]\nnpus_count: [ {npus} ]\nbandwidth: [ 50.0 ]\nlatency: [ 500.0 ]\n"


def real_finish_ns(stdout: Path) -> dict[int, int]:
    import re

    found = re.findall(r"sys\[(\d+)\] finished, (\d+) cycles", stdout.read_text())
    return {int(rank): int(cycles) for rank, cycles in found}
