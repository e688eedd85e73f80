"""The engine's view of `dynamics.json`: compute speed over time, per-kernel jitter, link capacities at
each change, and background flows.

Link rates act on the router's bundles (twin links merged, see `network.routing`). ECMP splits a flow equally
over a bundle's links, so a bundle whose members run at rates c_i carries (members up) × min(c_i of
those up): a slower link is the bottleneck of its share, and a link that is down leaves the ECMP set,
its share moving to the others (one of two spines down halves a leaf's uplink capacity). A bundle with
no member up has capacity 0: its flows wait until a link comes back.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

import numpy as np

from astra_hetero import units
from astra_hetero.backends.embedded.network.routing import Router
from astra_hetero.backends.embedded.rundir.dynamics import Dynamics, TimedEvent


class SpeedProfile:
    """A GPU's compute speed over time (piecewise constant), and when work started at t ends."""

    def __init__(self, times: list[int], speeds: list[float]) -> None:
        self.times = times  # times[0] == 0; speeds[k] holds over [times[k], times[k + 1])
        self.speeds = speeds

    def finish(self, start: int, work_ns: int) -> int:
        """End of `work_ns` of static-speed work started at `start`: work done at a lower speed is
        stretched pro rata, also inside one kernel that a change interrupts."""
        k = bisect.bisect_right(self.times, start) - 1
        t, left = float(start), float(work_ns)
        while True:
            speed = self.speeds[k]
            nxt = self.times[k + 1] if k + 1 < len(self.times) else math.inf
            if left <= (nxt - t) * speed:
                return math.ceil(t + left / speed - 1e-6)
            left -= (nxt - t) * speed
            t, k = nxt, k + 1

    def work(self, start: int, end: int) -> float:
        """Static-speed work done between `start` and `end` (the integral of the speed)."""
        k = bisect.bisect_right(self.times, start) - 1
        t, done = float(start), 0.0
        while t < end:
            nxt = min(self.times[k + 1] if k + 1 < len(self.times) else math.inf, end)
            done += (nxt - t) * self.speeds[k]
            t, k = nxt, k + 1
        return done


def speed_profiles(dynamics: Dynamics, ranks: list[int]) -> list[SpeedProfile | None]:
    """Per simulated rank (`ranks[i]` is its rank), its profile, or None at constant full speed."""
    events = dynamics.of_kind("device_slowdown")
    out: list[SpeedProfile | None] = []
    for rank in ranks:
        mine = [e for e in events if rank in e.ranks]
        if not mine:
            out.append(None)
            continue
        times = sorted({0, *(e.start_ns for e in mine), *(e.end_ns for e in mine if e.end_ns is not None)})
        speeds = [math.prod(e.factor for e in mine if e.active(t)) for t in times]
        out.append(SpeedProfile(times, speeds))
    return out


class Jitter:
    """Per-kernel factors exp(N(0, sigma²)), drawn per (event seed, rank, iteration): the same seed
    gives the same factors whatever else the run holds, and each rank its own stream."""

    def __init__(self, events: list[TimedEvent], ranks: list[int], lengths: list[int]) -> None:
        self.events = events
        self.ranks = ranks
        self.lengths = lengths
        self._cache: dict[tuple[int, int, int], list[float]] = {}

    def factor(self, row: int, iteration: int, local: int, now: int) -> float:
        f = 1.0
        for k, e in enumerate(self.events):
            if e.start_ns <= now and (e.end_ns is None or now < e.end_ns):  # `e.active(now)`, inlined
                draws = self._cache.get((k, row, iteration))
                f *= (draws if draws is not None else self._draws(k, row, iteration))[local]
        return f

    def whole_iteration(self, row: int, iteration: int) -> np.ndarray:
        """The factor of every node of a rank's iteration when every event lasts the whole run: the
        product over the events, in their order (as `factor` multiplies them)."""
        f = np.ones(self.lengths[row])
        for k in range(len(self.events)):
            f = f * self._factors(k, row, iteration)
        return f

    def _draws(self, k: int, row: int, iteration: int) -> list[float]:
        draws = self._cache[(k, row, iteration)] = self._factors(k, row, iteration).tolist()
        self._cache.pop((k, row, iteration - 1), None)  # a rank never looks back
        return draws

    def _factors(self, k: int, row: int, iteration: int) -> np.ndarray:
        e = self.events[k]
        rng = np.random.default_rng([e.seed, self.ranks[row], iteration])
        return np.exp(rng.normal(0.0, e.sigma, self.lengths[row]))


@dataclass(frozen=True)
class LinkChange:
    time_ns: int
    capacities: dict[int, float]  # bundle -> its capacity from now on


@dataclass(frozen=True)
class Background:
    event: TimedEvent
    links: tuple[tuple[int, float], ...]  # (bundle, share) along its route
    lines: tuple[int, ...]  # topology.txt link lines it loads


def bundle_members(router: Router) -> list[list[int]]:
    members: list[list[int]] = [[] for _ in router.bundle_bytes_per_ns]
    for link, bundle in enumerate(router.bundle_of):
        members[bundle].append(link)
    return members


def link_changes(dynamics: Dynamics, router: Router, members: list[list[int]]) -> list[LinkChange]:
    """The bundle capacities at each instant a link_rate event starts or ends."""
    events = dynamics.of_kind("link_rate")
    touched: dict[int, list[TimedEvent]] = {}  # directed link -> the events scaling it
    for e in events:
        for line in e.links:
            for link in (2 * line, 2 * line + 1):
                touched.setdefault(link, []).append(e)
    bundles = sorted({router.bundle_of[link] for link in touched})
    times = sorted({t for e in events for t in (e.start_ns, e.end_ns) if t is not None})
    changes = []
    for t in times:
        capacities = {}
        for b in bundles:
            factors = [
                math.prod(e.factor for e in touched.get(link, ()) if e.active(t)) for link in members[b]
            ]
            up = [f for f in factors if f > 0]
            capacities[b] = router.bundle_bytes_per_ns[b] * len(up) / len(factors) * min(up, default=0.0)
        changes.append(LinkChange(t, capacities))
    return changes


def background_flows(dynamics: Dynamics, router: Router, members: list[list[int]]) -> list[Background]:
    """Each background_traffic event as a flow from its source node's NIC to its destination's: the
    route between the nodes' first GPUs without the GPU's own links (the engine caps it at `gbps`
    with a virtual link of its own)."""
    topo = router.topo
    out = []
    for e in dynamics.of_kind("background_traffic"):
        route = router.route(e.src_rank, e.dst_rank)
        links = tuple(
            (b, share)
            for b, share in route.links
            if all(topo.is_switch[topo.link_src[m]] and topo.is_switch[topo.link_dst[m]] for m in members[b])
        )
        lines = tuple(sorted({m // 2 for b, _ in links for m in members[b]}))
        out.append(Background(e, links, lines))
    return out


def link_keys(changes: list[LinkChange], backgrounds: list[Background]) -> dict[int, tuple[object, ...]]:
    """Per bundle that an event changes or loads, what it sees of them over the run: folding keeps such
    bundles in link classes of their own (bundles with equal keys change alike at every instant)."""
    keys: dict[int, tuple[object, ...]] = {}
    for k, change in enumerate(changes):
        for b, capacity in change.capacities.items():
            keys[b] = (*keys.get(b, ()), (k, capacity))
    for k, background in enumerate(backgrounds):
        for b, share in background.links:
            keys[b] = (*keys.get(b, ()), ("background", k, share))
    return keys


def background_capacities(backgrounds: list[Background]) -> list[float]:
    return [units.gbps_to_bytes_per_ns(b.event.gbps) for b in backgrounds]
