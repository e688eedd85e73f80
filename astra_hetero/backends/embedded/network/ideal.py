"""The *ideal* communication model (ASTRA-sim's analytical one): a collective's phases come from its
algorithm (`algorithms`), a phase's transfers are routed and their link fractions summed into one
coflow description; the phase's latency is its step count times the slowest transfer's path latency;
links run at their full rate. Plans depend only on the group, the collective kind and the algorithm
(not on the size), so they are cached per run.
"""

from __future__ import annotations

from astra_hetero.backends.embedded.network import algorithms
from astra_hetero.backends.embedded.network.flows import solo_rate
from astra_hetero.backends.embedded.network.phases import PhasePlan
from astra_hetero.backends.embedded.network.routing import Router


class IdealCommPlanner:
    def __init__(
        self,
        router: Router,
        machines: list[int],
        algorithm: str,
        memory_bytes_per_ns: list[float] | None = None,
    ) -> None:
        self.router = router
        self.machines = machines
        self.algorithm = algorithm
        self.memory_bytes_per_ns = memory_bytes_per_ns  # per rank; None: reductions cost no time
        self._cache: dict[tuple[tuple[int, ...], str], tuple[PhasePlan, ...]] = {}

    def collective(self, members: tuple[int, ...], kind: str, size: int = 0) -> tuple[PhasePlan, ...]:
        key = (members, kind)
        plan = self._cache.get(key)
        if plan is None:
            phases = algorithms.phases_for(self.algorithm, kind, members, self.machines)
            plan = tuple(
                self._phase_plan(p.pairs, p.bytes_fraction, p.steps, self._memory_cost(p)) for p in phases
            )
            self._cache[key] = plan
        return plan

    def transfer(self, src: int, dst: int, size: int = 0) -> tuple[PhasePlan, ...]:
        key = ((src, dst), "p2p")
        plan = self._cache.get(key)
        if plan is None:
            plan = self._cache[key] = (self._phase_plan(((src, dst),), 1.0, 1),)
        return plan

    def choice(self, members: tuple[int, ...], kind: str, size: int) -> tuple[str, str] | None:
        """(algorithm, protocol): the model's algorithm for every collective, direct for transfers;
        the ideal model has no protocols."""
        return ("direct", "") if kind == "p2p" else (self.algorithm, "")

    def _memory_cost(self, phase: algorithms.Phase) -> float:
        if not phase.reduce_fraction or not self.memory_bytes_per_ns:
            return 0.0
        slowest = min(self.memory_bytes_per_ns[rank] for pair in phase.pairs for rank in pair)
        return 3 * phase.reduce_fraction / slowest  # read two chunks, write one, per reduced byte

    def _phase_plan(
        self, pairs: tuple[tuple[int, int], ...], fraction: float, steps: int, memory_ns_per_byte: float = 0.0
    ) -> PhasePlan:
        links: dict[int, float] = {}
        latency = 0
        paths, routed = [], []
        for src, dst in pairs:
            route = self.router.route(src, dst)
            latency = max(latency, route.latency_ns)
            for link, share in route.links:
                links[link] = links.get(link, 0.0) + share
            if route.links:
                paths.append(tuple(route.links))
                routed.append((src, dst))
        sorted_links = tuple(sorted(links.items()))
        solo = solo_rate(sorted_links, self.router.bundle_bytes_per_ns) if sorted_links else 0.0
        return PhasePlan(
            sorted_links,
            fraction,
            steps * latency,
            solo,
            memory_ns_per_byte,
            tuple(paths),
            max(1, steps),
            _predecessors(routed),
            tuple(src for src, _ in routed),
            tuple(dst for _, dst in routed),
        )


def _predecessors(pairs: list[tuple[int, int]]) -> tuple[int, ...]:
    """Per transfer of a ring step, the transfer into its sender (what it forwards next step): the
    nearest one before it (cyclically) whose destination is its source; -1 where none is."""
    out = []
    n = len(pairs)
    for k, (src, _) in enumerate(pairs):
        found = -1
        for back in range(1, n + 1):
            j = (k - back) % n
            if pairs[j][1] == src:
                found = j
                break
        out.append(found)
    return tuple(out)
