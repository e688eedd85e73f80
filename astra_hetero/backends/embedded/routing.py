"""Shortest-path routes with equal-cost multipath split, computed lazily and cached.

Routes follow hop count (as ns-3's global routing does) and only switches forward. Where several
next hops lie on shortest paths, the traffic divides equally among them at that hop, the fluid
limit of per-flow ECMP hashing; a route is therefore a set of directed links, each with the fraction
of the flow it carries. Distances to a destination come from one breadth-first search over the graph
(vectorised with numpy: a 1024-GPU fabric needs about a thousand of them).

Twin switches (same neighbours over same-rate, same-delay links, like the spines of a spine-leaf
fabric) always carry identical shares of every route, so their parallel links are merged into one
*bundle* with the summed capacity. Routes and the flow model work on bundles: a route through 128
spines is 6 bundles instead of 260 links, with exactly the same max-min rates.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from astra_hetero.backends.embedded.topology import Topology
from astra_hetero.errors import RunDirError


@dataclass(frozen=True)
class Route:
    links: tuple[tuple[int, float], ...]  # (bundle of directed links, fraction of the flow on it)
    latency_ns: int  # the slowest of the equal-cost paths


class Router:
    """Routes between NPUs of one topology; caches are per instance (per run)."""

    def __init__(self, topo: Topology) -> None:
        self.topo = topo
        degrees = np.array([len(links) for links in topo.out_links], dtype=np.int64)
        self._indptr = np.concatenate(([0], np.cumsum(degrees)))
        self._neighbours = np.array(
            [topo.link_dst[k] for links in topo.out_links for k in links], dtype=np.int64
        )
        self._forwards = np.array(topo.is_switch, dtype=bool)
        self._distances: dict[int, list[int]] = {}
        self._routes: dict[tuple[int, int], Route] = {}
        self.bundle_of, self.bundle_bytes_per_ns = _bundles(topo)

    def route(self, src_rank: int, dst_rank: int) -> Route:
        key = (src_rank, dst_rank)
        route = self._routes.get(key)
        if route is None:
            route = self._routes[key] = self._build(self.topo.npus[src_rank], self.topo.npus[dst_rank])
        return route

    def _distance_to(self, target: int) -> list[int]:
        """Hops from every node to `target` (-1: unreachable), as a list: routes read it an element at
        a time, which costs far less on a list than on an array."""
        cached = self._distances.get(target)
        if cached is not None:
            return cached
        dist = np.full(self.topo.num_nodes, -1, dtype=np.int64)
        dist[target] = 0
        frontier = np.array([target], dtype=np.int64)
        level = 0
        while frontier.size:
            level += 1
            starts, ends = self._indptr[frontier], self._indptr[frontier + 1]
            counts = ends - starts
            offsets = np.repeat(starts - np.concatenate(([0], np.cumsum(counts)[:-1])), counts)
            reached = self._neighbours[offsets + np.arange(counts.sum())]
            reached = np.unique(reached[dist[reached] < 0])
            dist[reached] = level
            frontier = reached[self._forwards[reached]]  # hosts are reached, never passed through
        self._distances[target] = distances = dist.tolist()
        return distances

    def _build(self, src: int, dst: int) -> Route:
        if src == dst:
            return Route((), 0)
        dist = self._distance_to(dst)
        if dist[src] < 0:
            raise RunDirError(f"topology: no path from node {src} to node {dst} through switches")
        topo = self.topo
        out_links, link_dst, is_switch = topo.out_links, topo.link_dst, topo.is_switch
        share = {src: 1.0}
        latency = {src: 0}
        links: dict[int, float] = {}
        frontier = [src]
        while frontier:
            following: list[int] = []
            for node in frontier:
                closer = dist[node] - 1
                next_links = [
                    k
                    for k in out_links[node]
                    if dist[link_dst[k]] == closer and (is_switch[link_dst[k]] or link_dst[k] == dst)
                ]
                part = share[node] / len(next_links)
                for k in next_links:
                    hop = link_dst[k]
                    bundle = self.bundle_of[k]
                    links[bundle] = links.get(bundle, 0.0) + part
                    if hop not in share and hop != dst:
                        following.append(hop)
                    share[hop] = share.get(hop, 0.0) + part
                    latency[hop] = max(latency.get(hop, 0), latency[node] + topo.link_delay_ns[k])
            frontier = following
        return Route(tuple(sorted(links.items())), latency[dst])


def _bundles(topo: Topology) -> tuple[list[int], list[float]]:
    """Directed link -> bundle id, and each bundle's capacity (twin switches' links merged)."""
    twin_class = list(range(topo.num_nodes))
    by_neighbourhood: dict[tuple, int] = {}
    for node in range(topo.num_nodes):
        if topo.is_switch[node]:
            key = tuple(
                sorted(
                    (topo.link_dst[k], topo.link_bytes_per_ns[k], topo.link_delay_ns[k])
                    for k in topo.out_links[node]
                )
            )
            twin_class[node] = by_neighbourhood.setdefault(key, node)
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
