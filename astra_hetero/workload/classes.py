"""Which ranks share one trace up to their groups and peers: the generator's rank classes.

Ranks with equal `RankContext`s run the same class graph; bound to a rank, its collectives name the
rank's groups and its sends and recvs the rank's peers. A rank's values listed first use first (the
order the embedded engine and `rank_classes.RankTraceWriter` use) line up position by position with
another rank's only if the two coincide in the same way (two roles naming one group on one rank but
two on the other would shift positions), so a class is (context, how its role values coincide);
`bound_values` gives the latter.
"""

from __future__ import annotations

from dataclasses import dataclass

from astra_hetero.workload.encode import RankBinding
from astra_hetero.workload.program import COLL, RECV, SEND, RankGraph


@dataclass(frozen=True)
class Roles:
    """A class graph's comm-group roles and peer roles, in order of first use."""

    groups: tuple[str, ...]
    peers: tuple[str, ...]


def graph_roles(graph: RankGraph) -> Roles:
    groups: dict[str, None] = {}
    peers: dict[str, None] = {}
    for node in graph.nodes:
        if node.kind == COLL:
            groups.setdefault(node.group)
        elif node.kind in (SEND, RECV):
            peers.setdefault(node.peer)
    return Roles(tuple(groups), tuple(peers))


def bound_values(roles: Roles, binding: RankBinding) -> tuple[tuple[str, ...], tuple[int, ...], tuple]:
    """(groups, peers) the rank's trace names, first use first, and how its role values coincide."""
    group_values = [binding.groups[role] if role else "" for role in roles.groups]
    peer_values = [binding.peers[role] for role in roles.peers]
    groups, group_pattern = _first_use(group_values)
    peers, peer_pattern = _first_use(peer_values)
    return groups, peers, (group_pattern, peer_pattern)


def _first_use(values: list) -> tuple[tuple, tuple[int, ...]]:
    index: dict = {}
    pattern = tuple(index.setdefault(v, len(index)) for v in values)
    return tuple(index), pattern
