"""Measured nccl-tests tables from the spec to the run directory, and from there to a communicator.

The spec names files relative to itself (`collectives.nccl_tests`). Loading the spec checks and parses
them; generating a run directory copies each into `nccl_tests/` and lists it in manifest.json with its
scope, collective and node group, so that the run directory stays self-contained and relocatable. The
embedded engine reads the copies back and picks, for each communicator, the table of its scope
(`intra_node`: all ranks in one node) and collective, preferring one restricted to the communicator's
node group and, among several, the one measured on the closest number of nodes or ranks. An
all-reduce table also serves all-gather and reduce-scatter when they have none of their
own: bus bandwidth is defined to reflect the same hardware bottleneck for all three.
"""

from __future__ import annotations

import math
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from astra_hetero import rundir
from astra_hetero.comm.nccl_tests import MeasuredTable, NcclTestsError, parse_nccl_tests
from astra_hetero.errors import RunDirError, SpecError
from astra_hetero.rundir import NCCL_TESTS_DIR as TABLES_DIR

SCOPES = ("intra_node", "inter_node")
_FALLBACK = {"all_gather": "all_reduce", "reduce_scatter": "all_reduce"}


@dataclass(frozen=True)
class ScopedTable:
    scope: str  # intra_node | inter_node
    node_group: str | None
    path: str  # as the run directory lists it
    table: MeasuredTable


def resolve_spec_tables(nccl_tests: dict[str, list[Any]], base: Path, group_names: list[str]) -> dict:
    """The spec's `collectives.nccl_tests` with absolute paths and each collective filled in; every
    file is read and parsed here so that a bad one fails at load time, naming its field."""
    resolved: dict[str, list[dict[str, Any]]] = {}
    for scope, entries in nccl_tests.items():
        for index, entry in enumerate(entries):
            field = f"collectives.nccl_tests.{scope}[{index}]"
            path = (base / entry.path).resolve()
            if not path.is_file():
                raise SpecError(f"{field}.path", f"file not found: {path}")
            if entry.node_group is not None and entry.node_group not in group_names:
                raise SpecError(
                    f"{field}.node_group",
                    f"unknown node group {entry.node_group!r}; known: {', '.join(group_names)}",
                )
            try:
                table = parse_nccl_tests(_read(path), path.name, entry.collective)
            except (NcclTestsError, UnicodeDecodeError) as exc:
                raise SpecError(f"{field}.path", f"{path}: {exc}") from None
            resolved.setdefault(scope, []).append(
                {"path": str(path), "collective": table.collective, "node_group": entry.node_group}
            )
    return resolved


def table_records(nccl_tests: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """The manifest entries of the (resolved) spec tables: where their copies go in the run directory."""
    return [
        {
            "scope": scope,
            "collective": entry.collective,
            "node_group": entry.node_group,
            "path": f"{TABLES_DIR}/{scope}-{index}-{Path(entry.path).name}",
        }
        for scope, entries in nccl_tests.items()
        for index, entry in enumerate(entries)
    ]


def copy_tables(nccl_tests: dict[str, list[Any]], staging: Path) -> None:
    """Copy the spec tables to where `table_records` says, under a staging run directory."""
    sources = [Path(entry.path) for entries in nccl_tests.values() for entry in entries]
    for source, record in zip(sources, table_records(nccl_tests), strict=True):
        (staging / TABLES_DIR).mkdir(exist_ok=True)
        shutil.copyfile(source, staging / record["path"])


def read_tables(root: Path, entries: Any, manifest_path: Path) -> list[ScopedTable]:
    """The tables a manifest lists (`nccl_tests`), parsed from the run directory's copies."""
    if not isinstance(entries, list):
        raise RunDirError(f"{manifest_path}: nccl_tests must be a list of tables")
    tables = []
    for index, entry in enumerate(entries):
        where = f"{manifest_path}: nccl_tests[{index}]"
        if not isinstance(entry, dict) or entry.get("scope") not in SCOPES or not entry.get("path"):
            raise RunDirError(f"{where} needs a scope ({' or '.join(SCOPES)}) and a path")
        path = rundir.inside(root, str(entry["path"]), f"{where} path")  # never a file outside
        if not path.is_file():
            raise RunDirError(f"{path}: missing ({where} lists it)")
        try:
            table = parse_nccl_tests(_read(path), path.name, entry.get("collective"))
        except (NcclTestsError, UnicodeDecodeError) as exc:
            raise RunDirError(f"{path}: {exc}") from None
        tables.append(ScopedTable(str(entry["scope"]), entry.get("node_group"), str(entry["path"]), table))
    return tables


def select_table(
    tables: list[ScopedTable],
    scope: str,
    kind: str,
    node_groups: set[str],
    num_ranks: int | None = None,
    num_nodes: int | None = None,
) -> ScopedTable | None:
    """The table for a communicator: its scope and collective (or the all-reduce fallback), a table of
    its own node group before a general one, and among several the one measured on the closest number
    of nodes (across nodes) or ranks (inside one), by ratio; a table that does not say comes last."""
    for collective in (kind, _FALLBACK.get(kind)):
        matches = [t for t in tables if t.scope == scope and t.table.collective == collective]
        own = [t for t in matches if t.node_group is not None and {t.node_group} == node_groups]
        general = [t for t in matches if t.node_group is None]
        if own or general:
            return min(own or general, key=lambda t: _distance(t.table, scope, num_ranks, num_nodes))
    return None


def _distance(
    table: MeasuredTable, scope: str, num_ranks: int | None, num_nodes: int | None
) -> tuple[float, float]:
    def ratio(measured: int | None, wanted: int | None) -> float:
        if wanted is None:
            return 0.0
        return math.inf if measured is None else abs(math.log(measured / wanted))

    nodes = ratio(table.num_nodes, num_nodes) if scope == "inter_node" else 0.0
    return nodes, ratio(table.num_ranks, num_ranks)


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="strict")
