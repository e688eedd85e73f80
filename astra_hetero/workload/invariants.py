"""Checks every generated workload must pass before it is published.

- ids are unique and every dependency points to an earlier node (so the graph is acyclic);
- every send has exactly one recv on its peer with the same tag and size, and vice versa;
- every member of a comm group issues the same collectives, in the same order, with the same sizes;
- every collective names a group that exists and contains the issuing rank.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from astra_hetero.workload.encode import RankBinding
from astra_hetero.workload.program import COLL, RECV, SEND, RankGraph


class WorkloadInvariantError(AssertionError):
    """A generator bug: the emitted traces would not run consistently in ASTRA-sim."""


@dataclass(frozen=True)
class ClassSummary:
    """Role-level communication of one rank class; bound to ranks without revisiting the graph."""

    sends: tuple[tuple[str, int, int], ...]  # (peer role, tag, size)
    recvs: tuple[tuple[str, int, int], ...]
    collectives: dict[str, tuple[tuple[str, int], ...]]  # group role -> [(type, size)]


def summarize(graph: RankGraph) -> ClassSummary:
    sends, recvs, collectives = [], [], defaultdict(list)
    for index, node in enumerate(graph.nodes):
        if node.id != index:
            raise WorkloadInvariantError(f"node {node.name} has id {node.id} at position {index}")
        for dep in (*node.data_deps, *node.ctrl_deps):
            if not 0 <= dep < node.id:
                raise WorkloadInvariantError(
                    f"node {node.id} ({node.name}) depends on {dep}, not an earlier node"
                )
        if node.kind == SEND:
            sends.append((node.peer, node.tag, node.bytes))
        elif node.kind == RECV:
            recvs.append((node.peer, node.tag, node.bytes))
        elif node.kind == COLL:
            collectives[node.group].append((node.comm_type, node.bytes))
    return ClassSummary(tuple(sends), tuple(recvs), {k: tuple(v) for k, v in collectives.items()})


def check_bound(ranks: list[tuple[RankBinding, ClassSummary]], groups: dict[str, tuple[int, ...]]) -> None:
    _check_point_to_point(ranks)
    _check_collectives(ranks, groups)


def _check_point_to_point(ranks: list[tuple[RankBinding, ClassSummary]]) -> None:
    sent: dict[tuple[int, int, int], list[int]] = defaultdict(list)
    received: dict[tuple[int, int, int], list[int]] = defaultdict(list)
    for binding, summary in ranks:
        for role, tag, size in summary.sends:
            sent[(binding.rank, binding.peers[role], tag)].append(size)
        for role, tag, size in summary.recvs:
            received[(binding.peers[role], binding.rank, tag)].append(size)
    for key in sent.keys() | received.keys():
        if sent.get(key) != received.get(key) or len(sent[key]) != 1:
            src, dst, tag = key
            raise WorkloadInvariantError(
                f"send/recv mismatch {src}->{dst} tag {tag}: sends {sent.get(key)}, recvs {received.get(key)}"
            )


def _check_collectives(
    ranks: list[tuple[RankBinding, ClassSummary]], groups: dict[str, tuple[int, ...]]
) -> None:
    issued: dict[str, dict[int, tuple[tuple[str, int], ...]]] = defaultdict(dict)
    for binding, summary in ranks:
        for role, sequence in summary.collectives.items():
            group = binding.groups.get(role, "")
            if group not in groups or binding.rank not in groups[group]:
                raise WorkloadInvariantError(
                    f"rank {binding.rank} issues a {role} collective on group {group!r} it is not a member of"
                )
            issued[group][binding.rank] = sequence
    for group, members in groups.items():
        sequences = [issued[group].get(r, ()) for r in members]
        if any(seq != sequences[0] for seq in sequences[1:]):
            raise WorkloadInvariantError(
                f"members of comm group {group} {list(members)} issue different collectives"
            )
