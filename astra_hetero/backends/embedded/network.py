"""Flow-level network: max-min fair sharing of directed links, recomputed where a change reaches.

A flow here is a *coflow*: one or more sub-flows (the N neighbour transfers of a ring step, one
transfer of a send) that advance in lock step at a common rate r, each carrying `bytes` bytes. Its
`links` give, for every directed link, the summed weight w of its sub-flows there (ECMP spreads a
sub-flow over equal-cost paths, so w may be fractional); the flow uses w·r of the link. Rates are the
weighted max-min fair allocation: progressive filling raises every unfrozen flow's rate together and
freezes the flows of each link as it saturates.

Recomputation is local. Adding a flow whose links all have spare capacity, and which gets at least the
rate of every other flow on the link that limits it, leaves every other rate fair; removing a flow that
was alone on each of its saturated links frees only capacity nobody is waiting for. Otherwise the
allocation is recomputed over the connected component (flows linked through shared links) of the change.
"""

from __future__ import annotations

import math

_EPS = 1e-9


class Flow:
    __slots__ = ("fid", "links", "remaining", "rate", "updated_at", "version", "owner")

    def __init__(self, fid: int, links: tuple[tuple[int, float], ...], num_bytes: float, owner: object) -> None:
        self.fid = fid
        self.links = links
        self.remaining = float(num_bytes)
        self.rate = 0.0
        self.updated_at = 0
        self.version = 0
        self.owner = owner

    def finish_time(self, now: int) -> int:
        return now + max(0, math.ceil(self.remaining / self.rate - 1e-6))


class FlowNetwork:
    def __init__(self, capacities: list[float]) -> None:
        self.capacity = list(capacities)
        self.load = [0.0] * len(capacities)
        self.users: list[dict[Flow, float]] = [{} for _ in capacities]
        self.num_recomputes = 0

    def add(self, flow: Flow, now: int) -> list[Flow]:
        """Start `flow` at `now`; return the flows (it included) whose rate, hence finish time, changed."""
        flow.updated_at = now
        for link, weight in flow.links:
            self.users[link][flow] = weight
        if self._try_fast_add(flow):
            flow.version += 1
            return [flow]
        return self._recompute([flow], now)

    def remove(self, flow: Flow, now: int) -> list[Flow]:
        """Take `flow` out at `now`; return the other flows whose rate changed."""
        seeds: list[Flow] = []
        for link, weight in flow.links:
            users = self.users[link]
            del users[flow]
            saturated = self.load[link] >= self.capacity[link] * (1 - _EPS)
            self.load[link] -= weight * flow.rate
            if saturated and users:
                seeds.extend(users)
        return self._recompute(seeds, now) if seeds else []

    def _try_fast_add(self, flow: Flow) -> bool:
        rate = math.inf
        for link, weight in flow.links:
            spare = self.capacity[link] - self.load[link]
            if spare <= self.capacity[link] * _EPS:
                return False
            rate = min(rate, spare / weight)
        limit = rate * (1 + _EPS)
        for link, weight in flow.links:
            spare = self.capacity[link] - self.load[link]
            if spare / weight <= limit and all(other.rate <= limit for other in self.users[link] if other is not flow):
                break
        else:
            return False
        flow.rate = rate
        for link, weight in flow.links:
            self.load[link] += weight * rate
        return True

    def _component(self, seeds: list[Flow]) -> tuple[list[Flow], list[int]]:
        flows = dict.fromkeys(seeds)
        links: dict[int, None] = {}
        stack = list(flows)
        while stack:
            for link, _ in stack.pop().links:
                if link in links:
                    continue
                links[link] = None
                for other in self.users[link]:
                    if other not in flows:
                        flows[other] = None
                        stack.append(other)
        return list(flows), list(links)

    def _recompute(self, seeds: list[Flow], now: int) -> list[Flow]:
        self.num_recomputes += 1
        flows, links = self._component(seeds)
        old_rates = [f.rate for f in flows]
        for f in flows:
            f.remaining = max(0.0, f.remaining - f.rate * (now - f.updated_at))
            f.updated_at = now
        self._fill(flows, links)
        changed = []
        for f, old in zip(flows, old_rates, strict=True):
            if f.version == 0 or abs(f.rate - old) > _EPS * max(f.rate, old):
                f.version += 1
                changed.append(f)
        return changed

    def _fill(self, flows: list[Flow], links: list[int]) -> None:
        """Weighted progressive filling over one component (every flow of its links is in `flows`)."""
        spare = {link: self.capacity[link] for link in links}
        weight_sum = dict.fromkeys(links, 0.0)
        for f in flows:
            for link, weight in f.links:
                weight_sum[link] += weight
        unfrozen = set(flows)
        while unfrozen:
            level = min(spare[link] / w for link, w in weight_sum.items() if w > _EPS)
            limit = level * (1 + _EPS)
            saturated = [link for link, w in weight_sum.items() if w > _EPS and spare[link] / w <= limit]
            for link in saturated:
                for f in self.users[link]:
                    if f not in unfrozen:
                        continue
                    unfrozen.discard(f)
                    f.rate = level
                    for other_link, weight in f.links:
                        spare[other_link] -= weight * level
                        weight_sum[other_link] -= weight
            for link in saturated:
                weight_sum.pop(link, None)
        for link in links:
            self.load[link] = sum(w * f.rate for f, w in self.users[link].items())
