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


Messages = tuple[tuple[int, int], ...]  # (tag, size), sorted


def _check_point_to_point(ranks: list[tuple[RankBinding, ClassSummary]]) -> None:
    """Every (sender, receiver) pair's sends and recvs are the same (tag, size) multiset, no tag twice.
    Built per class and peer role, then bound: a rank costs its peers, not its messages."""
    by_class: dict[int, tuple[dict[str, Messages], dict[str, Messages]]] = {}
    sent: dict[tuple[int, int], Messages] = {}
    received: dict[tuple[int, int], Messages] = {}
    for binding, summary in ranks:
        roles = by_class.get(id(summary))
        if roles is None:
            roles = by_class[id(summary)] = (_by_role(summary.sends), _by_role(summary.recvs))
        rank, peers = binding.rank, binding.peers
        for role, messages in roles[0].items():
            key = (rank, peers[role])
            sent[key] = messages if key not in sent else tuple(sorted(sent[key] + messages))
        for role, messages in roles[1].items():
            key = (peers[role], rank)
            received[key] = messages if key not in received else tuple(sorted(received[key] + messages))
    for key in sent.keys() | received.keys():
        mine, theirs = sent.get(key, ()), received.get(key, ())
        tags = [tag for tag, _ in mine]
        if mine != theirs or len(set(tags)) != len(tags):
            _mismatch(key, mine, theirs)


def _by_role(messages: tuple[tuple[str, int, int], ...]) -> dict[str, Messages]:
    out: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for role, tag, size in messages:
        out[role].append((tag, size))
    return {role: tuple(sorted(m)) for role, m in out.items()}


def _mismatch(key: tuple[int, int], sends: Messages, recvs: Messages) -> None:
    src, dst = key
    by_tag: dict[int, tuple[list[int], list[int]]] = defaultdict(lambda: ([], []))
    for tag, size in sends:
        by_tag[tag][0].append(size)
    for tag, size in recvs:
        by_tag[tag][1].append(size)
    for tag in sorted(by_tag):
        sizes, got = by_tag[tag]
        if sizes != got or len(sizes) != 1:
            raise WorkloadInvariantError(
                f"send/recv mismatch {src}->{dst} tag {tag}: sends {sizes or None}, recvs {got or None}"
            )


def _check_collectives(
    ranks: list[tuple[RankBinding, ClassSummary]], groups: dict[str, tuple[int, ...]]
) -> None:
    issued: dict[str, dict[int, tuple[tuple[str, int], ...]]] = defaultdict(dict)
    members_of: dict[str, frozenset[int]] = {}
    for binding, summary in ranks:
        for role, sequence in summary.collectives.items():
            group = binding.groups.get(role, "")
            if group in groups and group not in members_of:
                members_of[group] = frozenset(groups[group])
            if group not in groups or binding.rank not in members_of[group]:
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
