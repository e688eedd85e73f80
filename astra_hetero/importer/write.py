"""An imported study as a run directory: the user's files copied in verbatim where the real ASTRA-sim
backends read them, what the embedded engine needs derived beside them, and a record of both.

    workload/<name>.<rank>.et, workload/comm_groups.json      the traces and comm groups, verbatim
    analytical/system.json, analytical/remote_memory.json     the system and remote-memory files, verbatim
    analytical/network.yml                                    an analytical network, verbatim
    ns3/config.txt, ns3/topology.txt, ns3/flow.txt, ns3/trace.txt, ns3/logical_topology.json
                                                              an ns-3 network (the config's paths point
                                                              at these copies; every other line verbatim)
    ns3/topology.txt                                          for an analytical study: its cluster graph
    manifest.json                                             ranks, the collective model, the files' roles
    import.json                                               the command line, where each file came
                                                              from and its sha256

A study without a remote-memory file gets ASTRA-sim's `NO_MEMORY_EXPANSION` one (the binaries need
one), recorded as derived.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

from astra_hetero import rundir
from astra_hetero.importer.cluster_graph import link_kinds, topology_text
from astra_hetero.importer.ns3_study import INPUT_KEYS
from astra_hetero.importer.process_groups import has_metadata_nodes
from astra_hetero.importer.study import Study

IMPORT_RECORD = "import.json"
IMPORT_FORMAT = "astra-hetero/import@1"
MANIFEST_FORMAT = "astra-hetero/manifest@1"
ASTRASIM_VERSION = "518bd51"  # the ASTRA-sim whose semantics the embedded engine follows
DEFAULT_REMOTE_MEMORY = {"memory-type": "NO_MEMORY_EXPANSION"}


def inputs_digest(study: Study) -> str:
    """What the run directory's parts were built from: the digests of the study's files."""
    paths = [*study.trace_paths, study.files.system, study.files.network]
    paths += [
        p for p in (study.files.remote_memory, study.files.comm_groups, study.files.logical_topology) if p
    ]
    if study.ns3 is not None:
        paths += list(study.ns3.inputs.values())
    digest = hashlib.sha256()
    for path in paths:
        digest.update(rundir.file_sha256(path).encode())
    digest.update(json.dumps(study.files.options, sort_keys=True).encode())
    return digest.hexdigest()


def write_workload(study: Study, root: Path, ranks: list[dict[str, Any]], name: str) -> dict[str, Any]:
    """Traces, comm groups and the manifest into `root`; returns the manifest."""
    (root / rundir.WORKLOAD_DIR).mkdir(parents=True, exist_ok=True)
    prefix = f"{rundir.WORKLOAD_DIR}/{study.trace_name}"
    for rank, path in enumerate(study.trace_paths):
        shutil.copyfile(path, root / f"{prefix}.{rank}.et")
    if study.files.comm_groups is not None:
        shutil.copyfile(study.files.comm_groups, root / rundir.COMM_GROUPS)
    elif study.groups:  # read off the traces' METADATA nodes (importer.process_groups)
        rundir.write_json_atomic(root / rundir.COMM_GROUPS, study.groups)
    data = manifest(study, ranks, name, prefix)
    rundir.write_json_atomic(root / rundir.MANIFEST, data)
    return data


def manifest(study: Study, ranks: list[dict[str, Any]], name: str, prefix: str) -> dict[str, Any]:
    network = rundir.ANALYTICAL_NETWORK if study.backend == "analytical" else rundir.NS3_CONFIG
    return {
        "format": MANIFEST_FORMAT,
        "name": name,
        "source": "astrasim-import",
        "num_ranks": study.num_ranks,
        "workload_prefix": prefix,
        "system_configuration": rundir.ANALYTICAL_SYSTEM,
        # ASTRA-sim's semantics: its collectives, one collective or send in flight per NPU, ready
        # nodes issued lowest id first
        "collective_model": "ideal",
        "collective_algorithm": "astrasim",
        "max_comm_in_flight_per_rank": 1,
        "issue_order": "node_id",
        # an ns-3 study's links as its packets use them (headers, ACKs: backends.md#link-models)
        "link_model": "ns3_packets" if study.ns3 is not None else "ideal",
        "astrasim": {
            "network_backend": study.backend,
            "network_configuration": network,
            "logical_topology_configuration": rundir.NS3_LOGICAL_TOPOLOGY if study.ns3 else None,
            "remote_memory_configuration": rundir.REMOTE_MEMORY,
            "comm_group_configuration": rundir.COMM_GROUPS if study.files.comm_groups else None,
            "npu_link_scales": None,
            "options": dict(study.files.options),
            "refused": refusal(study),
        },
        "ranks": ranks,
    }


def refusal(study: Study) -> str | None:
    """Why the real ASTRA-sim binaries cannot run the study's files as they are, if they cannot."""
    path = has_metadata_nodes(list(study.trace_paths))
    if path is None:
        return None
    return (
        f"{path.name} holds a METADATA node (PyTorch's process groups, as the Chakra converter writes "
        f"them), on which ASTRA-sim {ASTRASIM_VERSION} aborts (Statistics::get_operator_type asserts)"
    )


def write_network(study: Study, root: Path) -> None:
    """The system, remote-memory and network files, and the cluster graph, into `root`."""
    (root / rundir.ANALYTICAL_DIR).mkdir(parents=True, exist_ok=True)
    (root / rundir.NS3_DIR).mkdir(parents=True, exist_ok=True)
    shutil.copyfile(study.files.system, root / rundir.ANALYTICAL_SYSTEM)
    if study.files.remote_memory is not None:
        shutil.copyfile(study.files.remote_memory, root / rundir.REMOTE_MEMORY)
    else:
        rundir.write_json_atomic(root / rundir.REMOTE_MEMORY, DEFAULT_REMOTE_MEMORY)
    if study.analytical is not None:
        shutil.copyfile(study.files.network, root / rundir.ANALYTICAL_NETWORK)
        (root / rundir.NS3_TOPOLOGY).write_text(topology_text(study.analytical))
        rundir.write_json_atomic(root / rundir.NS3_LINK_KINDS, {"kinds": link_kinds(study.analytical)})
        return
    ns3 = study.ns3
    assert ns3 is not None
    (root / rundir.NS3_CONFIG).write_text(ns3.relocated())
    for key, relative in INPUT_KEYS.items():
        shutil.copyfile(ns3.inputs[key], root / relative)
    shutil.copyfile(ns3.logical_topology, root / rundir.NS3_LOGICAL_TOPOLOGY)


def import_record(study: Study, root: Path) -> dict[str, Any]:
    """import.json: the command line and, per file, where it came from, where it is, its sha256."""
    files: dict[str, Any] = {}

    def record(role: str, given: Path, copied: str) -> None:
        files[role] = {"given": str(given), "copied_to": copied, "sha256": rundir.file_sha256(given)}

    for rank, path in enumerate(study.trace_paths):
        record(f"workload.{rank}", path, f"{rundir.WORKLOAD_DIR}/{study.trace_name}.{rank}.et")
    record("system-configuration", study.files.system, rundir.ANALYTICAL_SYSTEM)
    if study.files.remote_memory is not None:
        record("remote-memory-configuration", study.files.remote_memory, rundir.REMOTE_MEMORY)
    if study.files.comm_groups is not None:
        record("comm-group-configuration", study.files.comm_groups, rundir.COMM_GROUPS)
    if study.analytical is not None:
        record("network-configuration", study.files.network, rundir.ANALYTICAL_NETWORK)
    else:
        assert study.ns3 is not None
        record("network-configuration", study.files.network, rundir.NS3_CONFIG)
        for key, relative in INPUT_KEYS.items():
            record(key, study.ns3.inputs[key], relative)
        record("logical-topology-configuration", study.ns3.logical_topology, rundir.NS3_LOGICAL_TOPOLOGY)
    derived = {}
    if study.analytical is not None:
        derived[rundir.NS3_TOPOLOGY] = "the analytical network's cluster graph"
        derived[rundir.NS3_LINK_KINDS] = (
            "each link's kind for the NCCL model (run --collective-model nccl): dimension 0 of a "
            "multi-dimensional network NVLink, the other dimensions NIC"
        )
    if study.files.comm_groups is None and study.groups:
        derived[rundir.COMM_GROUPS] = (
            "the process groups of the traces' METADATA nodes, for the embedded engine (the real "
            "binaries read them from the traces, as the study gives no comm-group file)"
        )
    if study.ns3 is not None:
        derived[rundir.NS3_CONFIG] = "the study's config with its file paths pointing at the copies"
    if study.files.remote_memory is None:
        derived[rundir.REMOTE_MEMORY] = "ASTRA-sim's NO_MEMORY_EXPANSION (none was given)"
    return {
        "format": IMPORT_FORMAT,
        "astrasim_version": ASTRASIM_VERSION,
        "command": list(study.files.argv),
        "workload_configuration": study.files.workload,
        "options": dict(study.files.options),
        "files": files,
        "derived": derived,
        "overlay": None,
    }
