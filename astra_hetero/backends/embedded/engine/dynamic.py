"""The engine with time: several back-to-back iterations and the timed events of `dynamics.json`.

Iterations: each rank starts iteration i+1 of its trace as soon as its own nodes of iteration i are
done (as a training loop does); collectives and transfers of later iterations match in issue order
like any others. Events: compute runs at the speed profile of its GPU (stretched pro rata inside a
kernel a slowdown interrupts) times its jitter draw; link rate changes and background flows are
timed events that re-solve the max-min rates at their instant (`network.flows.DynamicNetwork`). A flow
whose every path is down waits; a run left with only waiting flows fails naming the links.

`DynamicEngine` runs on the static engine's inlined hot paths: a rank's iteration ends when the last
of its sinks (nodes without successors; every node precedes one) completes, reported through the
engine's `_sink_done` hook. Only `TimedComputeEngine`, chosen when a slowdown or jitter changes compute
times, replaces the compute paths with plain calls through `_compute_end`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from astra_hetero.backends.embedded.engine import events
from astra_hetero.backends.embedded.engine.comm import PlainComm
from astra_hetero.backends.embedded.engine.records import Comm, EngineOutcome
from astra_hetero.backends.embedded.engine.static import Engine
from astra_hetero.backends.embedded.engine.timed import (
    Background,
    Jitter,
    LinkChange,
    background_capacities,
    background_flows,
    bundle_members,
    link_changes,
    speed_profiles,
)
from astra_hetero.backends.embedded.engine.workload import FlatWorkload
from astra_hetero.backends.embedded.folding.comm import FoldedComm
from astra_hetero.backends.embedded.network.dcqcn import DcqcnNetwork, FluidFlow
from astra_hetero.backends.embedded.network.flows import NEVER_NS, DynamicNetwork, Flow
from astra_hetero.backends.embedded.network.routing import Router
from astra_hetero.backends.embedded.rundir.dynamics import Dynamics
from astra_hetero.backends.embedded.trace.records import KIND_COMP
from astra_hetero.errors import FieldError

_BACKGROUND_BYTES = 1e30  # a background flow never runs out; its end is a timed event
FluidFactory = Callable[[list[float], dict[int, int]], DcqcnNetwork | None]


class DynamicEngine(Engine):
    def __init__(
        self,
        workload: FlatWorkload,
        comm: PlainComm | FoldedComm,
        dynamics: Dynamics,
        iterations: int | Sequence[int],
        router: Router,
        max_comm_in_flight: int = 0,
        keep_history: bool = True,
        link_class: dict[int, int] | None = None,
        comm_slowdown: float = 0.0,
        lowest_first: bool = False,
        starts_ns: Sequence[int] | None = None,
        fluid: FluidFactory | None = None,
    ) -> None:
        """`link_class`: bundle -> the engine's link standing for it when the ranks are folded (None:
        rank by rank, the engine's links are the router's bundles). `iterations`: one count for every
        rank (row), or one per row, 0 for a row that does not run (a job left out); `starts_ns`: when
        each row starts its first iteration (default 0: every row at once). `fluid`: builds the DCQCN
        fluid network over the engine's links (capacities, bundle -> engine link) instead of max-min
        flows; it may decline (None)."""
        super().__init__(workload, comm, max_comm_in_flight, lowest_first)
        w = workload
        rows = len(w.ranks)
        self.num_iterations = [iterations] * rows if isinstance(iterations, int) else list(iterations)
        self.starts_ns = list(starts_ns) if starts_ns is not None else [0] * rows
        self.comm_slowdown = comm_slowdown
        ends = [*w.offsets[1:], len(w.kinds)]
        self.lengths = [end - first for first, end in zip(w.offsets, ends, strict=True)]
        is_sink = np.diff(np.asarray(w.successor_bounds, dtype=np.int64)) == 0
        self.sinks = np.bincount(np.asarray(w.rank_of)[is_sink], minlength=rows).tolist()
        self.left = list(self.sinks)  # sinks of the current iteration still to complete, per rank
        self.count_sinks = True
        self.iteration = [0] * rows
        self.iteration_ends: list[list[int]] = [[] for _ in w.ranks]
        self.ranks_left = sum(1 for n, k in zip(self.lengths, self.num_iterations, strict=True) if n and k)
        self.roots_of: list[list[int]] = [[] for _ in w.ranks]
        for g in w.roots:
            self.roots_of[w.rank_of[g]].append(g)
        self.keep_history = keep_history
        self.history: list[tuple[int, list[int], list[int]]] = []  # (row, starts, ends) of past iterations
        self.profiles = speed_profiles(dynamics, w.ranks)
        jitters = dynamics.of_kind("jitter")
        self.jitter = Jitter(jitters, w.ranks, self.lengths) if jitters else None
        self.router = router
        self.link_events = dynamics.of_kind("link_rate")
        self.members = bundle_members(router)
        capacities = list(comm.capacities)
        # bundle -> engine link: the bundle itself rank by rank, its link class when folded
        link_of = dict(link_class) if link_class is not None else {b: b for b in range(len(capacities))}

        def engine_link(bundle: int) -> int:
            link = link_of.get(bundle)
            if link is None:  # no job flow uses it (a background flow may): a link of its own
                link = link_of[bundle] = len(capacities)
                capacities.append(router.bundle_bytes_per_ns[bundle])
            return link

        self.changes = [
            LinkChange(c.time_ns, {engine_link(b): cap for b, cap in c.capacities.items()})
            for c in link_changes(dynamics, router, self.members)
        ]
        self.backgrounds = background_flows(dynamics, router, self.members)
        # a folded link class loads each of its bundles alike: the flow's weight on it is that of one
        # bundle (as the quotient's flows carry theirs), not the sum over the class
        routes = [tuple({engine_link(b): share for b, share in bg.links}.items()) for bg in self.backgrounds]
        # each background flow is capped at its rate by a virtual link of its own, after the real ones
        self.background_links = [(*route, (len(capacities) + k, 1.0)) for k, route in enumerate(routes)]
        self.bundles_of: dict[int, list[int]] = {}  # engine link -> the bundles it stands for
        for bundle, link in link_of.items():
            self.bundles_of.setdefault(link, []).append(bundle)
        all_capacities = [*capacities, *background_capacities(self.backgrounds)]
        network = fluid(all_capacities, link_of) if fluid is not None else None
        if network is not None:
            self.net, self.fluid, self.flow_type = network, True, FluidFlow
        else:
            self.net = DynamicNetwork(all_capacities)
        self._background_flow: dict[int, Flow] = {}

    def run(self) -> EngineOutcome:
        queue = self.queue
        later: dict[int, list[int]] = {}  # start time -> rows that start then
        for row in range(len(self.w.ranks)):
            if self.num_iterations[row]:
                self._new_iteration(row)
                if self.starts_ns[row]:
                    later.setdefault(self.starts_ns[row], []).append(row)
        for g in self.w.roots:
            row = self.rank_of[g]
            if self.num_iterations[row] and not self.starts_ns[row]:
                self._ready(g, 0)
        for time_ns, rows in sorted(later.items()):
            queue.push(time_ns, events.TIMED, RowsStart(rows))
        for change in self.changes:
            queue.push(change.time_ns, events.TIMED, change)
        for k, b in enumerate(self.backgrounds):
            queue.push(b.event.start_ns, events.TIMED, ("start", k))
            if b.event.end_ns is not None:
                queue.push(b.event.end_ns, events.TIMED, ("stop", k))
        heap = queue.heap
        while heap and self.ranks_left:
            now, kind, payload = queue.pop()
            if kind == events.COMPUTE_DONE:
                self._compute_done(payload, now)
            elif kind == events.FLOW_DONE:
                flow, version = payload
                if version != flow.version or isinstance(flow.owner, Background):
                    continue
                if now >= NEVER_NS:
                    raise self._stuck(flow)
                self._flow_done(flow, now)
            elif kind == events.PHASE_DONE:
                self._phase_done(payload, now)
            elif kind == events.CPU_DONE:
                self._cpu_done(payload, now)
            elif kind == events.NET_STEP:
                self._net_step(payload, now)
            else:
                self._timed(payload, now)
        self._new_iteration(-1)
        return self._outcome()

    # --- timed events --------------------------------------------------------------------------------
    def _timed(self, payload: object, now: int) -> None:
        if isinstance(payload, RowsStart):
            for row in payload.rows:
                for root in self.roots_of[row]:
                    self._ready(root, now)
            return
        if isinstance(payload, LinkChange):
            self._push_flows(self.net.set_capacities(payload.capacities, now), now)
            return
        action, k = payload  # type: ignore[misc]
        if action == "start":
            flow = self._background_flow[k] = self.flow_type(
                self.background_links[k], _BACKGROUND_BYTES, self.backgrounds[k]
            )
            self._push_flows(self.net.add(flow, now), now)
        else:
            flow = self._background_flow.pop(k)
            flow.version = -1
            self._push_flows(self.net.remove(flow, now), now)

    def _stuck(self, flow: Flow) -> FieldError:
        """The error of a run that can never finish: `flow` waits on links that are down for good. It
        names the events that took them down (input the user can change: exit 2) and a few links."""
        topo, capacity = self.router.topo, self.net.capacity
        down = [b for link, _ in flow.links if capacity[link] <= 0 for b in self.bundles_of.get(link, ())]
        lines = sorted({link // 2 for b in down for link in self.members[b]})
        names = [f"line {line} ({topo.link_src[2 * line]} - {topo.link_dst[2 * line]})" for line in lines[:4]]
        if len(lines) > 4:
            names.append(f"and {len(lines) - 4} more")
        culprits = [
            e.index
            for e in self.link_events
            if e.factor == 0 and e.end_ns is None and set(e.links).intersection(lines)
        ]
        what = getattr(flow.owner, "group", "a flow")
        field = ", ".join(f"dynamics[{i}]" for i in culprits) or "dynamics"
        return FieldError(
            field,
            f"the run can never finish: {what!r} needs link(s) {', '.join(names) or 'with no capacity'} "
            "of ns3/topology.txt, which this event takes down for good and no path avoids; give it an "
            "end_ms",
        )

    def _unfinished(self) -> bool:
        """Rows that do not run (0 iterations) keep their nodes unstarted; the others must finish."""
        if all(self.num_iterations):
            return super()._unfinished()
        end_ns, offsets, lengths = self.end_ns, self.w.offsets, self.lengths
        return any(
            -1 in end_ns[offsets[row] : offsets[row] + lengths[row]]
            for row, count in enumerate(self.num_iterations)
            if count
        )

    # --- iterations ----------------------------------------------------------------------------------
    def _new_iteration(self, row: int) -> None:
        """Called before a rank (row) starts an iteration, and with -1 when the run is over."""

    def _sink_done(self, g: int, now: int) -> None:
        """Every node precedes a sink (a node without successors) of its rank, so the rank's iteration
        is done when its last sink completes."""
        rank = self.rank_of[g]
        self.left[rank] -= 1
        if not self.left[rank]:
            self._iteration_done(rank, now)

    def _iteration_done(self, rank: int, now: int) -> None:
        self.iteration_ends[rank].append(now)
        if self.iteration[rank] + 1 == self.num_iterations[rank]:
            self.ranks_left -= 1
            return
        self.iteration[rank] += 1
        first, n = self.w.offsets[rank], self.lengths[rank]
        end = first + n
        if self.keep_history:
            self.history.append((rank, self.start_ns[first:end], self.end_ns[first:end]))
        self.pending[first:end] = self.w.num_deps[first:end]
        self.start_ns[first:end] = [-1] * n
        self.end_ns[first:end] = [-1] * n
        self.left[rank] = self.sinks[rank]
        self._new_iteration(rank)
        for root in self.roots_of[rank]:
            self._ready(root, now)


@dataclass(frozen=True)
class RowsStart:
    """A timed event: these rows (a job that starts later than 0) start their first iteration."""

    rows: list[int]


class TimedComputeEngine(DynamicEngine):
    """A dynamic engine whose compute runs slower at times (device slowdowns) or per kernel (jitter):
    every compute start goes through `_compute_end` instead of the inlined static duration."""

    def _complete(self, g: int, now: int) -> None:
        self.end_ns[g] = now
        first, end = self.successor_bounds[g], self.successor_bounds[g + 1]
        if first == end:
            self._sink_done(g, now)
            return
        pending, kinds, busy, rank_of = self.pending, self.kinds, self.busy, self.rank_of
        for s in self.successors[first:end]:
            pending[s] -= 1
            if pending[s]:
                continue
            if kinds[s] == KIND_COMP:  # the most frequent case of `_ready`, without its dispatch
                rank = rank_of[s]
                if busy[rank]:
                    self.ready_compute[rank].append(s)
                else:
                    self._start_compute(rank, s, now)
            else:
                self._ready(s, now)

    def _compute_end(self, rank: int, g: int, now: int) -> int:
        work = self.durations_ns[g]
        jitter = self.jitter
        if jitter is not None and work:
            work = round(work * jitter.factor(rank, self.iteration[rank], g - self.w.offsets[rank], now))
        profile = self.profiles[rank]
        return profile.finish(now, work) if profile is not None else now + work

    def _start_compute(self, rank: int, g: int, now: int) -> None:
        self._account(rank, now)
        self.busy[rank] = True
        self.start_ns[g] = now
        self.queue.push_batched(self._compute_end(rank, g, now), events.COMPUTE_DONE, g)

    def _compute_done(self, nodes: list[int], now: int) -> None:
        for g in nodes:
            rank = self.rank_of[g]
            self._complete(g, now)  # still busy: compute nodes it releases queue up behind earlier ones
            self._account(rank, now)
            waiting = self.ready_compute[rank]
            if waiting:
                nxt = waiting.popleft()
                self.start_ns[nxt] = now
                self.queue.push_batched(self._compute_end(rank, nxt, now), events.COMPUTE_DONE, nxt)
            else:
                self.busy[rank] = False


class ContendedComputeEngine(TimedComputeEngine):
    """Compute that shares its GPU with communication kernels (`compute.comm_overlap_slowdown` s): a
    kernel runs at 1/(1 + s) of its speed while its rank has a collective or transfer in flight, pro
    rata inside a kernel that communication starts or stops beside (as a slowdown event stretches it).
    A kernel's end is re-timed at each such change; the events of the old end are dropped as stale."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        rows = len(self.w.ranks)
        self.running = [-1] * rows  # the compute node a rank runs, or -1
        self.work_left = [0.0] * rows  # its static-speed work still to do (ns) at `since`
        self.since = [0] * rows
        self.stretch = [1.0] * rows  # 1 + s while contended, else 1: what its end was timed with
        self.due = [-1] * len(self.w.kinds)  # a compute node's current end (older events are stale)

    def _contention(self, rank: int) -> float:
        return 1.0 + self.comm_slowdown if self.active[rank] else 1.0

    def _compute_end(self, rank: int, g: int, now: int) -> int:
        work = self.durations_ns[g]
        jitter = self.jitter
        if jitter is not None and work:
            work = round(work * jitter.factor(rank, self.iteration[rank], g - self.w.offsets[rank], now))
        self.running[rank], self.work_left[rank], self.since[rank] = g, float(work), now
        return self._retime(rank, now)

    def _retime(self, rank: int, now: int) -> int:
        """Time the running kernel's end from `now` under the rank's present contention."""
        stretch = self.stretch[rank] = self._contention(rank)
        profile = self.profiles[rank]
        work = self.work_left[rank] * stretch
        end = profile.finish(now, round(work)) if profile is not None else now + round(work)
        self.due[self.running[rank]] = end
        return end

    def _contention_changed(self, rank: int, now: int) -> None:
        g = self.running[rank]
        if g < 0 or self._contention(rank) == self.stretch[rank]:
            return
        done = now - self.since[rank]
        profile = self.profiles[rank]
        if profile is not None:
            done = profile.work(self.since[rank], now)
        self.work_left[rank] = max(0.0, self.work_left[rank] - done / self.stretch[rank])
        self.since[rank] = now
        self.queue.push_batched(self._retime(rank, now), events.COMPUTE_DONE, g)

    def _compute_done(self, nodes: list[int], now: int) -> None:
        current = []
        for g in nodes:
            if self.due[g] == now:  # else a re-timed kernel's old end: stale
                self.due[g] = -1  # (an end re-timed to the same instant is queued twice)
                self.running[self.rank_of[g]] = -1
                current.append(g)
        super()._compute_done(current, now)

    # every way a rank's communication starts or ends: collectives (`_start_comm`, `_finish_comm`,
    # inlined over their members) and transfers (`_begin_comm`, `_end_comm`)
    def _start_comm(self, comm: Comm, now: int) -> None:
        super()._start_comm(comm, now)
        for g in comm.nodes:
            self._contention_changed(self.rank_of[g], now)

    def _finish_comm(self, comm: Comm, now: int) -> None:
        ranks = [self.rank_of[g] for g in comm.nodes]
        super()._finish_comm(comm, now)
        for rank in ranks:
            self._contention_changed(rank, now)

    def _begin_comm(self, rank: int, now: int) -> None:
        super()._begin_comm(rank, now)
        self._contention_changed(rank, now)

    def _end_comm(self, rank: int, now: int) -> None:
        super()._end_comm(rank, now)
        self._contention_changed(rank, now)


class WholeRunJitterEngine(DynamicEngine):
    """Jitter that lasts the whole run, and nothing else that changes compute: each rank's kernel times
    are drawn for the whole iteration when it starts it and written into the workload's durations, so
    compute keeps the static engine's inlined paths. The same draws and rounding as the timed path."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        w = self.w
        self.base_ns = np.asarray(w.durations_ns, dtype=np.float64)
        self.is_compute = np.asarray(w.kinds) == KIND_COMP
        self.ends = [*w.offsets[1:], len(w.kinds)]

    def _new_iteration(self, row: int) -> None:
        if row < 0:  # the run is over: leave the workload's durations as they were
            self.durations_ns[:] = self.base_ns.astype(np.int64).tolist()
            return
        assert self.jitter is not None
        first, end = self.w.offsets[row], self.ends[row]
        factors = self.jitter.whole_iteration(row, self.iteration[row])
        base, compute = self.base_ns[first:end], self.is_compute[first:end]
        drawn = np.where(compute & (base > 0), np.rint(base * factors), base)
        self.durations_ns[first:end] = drawn.astype(np.int64).tolist()


def engine_class(dynamics: Dynamics, comm_slowdown: float = 0.0) -> type[DynamicEngine]:
    """The engine for `dynamics`: compute goes through the timed path only when something changes it
    during the run (a slowdown, jitter for part of it, communication beside it)."""
    if comm_slowdown:
        return ContendedComputeEngine
    jitters = dynamics.of_kind("jitter")
    if not dynamics.of_kind("device_slowdown") and jitters:
        if all(e.start_ns == 0 and e.end_ns is None for e in jitters):
            return WholeRunJitterEngine
    return TimedComputeEngine if dynamics.of_kind("device_slowdown", "jitter") else DynamicEngine
