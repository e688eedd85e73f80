"""Comm groups of traces from PyTorch's Chakra converter, read off their METADATA node.

The converter writes PyTorch's process groups into a METADATA node (`## process_group:init ##`)
whose `inputs.values` is the Python text of a one-element list holding their JSON:
`['[{"pg_name": "1", "ranks": [0, 1], ...}]']`. ASTRA-sim reads the groups from there when no comm-group
file is given (`Workload::issue_pytorch_pg_metadata`: the text's first and last two characters
dropped, an empty rank list meaning every rank, `pg_name` "0" always every rank); so does the importer,
into `workload/comm_groups.json` for the embedded engine (recorded as derived; the real binaries are
still given none, as the study gives none).
"""

from __future__ import annotations

import json
from pathlib import Path

from astra_hetero import chakra_io
from astra_hetero.chakra_io import pb
from astra_hetero.errors import RunDirError

_METADATA_TAG = b"process_group:init"


def metadata_groups(paths: list[Path], num_ranks: int) -> dict[str, list[int]]:
    """The groups the traces' METADATA nodes declare (later ranks cannot redefine a group)."""
    groups: dict[str, list[int]] = {}
    for path in paths:
        data = path.read_bytes()
        if _METADATA_TAG not in data:
            continue
        for record in list(chakra_io.iter_records(data, str(path)))[1:]:
            node = pb.Node()
            node.ParseFromString(record)
            if node.type != pb.METADATA_NODE or not node.inputs.values:
                continue
            for name, ranks in _groups_of(node, path, num_ranks).items():
                if groups.setdefault(name, ranks) != ranks:
                    raise RunDirError(
                        f"{path}: node {node.id} declares process group {name} as {ranks}, another trace as "
                        f"{groups[name]}"
                    )
    groups.pop("0", None)  # every rank, whatever is declared
    return groups


def has_metadata_nodes(paths: list[Path]) -> Path | None:
    """The first trace holding a METADATA node (ASTRA-sim 518bd51's statistics abort on them)."""
    for path in paths:
        data = path.read_bytes()
        if _METADATA_TAG in data:
            for record in list(chakra_io.iter_records(data, str(path)))[1:]:
                node = pb.Node()
                node.ParseFromString(record)
                if node.type == pb.METADATA_NODE:
                    return path
    return None


def _groups_of(node: object, path: Path, num_ranks: int) -> dict[str, list[int]]:
    text = node.inputs.values[2:-2]  # type: ignore[attr-defined]
    try:
        items = json.loads(text)
        groups = {str(item["pg_name"]): [int(r) for r in item["ranks"]] for item in items}
    except (ValueError, KeyError, TypeError) as exc:
        raise RunDirError(
            f"{path}: node {node.id} holds no process groups ASTRA-sim can read ({exc})"
        ) from None  # type: ignore[attr-defined]
    for name, ranks in groups.items():
        if not ranks:
            groups[name] = list(range(num_ranks))
        elif any(not 0 <= r < num_ranks for r in ranks):
            raise RunDirError(f"{path}: process group {name} names ranks outside 0..{num_ranks - 1}")
        elif not name.isdigit():
            raise RunDirError(
                f"{path}: process group name {name!r} is not an integer (ASTRA-sim reads it as one)"
            )
    return groups
