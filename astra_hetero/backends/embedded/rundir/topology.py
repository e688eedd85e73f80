"""The cluster network as ASTRA-sim's ns-3 backend reads it from `ns3/topology.txt`.

Format: line 1 `total_nodes switch_count link_count`; line 2 the switch ids; then one link a line,
`src dst RATE DELAY ERROR_RATE`. Links are full duplex: each line becomes two directed links with the
line's rate and delay. Non-switch nodes are hosts; the first N of them (by id) are the NPUs, rank i
being the i-th. Only switches forward traffic.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from astra_hetero import units
from astra_hetero.errors import RunDirError


@dataclass(frozen=True)
class Topology:
    """Directed links `k` go `link_src[k] -> link_dst[k]`; line j of the file gives links 2j and 2j+1."""

    num_nodes: int
    is_switch: list[bool]
    npus: list[int]  # rank -> node id
    link_src: list[int]
    link_dst: list[int]
    link_bytes_per_ns: list[float]
    link_delay_ns: list[int]
    out_links: list[list[int]]  # node id -> directed links leaving it

    @property
    def num_links(self) -> int:
        return len(self.link_src)

    def neighbours(self, node: int) -> list[int]:
        return [self.link_dst[k] for k in self.out_links[node]]


# The most nodes a topology file may declare: more is a corrupt header (it would allocate per node).
MAX_NODES = 1 << 24
# Longest link delay accepted (1 s); a larger one is a unit slip or corruption, not a network.
MAX_DELAY_NS = 10**9


def parse_topology(text: str, source: str = "topology.txt", num_ranks: int = 0) -> Topology:
    """Parse the file's text; `num_ranks` (the ranks that will use it) bounds the hosts it may declare:
    hosts beyond the ranks that no link touches would only cost memory."""
    lines = [line.split() for line in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    if not lines or len(lines[0]) != 3:
        raise RunDirError(f"{source}: line 1 must be 'total_nodes switch_count link_count'")
    try:
        num_nodes, num_switches, num_lines = (int(x) for x in lines[0])
        switch_ids = [int(x) for x in (lines[1] if len(lines) > 1 else [])]
    except ValueError:
        raise RunDirError(f"{source}: lines 1-2 must hold integers") from None
    if len(switch_ids) != num_switches:
        raise RunDirError(f"{source}: line 2 lists {len(switch_ids)} switch ids, line 1 says {num_switches}")
    link_lines = [(number, fields) for number, fields in enumerate(lines[2:], start=3) if fields]
    if len(link_lines) != num_lines:
        raise RunDirError(f"{source}: {len(link_lines)} link lines, line 1 says {num_lines}")
    most = min(MAX_NODES, num_switches + max(num_ranks, 2 * num_lines))
    if not 0 <= num_switches <= num_nodes <= most:
        raise RunDirError(
            f"{source}: line 1 declares {num_nodes} nodes with {num_switches} switches; "
            f"{num_lines} links and {num_ranks} ranks allow at most {most}"
        )
    is_switch = [False] * num_nodes
    for node in switch_ids:
        _check_node(node, num_nodes, source, 2)
        is_switch[node] = True
    topo = Topology(
        num_nodes,
        is_switch,
        [n for n in range(num_nodes) if not is_switch[n]],
        [],
        [],
        [],
        [],
        [[] for _ in range(num_nodes)],
    )
    checked: dict[tuple[str, str], tuple[float, int]] = {}  # (rate, delay) texts: a fabric has few
    for number, fields in link_lines:
        _add_link(topo, fields, source, number, checked)
    return topo


def _check_node(node: int, num_nodes: int, source: str, line: int) -> None:
    if not 0 <= node < num_nodes:
        raise RunDirError(f"{source}:{line}: node id {node} outside 0..{num_nodes - 1}")


def _add_link(
    topo: Topology,
    fields: list[str],
    source: str,
    line: int,
    checked: dict[tuple[str, str], tuple[float, int]],
) -> None:
    if len(fields) < 4:
        raise RunDirError(f"{source}:{line}: expected 'src dst RATE DELAY ERROR_RATE'")
    try:
        src, dst = int(fields[0]), int(fields[1])
    except ValueError:
        raise RunDirError(
            f"{source}:{line}: link ends {fields[0]!r} {fields[1]!r} must be node ids"
        ) from None
    for node in (src, dst):
        _check_node(node, topo.num_nodes, source, line)
    if src == dst:
        raise RunDirError(f"{source}:{line}: a link needs two distinct ends")
    bytes_per_ns, delay_ns = checked.get((fields[2], fields[3])) or _link_values(
        fields[2], fields[3], source, line
    )
    checked[(fields[2], fields[3])] = (bytes_per_ns, delay_ns)
    for a, b in ((src, dst), (dst, src)):
        topo.out_links[a].append(len(topo.link_src))
        topo.link_src.append(a)
        topo.link_dst.append(b)
        topo.link_bytes_per_ns.append(bytes_per_ns)
        topo.link_delay_ns.append(delay_ns)


def _link_values(rate: str, delay_text: str, source: str, line: int) -> tuple[float, int]:
    """A link's capacity (bytes/ns) and delay (ns) from its texts, checked."""
    try:
        gbps = _rate_gbps(rate)
    except ValueError:
        raise RunDirError(f"{source}:{line}: {rate!r} is not a link rate (expected e.g. 400Gbps)") from None
    try:
        delay = _delay_ns(delay_text)
    except ValueError:
        raise RunDirError(
            f"{source}:{line}: {delay_text!r} is not a link delay (expected e.g. 0.0005ms)"
        ) from None
    if not 0 < gbps < math.inf:
        raise RunDirError(f"{source}:{line}: rate {rate!r} must be positive and finite")
    if not units.MIN_LINK_GBPS <= gbps <= units.MAX_LINK_GBPS:  # the spec's bounds (spec/types.py)
        raise RunDirError(
            f"{source}:{line}: rate {rate!r} is not a physical link rate (at least "
            f"{units.MIN_LINK_GBPS:g} Gbps, at most {units.MAX_LINK_GBPS:g} Gbps)"
        )
    if not 0 <= delay <= MAX_DELAY_NS:
        raise RunDirError(f"{source}:{line}: delay {delay_text!r} must be between 0 and 1 s")
    return units.gbps_to_bytes_per_ns(gbps), round(delay)


@lru_cache(maxsize=256)
def _rate_gbps(text: str) -> float:
    return units.parse_rate_to_gbps(text)  # a fabric has a handful of distinct rates and delays


@lru_cache(maxsize=256)
def _delay_ns(text: str) -> float:
    return units.parse_delay_to_ns(text)


def read_topology(path: Path, num_ranks: int = 0) -> Topology:
    if not path.is_file():
        raise RunDirError(f"{path}: missing (the embedded backend simulates the ns-3 topology file)")
    try:
        text = path.read_bytes().decode("ascii")
    except UnicodeDecodeError as exc:
        raise RunDirError(f"{path}: not a text file (byte {exc.start} is not ASCII)") from None
    except OSError as exc:
        raise RunDirError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    return parse_topology(text, str(path), num_ranks)


def host_groups(topo: Topology, num_ranks: int) -> list[int]:
    """Rank -> machine index, derived from the graph when the manifest does not say.

    A switch whose neighbours are all hosts, or NIC-like switches (degree <= 2), is an intra-node
    fabric (NVSwitch, PCIe switch): the ranks it connects share a machine. Ranks reached by no such
    switch are machines of their own.
    """
    parent = list(range(num_ranks))
    rank_of = {node: rank for rank, node in enumerate(topo.npus[:num_ranks])}

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for switch in range(topo.num_nodes):
        if not topo.is_switch[switch]:
            continue
        neighbours = topo.neighbours(switch)
        if any(topo.is_switch[n] and len(topo.out_links[n]) > 2 for n in neighbours):
            continue
        members = sorted(rank_of[n] for n in neighbours if n in rank_of)
        for other in members[1:]:
            parent[find(other)] = find(members[0])
    roots: dict[int, int] = {}
    return [roots.setdefault(find(rank), len(roots)) for rank in range(num_ranks)]
