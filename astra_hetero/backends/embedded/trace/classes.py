"""A class trace (`rank_classes`) read for the ranks of its class: checked against the map, then bound
to a rank's own groups and peers without decoding anything again."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from astra_hetero.backends.embedded.trace.records import KIND_COLL, RankTrace
from astra_hetero.backends.embedded.trace.twins import rank_values
from astra_hetero.errors import RunDirError
from astra_hetero.rank_classes import CLASS_MAP, RankClassMap


def check_class_trace(trace: RankTrace, classes: RankClassMap, k: int, path: Path) -> None:
    """RunDirError unless the trace names exactly the groups and peers the map gives its
    representative, in first-use order."""
    values = rank_values(trace)[0]
    rep = classes.reps[k]
    if values.groups != classes.groups[rep] or values.peers != classes.peers[rep]:
        raise RunDirError(
            f"{path}: names groups {list(values.groups)} and peers {list(values.peers)}, but {CLASS_MAP} "
            f"gives its rank {rep} groups {list(classes.groups[rep])} and peers {list(classes.peers[rep])}"
        )


def bind_class_trace(
    trace: RankTrace, peer_pattern: tuple[int, ...], groups: tuple[str, ...], peers: tuple[int, ...]
) -> RankTrace:
    """The class trace as the rank whose groups and peers (first use first) these are runs it."""
    if groups == trace.group_names and not len(peer_pattern):
        return trace
    bound = trace.peers
    if len(peer_pattern):
        bound = trace.peers.copy()
        bound[trace.kinds > KIND_COLL] = np.array(peers)[list(peer_pattern)]
    return replace(trace, group_names=groups, peers=bound)
