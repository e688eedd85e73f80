"""Shortest-path routes with equal-cost multipath split, computed lazily and cached.

Routes follow hop count (as ns-3's global routing does) and only switches forward. Where several
next hops lie on shortest paths, the traffic divides equally among their links at that hop, the
fluid limit of per-flow ECMP hashing; a route is therefore a set of directed links, each with the
fraction of the flow it carries, and its latency is that of the slowest equal-cost path.

Twin switches (same neighbours over same-rate, same-delay links, like the spines of a spine-leaf
fabric or the NICs a PCIe switch shares) always carry identical shares of every route, so they are
merged into one node and their parallel links into one *bundle* with the summed capacity. Routes
and the flow model work on bundles: a route through 128 spines is 6 bundles instead of 260 links,
with exactly the same max-min rates.

Distances come from the structure of the merged switch graph rather than one search per
destination (a cluster has thousands): switches with at most one switch neighbour (a NIC under its
leaf, a server's NVSwitch) are peeled off into trees hanging from a small *core* (leaves, spines,
rails), distances inside the core are searched once per core switch, and a distance to anywhere is
tree depth + core distance + tree depth.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from astra_hetero.backends.embedded.rundir.topology import Topology
from astra_hetero.errors import RunDirError

_FAR = 1 << 30  # "unreachable" in distance arithmetic


@dataclass(frozen=True)
class Route:
    links: tuple[tuple[int, float], ...]  # (bundle of directed links, fraction of the flow on it)
    latency_ns: int  # the slowest of the equal-cost paths


# An edge of the merged graph: (neighbour node, bundle, links from one member to the neighbour's
# members, delay of those links in ns).
Edge = tuple[int, int, int, int]


class Router:
    """Routes between NPUs of one topology; caches are per instance (per run)."""

    def __init__(self, topo: Topology) -> None:
        self.topo = topo
        self._twin = _twin_classes(topo)
        self.bundle_of, self.bundle_bytes_per_ns = _bundles(topo, self._twin)
        self._edges = self._merged_edges()
        self._edge_to = {node: {e[0]: e for e in edges} for node, edges in self._edges.items()}
        self._peel()
        self._core_distances: dict[int, np.ndarray] = {}
        self._routes: dict[tuple[int, int], Route] = {}
        self._switch_edges: dict[int, list[Edge]] = {}  # see `_exits`
        self._core_rows: dict[int, list[int]] = {}  # `_core_distance` as lists, for scalar lookups

    def route(self, src_rank: int, dst_rank: int) -> Route:
        key = (src_rank, dst_rank)
        route = self._routes.get(key)
        if route is None:
            route = self._routes[key] = self._build(self.topo.npus[src_rank], self.topo.npus[dst_rank])
        return route

    # --- the merged graph ---------------------------------------------------------------------------
    def _merged_edges(self) -> dict[int, list[Edge]]:
        """Edges leaving each merged node (a host, or the first switch of each twin class)."""
        topo, twin = self.topo, self._twin
        edges: dict[int, list[Edge]] = {}
        for node in range(topo.num_nodes):
            if twin[node] != node:
                continue
            found: dict[int, list[int]] = {}
            for k in topo.out_links[node]:
                entry = found.setdefault(twin[topo.link_dst[k]], [self.bundle_of[k], 0, 0])
                entry[1] += 1
                entry[2] = max(entry[2], topo.link_delay_ns[k])
            edges[node] = [(other, b, count, delay) for other, (b, count, delay) in found.items()]
        return edges

    def _peel(self) -> None:
        """Split the merged switch graph into a core and trees hanging from it (parent, depth, anchor)."""
        is_switch = self.topo.is_switch
        switches = [n for n in self._edges if is_switch[n]]
        neighbours = {n: {e[0] for e in self._edges[n] if is_switch[e[0]]} for n in switches}
        degree = {n: len(neighbours[n]) for n in switches}
        parent: dict[int, int] = {}
        queue = deque(n for n in switches if degree[n] <= 1)
        peeled: set[int] = set()
        while queue:
            node = queue.popleft()
            if node in peeled:
                continue
            peeled.add(node)
            for other in neighbours[node]:
                if other not in peeled:
                    parent[node] = other
                    degree[other] -= 1
                    if degree[other] <= 1:
                        queue.append(other)
        # a tree with no core keeps its last peeled node as root; that node has no parent
        self._parent = parent
        self._core = [n for n in switches if n not in peeled]
        self._core_index = {n: i for i, n in enumerate(self._core)}
        self._anchor, self._depth = {}, {}
        for node in switches:
            self._locate(node)
        self._core_edges = self._core_arrays()

    def _locate(self, node: int) -> tuple[int, int]:
        chain = []
        while node not in self._anchor and node in self._parent:
            chain.append(node)
            node = self._parent[node]
        if node not in self._anchor:
            self._anchor[node], self._depth[node] = node, 0
        anchor, depth = self._anchor[node], self._depth[node]
        for hop in reversed(chain):
            depth += 1
            self._anchor[hop], self._depth[hop] = anchor, depth
        return anchor, depth

    def _core_arrays(self) -> list[tuple[np.ndarray, list[Edge]]]:
        """Per core switch: its core neighbours' indices (for vectorised distance lookups) with
        their edges, in the same order."""
        out = []
        for node in self._core:
            edges = [e for e in self._edges[node] if e[0] in self._core_index]
            out.append((np.array([self._core_index[e[0]] for e in edges], dtype=np.int64), edges))
        return out

    # --- distances ----------------------------------------------------------------------------------
    def _core_distance(self, anchor: int) -> np.ndarray:
        """Hops from every core switch to core switch `anchor`, within the core."""
        cached = self._core_distances.get(anchor)
        if cached is not None:
            return cached
        dist = np.full(len(self._core), _FAR, dtype=np.int64)
        start = self._core_index[anchor]
        dist[start] = 0
        frontier = [start]
        level = 0
        while frontier:
            level += 1
            reached = []
            for i in frontier:
                for j in self._core_edges[i][0].tolist():
                    if dist[j] == _FAR:
                        dist[j] = level
                        reached.append(j)
            frontier = reached
        self._core_distances[anchor] = dist
        return dist

    def _switch_distance(self, a: int, b: int) -> int:
        """Hops from switch `a` to switch `b` through switches."""
        anchor_a, anchor_b = self._anchor[a], self._anchor[b]
        if anchor_a == anchor_b:
            return self._tree_distance(a, b)
        if anchor_a not in self._core_index or anchor_b not in self._core_index:
            return _FAR
        row = self._core_rows.get(anchor_b)
        if row is None:
            row = self._core_rows[anchor_b] = self._core_distance(anchor_b).tolist()
        core = row[self._core_index[anchor_a]]
        return _FAR if core >= _FAR else self._depth[a] + core + self._depth[b]

    def _tree_distance(self, a: int, b: int) -> int:
        depth, parent = self._depth, self._parent
        steps = 0
        while depth[a] > depth[b]:
            a, steps = parent[a], steps + 1
        while depth[b] > depth[a]:
            b, steps = parent[b], steps + 1
        while a != b:
            a, b, steps = parent[a], parent[b], steps + 2
        return steps

    # --- routes -------------------------------------------------------------------------------------
    def _build(self, src_node: int, dst_node: int) -> Route:
        if src_node == dst_node:
            return Route((), 0)
        return self._tree_route(src_node, dst_node) or self._walk(src_node, dst_node)

    def _tree_route(self, src_node: int, dst_node: int) -> Route | None:
        """The route when a single shortest path runs up one tree and down again (the common case:
        GPU, NIC, leaf, spines, leaf, NIC, GPU); None when anything else may be on a shortest path."""
        anchor = self._anchor
        if dst_node in self._edge_to[src_node]:
            return None
        best, choice = _FAR, None
        distance = self._switch_distance
        dst_exits = self._exits(dst_node)
        for s in self._exits(src_node):
            for t in dst_exits:
                d = distance(s[0], t[0])
                if d < best:
                    best, choice = d, (s, t)
                elif d == best:
                    choice = None  # equal-cost alternatives: split them in the walk
        if (
            choice is None or anchor[choice[0][0]] != anchor[choice[1][0]]
        ):  # through the core: maybe several paths
            return None
        first, last = choice
        up, down = self._tree_path(first[0], last[0])
        back = self._edge_to[last[0]][dst_node]
        hops = [first, *up, *down, back]
        links: dict[int, float] = {}
        for edge in hops:
            links[edge[1]] = links.get(edge[1], 0.0) + 1.0
        return Route(tuple(sorted(links.items())), sum(edge[3] for edge in hops))

    def _exits(self, node: int) -> list[Edge]:
        """The edges from `node` to switches, in `_edges` order."""
        exits = self._switch_edges.get(node)
        if exits is None:
            is_switch = self.topo.is_switch
            exits = self._switch_edges[node] = [e for e in self._edges[node] if is_switch[e[0]]]
        return exits

    def _tree_path(self, a: int, b: int) -> tuple[list[Edge], list[Edge]]:
        """Edges from switch `a` up to the lowest common ancestor, and from there down to `b`."""
        depth, parent, edge_to = self._depth, self._parent, self._edge_to
        up: list[Edge] = []
        down: list[Edge] = []
        while depth[a] > depth[b]:
            up.append(edge_to[a][parent[a]])
            a = parent[a]
        while depth[b] > depth[a]:
            down.append(edge_to[parent[b]][b])
            b = parent[b]
        while a != b:
            up.append(edge_to[a][parent[a]])
            down.append(edge_to[parent[b]][b])
            a, b = parent[a], parent[b]
        return up, down[::-1]

    def _walk(self, src_node: int, dst_node: int) -> Route:
        exits = _Exits(self, dst_node)
        first = [e for e in self._edges[src_node] if e[0] == dst_node]
        if not first:
            hops = [(e, exits.distance(e[0])) for e in self._edges[src_node] if self.topo.is_switch[e[0]]]
            best = min((d for _, d in hops), default=_FAR)
            if best >= _FAR:
                raise RunDirError(
                    f"topology: no path from node {src_node} to node {dst_node} through switches"
                )
            first = [e for e, d in hops if d == best]
        share = {src_node: 1.0}
        latency = {src_node: 0}
        links: dict[int, float] = {}
        frontier = {src_node: first}
        while frontier:
            following: dict[int, list[Edge]] = {}
            for node, next_edges in frontier.items():
                total = sum(e[2] for e in next_edges)
                for hop, bundle, count, delay in next_edges:
                    part = share[node] * count / total
                    links[bundle] = links.get(bundle, 0.0) + part
                    share[hop] = share.get(hop, 0.0) + part
                    latency[hop] = max(latency.get(hop, 0), latency[node] + delay)
                    if hop != dst_node and hop not in following:
                        following[hop] = exits.next_edges(hop)
            frontier = following
        return Route(tuple(sorted(links.items())), latency[dst_node])


class _Exits:
    """Distances to one destination host: through the switches next to it (its exits)."""

    def __init__(self, router: Router, dst: int) -> None:
        self.router = router
        self.dst = dst
        self.exits = [e[0] for e in router._edges[dst] if router.topo.is_switch[e[0]]]
        self.chain = set()  # switches on the tree paths from the exits up to their anchors
        for node in self.exits:
            while True:
                self.chain.add(node)
                if node not in router._parent:
                    break
                node = router._parent[node]
        self._memo: dict[int, int] = {}

    def distance(self, switch: int) -> int:
        """Hops from `switch` to the destination."""
        known = self._memo.get(switch)
        if known is None:
            known = self._memo[switch] = 1 + min(
                (self.router._switch_distance(switch, t) for t in self.exits), default=_FAR
            )
        return known

    def next_edges(self, node: int) -> list[Edge]:
        """The edges from `node` that lie on shortest paths to the destination."""
        router = self.router
        here = self.distance(node)
        edge_to = router._edge_to[node]
        if here == 1:
            return [edge_to[self.dst]]
        # Down the tree towards an exit, or up to the parent, or (in the core) to core neighbours:
        # shortest paths take no other edge, so no other neighbour is looked at.
        chosen = [
            edge_to[c]
            for c in self.chain
            if c in edge_to and router._parent.get(c) == node and self.distance(c) == here - 1
        ]
        parent = router._parent.get(node)
        if parent is not None and self.distance(parent) == here - 1:
            chosen.append(edge_to[parent])
        core = router._core_index.get(node)
        if core is None:
            return chosen
        indices, core_edges = router._core_edges[core]
        if len(indices):
            best = np.full(len(indices), _FAR, dtype=np.int64)
            for t in self.exits:
                anchor = router._anchor[t]
                if anchor in router._core_index:
                    best = np.minimum(best, router._core_distance(anchor)[indices] + router._depth[t])
            chosen += [core_edges[i] for i in np.flatnonzero(best + 1 == here - 1).tolist()]
        return chosen


def _twin_classes(topo: Topology) -> list[int]:
    """Node -> the first node of its twin class (switches with the same neighbours over same-rate,
    same-delay links; hosts are never merged)."""
    twin = list(range(topo.num_nodes))
    by_neighbourhood: dict[tuple, int] = {}
    for node in range(topo.num_nodes):
        if topo.is_switch[node]:
            key = tuple(
                sorted(
                    (topo.link_dst[k], topo.link_bytes_per_ns[k], topo.link_delay_ns[k])
                    for k in topo.out_links[node]
                )
            )
            twin[node] = by_neighbourhood.setdefault(key, node)
    return twin


def _bundles(topo: Topology, twin_class: list[int]) -> tuple[list[int], list[float]]:
    """Directed link -> bundle id, and each bundle's capacity (twin switches' links merged;
    `twin_class`: `_twin_classes(topo)`)."""
    bundle_ids: dict[tuple[int, int], int] = {}
    bundle_of: list[int] = []
    capacity: list[float] = []
    for k in range(topo.num_links):
        key = (twin_class[topo.link_src[k]], twin_class[topo.link_dst[k]])
        bundle = bundle_ids.setdefault(key, len(capacity))
        if bundle == len(capacity):
            capacity.append(0.0)
        capacity[bundle] += topo.link_bytes_per_ns[k]
        bundle_of.append(bundle)
    return bundle_of, capacity
