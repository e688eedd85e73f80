"""Flow-level network: max-min fair sharing of directed links, recomputed where a change reaches.

A flow here is a *coflow*: one or more sub-flows (the N neighbour transfers of a ring step, one
transfer of a send) that advance in lock step at a common rate r, each carrying `bytes` bytes. Its
`links` give, for every directed link, the summed weight w of its sub-flows there (ECMP spreads a
sub-flow over equal-cost paths, so w may be fractional); the flow uses w·r of the link. Rates are the
weighted max-min fair allocation: progressive filling raises every unfrozen flow's rate together and
freezes the flows of each link as it saturates.

Recomputation is local. A link is *slack* when even every flow on it at its solo rate (the rate it
would get alone) would not fill it; a slack link can never limit anyone, so it neither joins flows
into one component nor enters the filling. Adding a flow whose links all have spare capacity, and
which gets at least the rate of every other flow on the link that limits it, leaves every other
rate fair; removing a flow that
was alone on each of its saturated links frees only capacity nobody is waiting for. Otherwise the
allocation is recomputed over the connected component (flows linked through shared links) of the change.
"""

from __future__ import annotations

import heapq
import math

_EPS = 1e-9
NEVER_NS = 1 << 62  # the finish time of a flow with no rate: after every real event
_SLACK = 1e-6  # margin below capacity for a link to count as slack (demand is a float sum)


def solo_rate(links: tuple[tuple[int, float], ...], capacities: list[float]) -> float:
    """The rate a flow over `links` gets when it is alone on them."""
    return min(capacities[link] / weight for link, weight in links)


class Flow:
    """`solo_rate` is the flow's `solo_rate(links, capacities)`: callers that start many flows over
    the same links pass it, computed once; 0 (unknown) makes `FlowNetwork.add` compute it."""

    __slots__ = ("links", "remaining", "rate", "solo_rate", "updated_at", "version", "owner")

    def __init__(
        self, links: tuple[tuple[int, float], ...], num_bytes: float, owner: object, solo_rate: float = 0.0
    ) -> None:
        self.links = links
        self.remaining = float(num_bytes)
        self.rate = 0.0
        self.solo_rate = solo_rate
        self.updated_at = 0
        self.version = 0
        self.owner = owner

    def finish_time(self, now: int) -> int:
        try:
            return now + max(0, math.ceil(self.remaining / self.rate - 1e-6))
        except ZeroDivisionError:  # a flow on a link that is down (dynamics) waits for it
            return now if self.remaining <= 0 else NEVER_NS


class FlowNetwork:
    def __init__(self, capacities: list[float]) -> None:
        self.capacity = list(capacities)
        self.load = [0.0] * len(capacities)
        self.demand = [0.0] * len(capacities)  # sum over users of weight x solo rate
        self.users: list[dict[Flow, float]] = [{} for _ in capacities]
        self.num_recomputes = 0

    def add(self, flow: Flow, now: int) -> list[Flow]:
        """Start `flow` at `now`; return the flows (it included) whose rate, hence finish time, changed."""
        flow.updated_at = now
        users, demand = self.users, self.demand
        if not flow.solo_rate:
            flow.solo_rate = solo_rate(flow.links, self.capacity)
        solo = flow.solo_rate
        for link, _ in flow.links:  # a loop rather than any(): most flows find every link idle
            if users[link]:
                break
        else:
            return self._add_alone(flow)
        for link, weight in flow.links:
            users[link][flow] = weight
            demand[link] += weight * solo
        if self._try_fast_add(flow):
            flow.version += 1
            return [flow]
        return self._recompute([flow], now)

    def _add_alone(self, flow: Flow) -> list[Flow]:
        """The common case of a flow on idle links: it runs at its solo rate and changes nobody's.

        Idle links hold exactly zero load and demand (see `remove`), so setting them gives the same
        floats as the general path's sums."""
        flow.rate = rate = flow.solo_rate
        users, load, demand = self.users, self.load, self.demand
        for link, weight in flow.links:
            users[link][flow] = weight
            load[link] = demand[link] = weight * rate
        flow.version += 1
        return [flow]

    def remove(self, flow: Flow, now: int) -> list[Flow]:
        """Take `flow` out at `now`; return the other flows whose rate changed."""
        seeds: list[Flow] = []
        load, demand, all_users, capacity = self.load, self.demand, self.users, self.capacity
        rate, solo = flow.rate, flow.solo_rate
        for link, weight in flow.links:
            users = all_users[link]
            del users[flow]
            if not users:  # reset rather than subtract, so rounding never accumulates on an idle link
                load[link] = demand[link] = 0.0
                continue
            if load[link] >= capacity[link] * (1 - _EPS):  # saturated: the others may speed up
                seeds.extend(users)
            load[link] -= weight * rate
            demand[link] -= weight * solo
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
            if spare / weight <= limit and all(
                other.rate <= limit for other in self.users[link] if other is not flow
            ):
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
                if link in links or self.demand[link] < self.capacity[link] * (1 - _SLACK):
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
        in_component = set(links)
        changed = []
        for f, old in zip(flows, old_rates, strict=True):
            if f.rate != old:
                for link, weight in f.links:
                    if link not in in_component:  # slack links: keep their load current
                        self.load[link] += weight * (f.rate - old)
            if f.version == 0 or abs(f.rate - old) > _EPS * max(f.rate, old):
                f.version += 1
                changed.append(f)
        return changed

    def _fill(self, flows: list[Flow], links: list[int]) -> None:
        """Weighted progressive filling over one component (every flow of its links is in `flows`).

        Each link's saturation level spare/weight only grows as flows freeze elsewhere, so a heap of
        levels with lazy re-insertion pops links in saturation order.
        """
        spare = {link: self.capacity[link] for link in links}
        weight_sum = dict.fromkeys(links, 0.0)
        for f in flows:
            for link, weight in f.links:
                if link in weight_sum:
                    weight_sum[link] += weight
        heap = [(spare[link] / w, link) for link, w in weight_sum.items()]
        heapq.heapify(heap)
        frozen: set[Flow] = set()
        while heap:
            level, link = heapq.heappop(heap)
            w = weight_sum[link]
            if w <= _EPS:
                continue
            current = spare[link] / w
            if current > level * (1 + _EPS):
                heapq.heappush(heap, (current, link))
                continue
            for f in self.users[link]:
                if f in frozen:
                    continue
                frozen.add(f)
                f.rate = current
                for other, weight in f.links:
                    if other in spare:
                        spare[other] -= weight * current
                        weight_sum[other] -= weight
            weight_sum[link] = 0.0
        for link in links:
            self.load[link] = self.capacity[link] - spare[link]


class DynamicNetwork(FlowNetwork):
    """A network whose capacities change during the run (`set_capacities`); flows take their solo
    rate from the capacities of the moment they start, not from plans made for the static network."""

    def __init__(self, capacities: list[float]) -> None:
        super().__init__(capacities)
        self.static = list(capacities)
        self.rescaled = False  # some capacity differs from the static one the plans' solo rates used

    def add(self, flow: Flow, now: int) -> list[Flow]:
        if self.rescaled:
            flow.solo_rate = solo_rate(flow.links, self.capacity)
        return super().add(flow, now)

    def set_capacities(self, capacities: dict[int, float], now: int) -> list[Flow]:
        """Change link capacities at `now` and re-solve every rate (events are rare: a global fill);
        returns every flow, each with a new version."""
        flows = list(dict.fromkeys(f for users in self.users for f in users))
        for f in flows:
            f.remaining = max(0.0, f.remaining - f.rate * (now - f.updated_at))
            f.updated_at = now
        for link, capacity in capacities.items():
            self.capacity[link] = capacity
        self.rescaled = self.capacity != self.static
        links = [link for link, users in enumerate(self.users) if users]
        for link in links:
            self.demand[link] = 0.0
        for f in flows:
            f.solo_rate = solo_rate(f.links, self.capacity)
            for link, weight in f.links:
                self.demand[link] += weight * f.solo_rate
        self.num_recomputes += 1
        self._fill(flows, links)
        for f in flows:
            f.version += 1
        return flows
