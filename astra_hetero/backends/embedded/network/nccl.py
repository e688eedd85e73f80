"""Collectives and transfers priced as NCCL runs them, as phase plans for the flow network.

For each communicator the planner lays out NCCL's rings on the topology: with k > 1 nodes, one ring per
member of a node (a channel), each visiting every node's members in a rotated order so that channel c
leaves every node through a different GPU (and its NIC) and enters the next node at the same local index
(rail-aligned). Those rings' link loads give the communicator's achievable bandwidths (each link at its
kind's achievable fraction, `nccl.yaml`): the rings' bus bandwidth, one member's intra-node rate, one
node's network rate. `astra_hetero.comm.tuning` turns them into NCCL's algorithm and protocol for the
collective's size, with its latency and algorithm bandwidth; a measured nccl-tests table of the
communicator's scope replaces that price when the run directory has one.

A plan is one phase on the rings' links whose bytes are scaled so that, alone on the network, it takes
exactly the predicted time: the achievable fraction and the protocol's overhead occupy the links like
extra bytes, so concurrent traffic still shares them max-min fairly. Reductions cost no extra memory
time: NCCL's achievable bandwidths include them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from astra_hetero.backends.embedded.network.flows import solo_rate
from astra_hetero.backends.embedded.network.phases import PhasePlan
from astra_hetero.backends.embedded.network.routing import Router
from astra_hetero.backends.embedded.rundir.comm_inputs import CommInputs
from astra_hetero.comm import tuning
from astra_hetero.comm.catalog import nccl_constants
from astra_hetero.comm.measured import ScopedTable, select_table
from astra_hetero.errors import RunDirError

Links = tuple[tuple[int, float], ...]
Plan = tuple[PhasePlan, ...]
_CLASS_ORDER = {"nvlink": 0, "pci": 1, "net": 2}


class NcclCommPlanner:
    def __init__(self, router: Router, machines: list[int], comm: CommInputs) -> None:
        self.router, self.machines, self.comm = router, machines, comm
        self.c = nccl_constants()
        self._efficiency, self._kinds = self._bundle_facts()
        latency = {kind: self._class(kind) for kind in set(self._kinds)}
        self._latency_classes = [latency[kind] for kind in self._kinds]  # per bundle
        self._p2p: dict[tuple[str, float, float, float], tuning.Choice] = {}  # p2p_choice's, by its inputs
        self._facts: dict[tuple[int, ...], _Facts] = {}
        self._plans: dict[tuple[Any, ...], tuple[PhasePlan, ...]] = {}
        self._choices: dict[tuple[Any, ...], tuple[str, str]] = {}  # same keys: (algorithm, protocol)
        self.chosen: dict[tuple[Any, ...], int] = {}  # (kind, ranks, nodes, bytes, algorithm, protocol)

    # --- the interface the engine calls ---------------------------------------------------------
    def collective(self, members: tuple[int, ...], kind: str, size: int) -> tuple[PhasePlan, ...]:
        key = (members, kind, size)
        plan = self._plans.get(key)
        if plan is None:
            if len(members) > 1:
                plan, self._choices[key] = self._collective(members, kind, size)
            self._plans[key] = plan = plan or ()
        return plan

    def transfer(self, src: int, dst: int, size: int) -> tuple[PhasePlan, ...]:
        key = ((src, dst), "p2p", size)
        plan = self._plans.get(key)
        if plan is None:
            plan, self._choices[key] = self._exchange(((src, dst),), "send_recv", size, size)
            self._plans[key] = plan
        return plan

    def choice(self, members: tuple[int, ...], kind: str, size: int) -> tuple[str, str] | None:
        """(algorithm, protocol) chosen for a collective (`kind` "p2p" and members (src, dst) for a
        transfer) once it has been planned; a measured table gives ("nccl-tests", its path)."""
        return self._choices.get((members, kind, size))

    def summary(self) -> list[dict[str, Any]]:
        """Each distinct choice (collective, ranks, nodes, bytes, algorithm, protocol) and how many
        plans (communicator or send pair, size) made it; a measured table shows as nccl-tests/path."""
        names = ("type", "num_ranks", "num_nodes", "bytes", "algorithm", "protocol")
        return [dict(zip(names, key, strict=True)) | {"plans": n} for key, n in sorted(self.chosen.items())]

    # --- collectives ------------------------------------------------------------------------------
    def _collective(self, members: tuple[int, ...], kind: str, size: int) -> tuple[Plan, tuple[str, str]]:
        n = len(members)
        if kind == "all_to_all":
            pairs = tuple((a, b) for a in members for b in members if a != b)
            return self._exchange(pairs, kind, size, size / n)
        facts = self._facts.get(members) or self._analyse(members)
        total = size * n if kind == tuning.ALL_GATHER else size  # NCCL's size: the whole buffer
        table = self._table(facts.scope, kind, facts.groups, n, facts.communicator.num_nodes)
        if table is not None:
            ratio = tuning.bus_factor(kind, n) / table.table.bus_factor
            time_us = table.table.time_us(total) * ratio
            latency_us = min(table.table.times_us[0] * ratio, time_us)
            chosen = ("nccl-tests", table.path)
        else:
            forced = self.comm.algorithm if kind == tuning.ALL_REDUCE else "auto"
            try:
                choice = tuning.choose(self.c, facts.communicator, kind, total, forced, self.comm.protocol)
            except ValueError as exc:
                raise RunDirError(f"collective on ranks {_ranks(members)}: {exc}") from None
            latency_us, time_us = choice.latency_us, choice.time_us(total)
            chosen = (choice.algorithm, choice.protocol)
        self._count(kind, facts, total, *chosen)
        phase = self._phase(
            facts.ring_links, size, latency_us, time_us - latency_us, self._paths(facts.pairs)
        )
        return (phase,), chosen

    def _analyse(self, members: tuple[int, ...]) -> _Facts:
        by_machine: dict[int, list[int]] = {}
        for rank in members:
            by_machine.setdefault(self.machines[rank], []).append(rank)
        locals_ = list(by_machine.values())
        num_nodes, per_node = len(locals_), max(len(local) for local in locals_)
        channels = per_node if num_nodes > 1 else 1
        rings = [_rotated_ring(locals_, c) for c in range(channels)] if num_nodes > 1 else [list(members)]
        pairs = [pair for ring in rings for pair in _ring_pairs(ring)]
        inter = [(a, b) for a, b in pairs if self.machines[a] != self.machines[b]]
        intra_rings = [_ring_pairs(local) for local in locals_ if len(local) > 1]
        intra_pairs = [pair for ring in intra_rings for pair in ring]
        ring_links = self._links(pairs)
        intra_kinds = {
            self._kinds[bundle] for pair in intra_pairs for bundle, _ in self.router.route(*pair).links
        }
        archs = [self.c.compute_capability[self.comm.architectures[r]] for r in members]
        communicator = tuning.Communicator(
            num_ranks=len(members),
            num_nodes=num_nodes,
            ranks_per_node=per_node,
            oldest_cc=min(archs),
            newest_cc=max(archs),
            intra_class="pci" if any(self._class(k) == "pci" for k in intra_kinds) else "nvlink",
            nvls_fabric=bool(intra_kinds) and intra_kinds == {"nvlink"},
            ring_busbw=channels * self._achievable(ring_links),
            intra_gbs=min((self._achievable(self._links(r)) for r in intra_rings), default=math.inf),
            net_gbs=channels * self._achievable(self._links(inter)) if inter else math.inf,
            channels=channels,
            net_hop_floor_us=max((self.router.route(a, b).latency_ns for a, b in inter), default=0) / 1000,
        )
        scope = "intra_node" if num_nodes == 1 else "inter_node"
        facts = _Facts(communicator, ring_links, scope, self._groups(members), tuple(pairs))
        self._facts[members] = facts
        return facts

    # --- point to point and all-to-all ------------------------------------------------------------
    def _exchange(
        self, pairs: tuple[tuple[int, int], ...], kind: str, size: int, per_pair: float
    ) -> tuple[Plan, tuple[str, str]]:
        """Concurrent sends of `per_pair` bytes each: a send/recv, or all-to-all as NCCL runs it
        (grouped sends). Protocol by the payload of one send, latency by the worst path's class."""
        links = self._links(pairs)
        ranks = {r for pair in pairs for r in pair}
        num_nodes = len({self.machines[r] for r in ranks})
        routes = [self.router.route(a, b) for a, b in pairs]
        scope = "inter_node" if num_nodes > 1 else "intra_node"
        table = self._table(scope, kind, self._groups(ranks), len(ranks), num_nodes)
        if table is not None:
            ratio = tuning.bus_factor(kind, len(ranks)) / table.table.bus_factor
            time_us = table.table.time_us(size) * ratio
            latency_us = min(table.table.times_us[0] * ratio, time_us)
            algorithm, protocol = "nccl-tests", table.path
        else:
            latency_of = self._latency_classes
            classes = {latency_of[bundle] for route in routes for bundle, _ in route.links}
            latency_class = (
                "net" if num_nodes > 1 else max(classes, key=_CLASS_ORDER.__getitem__, default="nvlink")
            )
            floor_us = max(route.latency_ns for route in routes) / 1000
            facts = (latency_class, self._achievable(links), per_pair, floor_us)
            choice = self._p2p.get(facts)
            if choice is None:  # the same for every pipeline neighbour across replicas: chosen once
                choice = self._p2p[facts] = tuning.p2p_choice(self.c, *facts)
            latency_us, time_us = choice.latency_us, choice.time_us(per_pair)
            algorithm, protocol = "p2p", choice.protocol
        key = (kind, len(ranks), num_nodes, size, algorithm, protocol)
        self.chosen[key] = self.chosen.get(key, 0) + 1
        paths = tuple(route.links for route in routes if route.links)  # `_paths`, routes at hand
        return (self._phase(links, size, latency_us, time_us - latency_us, paths),), (algorithm, protocol)

    # --- helpers ------------------------------------------------------------------------------------
    def _groups(self, ranks) -> frozenset[str]:
        names = self.comm.node_groups
        return frozenset(names[r] for r in ranks) if names else frozenset()

    def _table(
        self, scope: str, kind: str, groups: frozenset[str], num_ranks: int, num_nodes: int
    ) -> ScopedTable | None:
        if not self.comm.tables:
            return None
        return select_table(list(self.comm.tables), scope, kind, set(groups), num_ranks, num_nodes)

    def _count(self, kind: str, facts: _Facts, total: float, algorithm: str, protocol: str) -> None:
        t = facts.communicator
        key = (kind, t.num_ranks, t.num_nodes, int(total), algorithm, protocol)
        self.chosen[key] = self.chosen.get(key, 0) + 1

    def _phase(
        self, links: Links, size: int, latency_us: float, transfer_us: float, paths: tuple[Links, ...] = ()
    ) -> PhasePlan:
        """One phase that, alone on its links, takes latency + transfer: its bytes are scaled to
        `size` × (rate alone on the links) × transfer time / size; `paths`: `PhasePlan.paths`."""
        raw = solo_rate(links, self.router.bundle_bytes_per_ns) if links else 0.0
        transfer_ns = max(0.0, transfer_us * 1000.0)
        if size > 0 and links:
            return PhasePlan(links, raw * transfer_ns / size, round(latency_us * 1000.0), raw, paths=paths)
        return PhasePlan((), 0.0, round((latency_us * 1000.0) + transfer_ns), raw, paths=paths)

    def _paths(self, pairs) -> tuple[Links, ...]:
        """Each transfer's route, for the DCQCN fluid model (`PhasePlan.paths`)."""
        routes = (self.router.route(a, b) for a, b in pairs)
        return tuple(route.links for route in routes if route.links)

    def _links(self, pairs) -> Links:
        loads: dict[int, float] = {}
        route, get = self.router.route, loads.get
        for a, b in pairs:
            for bundle, share in route(a, b).links:
                loads[bundle] = get(bundle, 0.0) + share
        return tuple(sorted(loads.items()))

    def _achievable(self, links: Links) -> float:
        """The rate each transfer of a pattern gets alone, every link at its achievable fraction."""
        capacity, efficiency = self.router.bundle_bytes_per_ns, self._efficiency
        return min((efficiency[b] * capacity[b] / w for b, w in links), default=math.inf)

    def _class(self, kind: str) -> str:
        return self.c.link_kind(kind).latency_class

    def _bundle_facts(self) -> tuple[list[float], list[str]]:
        """Each bundle's achievable fraction (its links' kind, NVLink by the attached GPU's
        architecture) and kind."""
        topo, bundle_of = self.router.topo, self.router.bundle_of
        rank_of = {node: rank for rank, node in enumerate(topo.npus[: len(self.machines)])}
        efficiency = [1.0] * len(self.router.bundle_bytes_per_ns)
        kinds = [""] * len(efficiency)
        fraction: dict[tuple[str, str | None], float] = {}  # (kind, architecture) -> efficiency
        link_kinds, architectures, src, dst = (
            self.comm.link_kinds,
            self.comm.architectures,
            topo.link_src,
            topo.link_dst,
        )
        for link in range(topo.num_links):
            kind = link_kinds[link // 2]
            gpu = rank_of.get(src[link], rank_of.get(dst[link]))
            arch = architectures[gpu] if gpu is not None else None
            bundle = bundle_of[link]
            value = fraction.get((kind, arch))
            if value is None:
                value = fraction[(kind, arch)] = self.c.link_kind(kind).efficiency_for(arch)
            if value < efficiency[bundle]:
                efficiency[bundle] = value
            kinds[bundle] = kind
        return efficiency, kinds


@dataclass(frozen=True)
class _Facts:
    """A communicator as the tuner sees it, the links its rings load, its scope and node groups."""

    communicator: tuning.Communicator
    ring_links: Links
    scope: str  # intra_node | inter_node
    groups: frozenset[str]
    pairs: tuple[tuple[int, int], ...] = ()  # the rings' transfers


def _rotated_ring(locals_: list[list[int]], channel: int) -> list[int]:
    """Channel `channel`'s ring: node j's members from local index (channel - j), so that the member
    leaving node j and the one entering node j + 1 share a local index."""
    ring: list[int] = []
    for j, local in enumerate(locals_):
        start = (channel - j) % len(local)
        ring.extend(local[start:] + local[:start])
    return ring


def _ring_pairs(ring: list[int]) -> list[tuple[int, int]]:
    n = len(ring)
    return [(ring[i], ring[(i + 1) % n]) for i in range(n)] if n > 1 else []


def _ranks(members: tuple[int, ...]) -> str:
    shown = ", ".join(map(str, members[:8]))
    return f"[{shown}{', ...' if len(members) > 8 else ''}]"
