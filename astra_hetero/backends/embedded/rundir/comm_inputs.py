"""What the communication model needs from a run directory: which model, the link kinds, each rank's
GPU architecture and node group, and measured nccl-tests tables.

manifest.json says `collective_model` (nccl | ideal), `collective_algorithm`, `collective_protocol` and
lists `nccl_tests`; `ns3/link_kinds.json` gives the kind of every ns3/topology.txt link. A run directory
from before the NCCL model (no `collective_model`), a plain ASTRA-sim input set (no manifest), or one
whose link kinds or architectures are missing runs the ideal model, and the result says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from astra_hetero import rundir
from astra_hetero.backends.embedded.rundir.topology import Topology
from astra_hetero.comm.catalog import ALGORITHMS, PROTOCOLS, nccl_constants
from astra_hetero.comm.measured import ScopedTable, read_tables
from astra_hetero.errors import RunDirError

IDEAL_ALGORITHMS = ("ring", "hierarchical", "astrasim")  # astrasim: an imported study's system file
DEFAULT_IDEAL_ALGORITHM = "hierarchical"


@dataclass(frozen=True)
class CommInputs:
    model: str = "ideal"  # "nccl" | "ideal"
    algorithm: str = DEFAULT_IDEAL_ALGORITHM  # ideal: ring | hierarchical; nccl: auto or one of ALGORITHMS
    protocol: str = "auto"
    link_kinds: tuple[str, ...] = ()  # per topology.txt link line (nccl)
    architectures: tuple[str, ...] = ()  # per rank (nccl)
    node_groups: tuple[str, ...] = ()  # per rank, "" where unknown
    tables: tuple[ScopedTable, ...] = ()
    warnings: tuple[str, ...] = field(default=())


def read_comm_inputs(
    root: Path, manifest: dict[str, Any], labels: list[dict[str, Any]], topology: Topology, num_ranks: int
) -> CommInputs:
    where = root / rundir.MANIFEST
    model = manifest.get("collective_model")
    algorithm = manifest.get("collective_algorithm")
    if model is None:
        why = "the manifest predates the NCCL model" if manifest else "no manifest.json"
        return _ideal(where, algorithm, f"{why}; regenerate the run directory for the NCCL-like model")
    if model == "ideal":
        return _ideal(where, algorithm, "")
    if model != "nccl":
        raise RunDirError(f"{where}: collective_model must be nccl or ideal, not {model!r}")
    algorithm = "auto" if algorithm is None else algorithm
    protocol = manifest.get("collective_protocol", "auto")
    if algorithm not in ("auto", *ALGORITHMS):
        raise RunDirError(f"{where}: collective_algorithm {algorithm!r} is not auto, {', '.join(ALGORITHMS)}")
    if protocol not in ("auto", *PROTOCOLS):
        raise RunDirError(f"{where}: collective_protocol {protocol!r} is not auto, {', '.join(PROTOCOLS)}")
    kinds = link_kinds(root / rundir.NS3_LINK_KINDS, topology)
    by_rank = {int(entry.get("rank", i)): entry for i, entry in enumerate(labels)}
    ranks = [by_rank.get(rank, {}) for rank in range(num_ranks)]
    architectures = [str(entry.get("architecture", "")) for entry in ranks]
    if kinds is None or not all(architectures):
        missing = rundir.NS3_LINK_KINDS if kinds is None else "the ranks' architecture in manifest.json"
        return _ideal(where, None, f"{missing} missing; regenerate the run directory for the NCCL-like model")
    known = nccl_constants().compute_capability
    unknown = sorted({a for a in architectures if a not in known})
    if unknown:
        raise RunDirError(f"{where}: unknown architecture(s) {', '.join(unknown)}; known: {', '.join(known)}")
    return CommInputs(
        "nccl",
        str(algorithm),
        str(protocol),
        kinds,
        tuple(architectures),
        tuple(str(entry.get("node_group", "")) for entry in ranks),
        tuple(read_tables(root, manifest.get("nccl_tests", []), where)),
    )


def _ideal(where: Path, algorithm: Any, why: str) -> CommInputs:
    algorithm = DEFAULT_IDEAL_ALGORITHM if algorithm in (None, "auto") else algorithm
    if algorithm not in IDEAL_ALGORITHMS:
        raise RunDirError(
            f"{where}: collective_algorithm {algorithm!r} is not one of {', '.join(IDEAL_ALGORITHMS)}"
        )
    warnings = (f"collectives: ideal model (ASTRA-sim's analytical collectives): {why}",) if why else ()
    return CommInputs(algorithm=str(algorithm), warnings=warnings)


def link_kinds(path: Path, topology: Topology) -> tuple[str, ...] | None:
    """The kind of every topology.txt link line (ns3/link_kinds.json), None without the file."""
    if not path.is_file():
        return None
    kinds = rundir.read_json_object(path, "").get("kinds")  # binary, nested, non-object: named
    num_lines = topology.num_links // 2
    if not isinstance(kinds, list) or len(kinds) != num_lines:
        raise RunDirError(f"{path}: needs one kind per link of ns3/topology.txt ({num_lines})")
    known = nccl_constants().link_kinds
    unknown = sorted({str(k) for k in kinds if not isinstance(k, str) or k not in known})  # [] is unhashable
    if unknown:
        raise RunDirError(f"{path}: unknown link kind(s) {', '.join(unknown)}; known: {', '.join(known)}")
    return tuple(kinds)
