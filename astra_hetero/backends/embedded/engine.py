"""The discrete-event engine: per-rank Chakra graphs driving collectives and transfers over the network.

Semantics
- A node is ready when all its data and control dependencies have completed. A rank runs one compute
  node at a time (in the order they became ready), for `duration_micros` × 1000 ns.
- Communication overlaps compute. A collective is matched across its comm group in issue order (the
  k-th collective a rank issues on a group meets every member's k-th) and starts when every member
  has issued it. A send starts transferring as soon as it is issued; it completes when its data has
  arrived. The matching recv (same src, dst, tag, in issue order) completes when the data has arrived
  and the recv has been issued.
- Time accounting per rank, over [0, iteration]: `compute` is time running a compute node;
  `exposed` is time with no compute running while at least one communication of the rank is under
  way — a collective from its start (all members issued) to its end, a send from its issue to its
  arrival, a recv from max(its issue, the send's issue) to the arrival; `idle` is the rest
  (iteration − compute − exposed): dependency stalls, pipeline bubbles, waiting for peers that have
  not issued yet, and the tail after the rank's last node while slower ranks finish.
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass
from itertools import pairwise

from astra_hetero.backends.embedded import events
from astra_hetero.backends.embedded.network import Flow, FlowNetwork
from astra_hetero.backends.embedded.plans import PhasePlan, CommPlanner
from astra_hetero.backends.embedded.routing import Router
from astra_hetero.backends.embedded.rundir_reader import SimInput
from astra_hetero.backends.embedded.tracefile import KIND_COLL, KIND_COMP, KIND_RECV
from astra_hetero.backends.embedded.workload import FlatWorkload, flatten
from astra_hetero.errors import RunDirError, SimulationDeadlock

_MAX_REPORTED = 8


class Comm:
    """One collective instance or one send/recv transfer while it runs (and its record after)."""

    __slots__ = ("group", "kind", "size", "nodes", "plan", "phase", "start_ns", "end_ns", "recv", "arrived")

    def __init__(self, group: str, kind: str, size: int, plan: tuple[PhasePlan, ...]) -> None:
        self.group = group
        self.kind = kind
        self.size = size
        self.nodes: list[int] = []  # a collective's member nodes in issue order; a transfer's send
        self.plan = plan
        self.phase = 0
        self.start_ns = -1
        self.end_ns = -1
        self.recv = -1
        self.arrived = False


@dataclass(frozen=True)
class EngineOutcome:
    finish_ns: list[int]
    compute_ns: list[int]
    exposed_ns: list[int]
    comms: list[Comm]
    workload: FlatWorkload
    start_ns: list[int]
    end_ns: list[int]
    num_events: int
    num_recomputes: int


class Engine:
    def __init__(self, sim: SimInput) -> None:
        self.sim = sim
        self.w = flatten(sim)
        # the lists the hot paths index, bound once
        self.kinds, self.rank_of = self.w.kinds, self.w.rank_of
        self.successors, self.successor_bounds = self.w.successors, self.w.successor_bounds
        self.durations_ns = self.w.durations_ns
        self.groups, self.group_members, self.sizes = self.w.groups, self.w.group_members, self.w.sizes
        self.coll_types = self.w.coll_types
        router = Router(sim.topology)
        self.comm_plans = CommPlanner(router, sim.machines, sim.algorithm, sim.memory_bytes_per_ns)
        self.net = FlowNetwork(router.bundle_bytes_per_ns)
        self.queue = events.EventQueue()
        n, num_ranks = len(self.w.kinds), sim.num_ranks
        self.num_ranks, self.num_groups = num_ranks, len(self.w.group_names)
        self.pending = list(self.w.num_deps)
        self.start_ns = [-1] * n
        self.end_ns = [-1] * n
        self.busy = [False] * num_ranks
        self.ready_compute: list[deque[int]] = [deque() for _ in range(num_ranks)]
        # Communication issue slots per rank (0 = unlimited). ASTRA-sim lets each rank have one
        # collective or send in flight (recvs exempt); waiting ones issue lowest node id first.
        self.comm_limit = sim.max_comm_in_flight
        self.comm_in_flight = [0] * num_ranks
        self.comm_waiting: list[list[int]] = [[] for _ in range(num_ranks)]
        self.active = [0] * num_ranks
        self.last_ns = [0] * num_ranks
        self.compute_ns = [0] * num_ranks
        self.exposed_ns = [0] * num_ranks
        # collectives issued per (group, rank), at group * num_ranks + rank
        self.issued = [0] * (len(self.w.group_names) * num_ranks)
        self.forming: dict[int, Comm] = {}  # k * num_groups + group -> the k-th collective of group
        self.sends: dict[tuple[int, int, int], deque[Comm]] = {}
        self.recvs: dict[tuple[int, int, int], deque[int]] = {}
        self.done: list[Comm] = []

    def run(self) -> EngineOutcome:
        for g in self.w.roots:
            self._ready(g, 0)
        queue = self.queue
        pop = queue.pop
        compute_done, flow_done, phase_done = self._compute_done, self._flow_done, self._phase_done
        while queue:
            now, kind, payload = pop()
            if kind == events.COMPUTE_DONE:
                compute_done(payload, now)  # a list of nodes that finish at `now`, in event order
            elif kind == events.FLOW_DONE:
                flow, version = payload
                if version == flow.version:
                    flow_done(flow, now)
            else:
                phase_done(payload, now)
        if -1 in self.end_ns:
            raise SimulationDeadlock(self._deadlock_report())
        return EngineOutcome(
            self._finish_times(),
            self.compute_ns,
            self.exposed_ns,
            self.done,
            self.w,
            self.start_ns,
            self.end_ns,
            queue.num_scheduled,
            self.net.num_recomputes,
        )

    def _finish_times(self) -> list[int]:
        """Each rank's last completion (0 for a rank without nodes), found once rather than per node."""
        ends, bounds = self.end_ns, [*self.w.offsets, len(self.end_ns)]
        return [max(ends[first:end], default=0) for first, end in pairwise(bounds)]

    # --- time accounting -------------------------------------------------------------------------
    # `_account` is inlined where it runs once per node (compute start and end, collective members'
    # start and end); it charges the time since the rank's last change to compute, to exposed
    # communication, or to nothing (idle).
    def _account(self, rank: int, now: int) -> None:
        elapsed = now - self.last_ns[rank]
        if elapsed:
            if self.busy[rank]:
                self.compute_ns[rank] += elapsed
            elif self.active[rank]:
                self.exposed_ns[rank] += elapsed
            self.last_ns[rank] = now

    def _begin_comm(self, rank: int, now: int) -> None:
        self._account(rank, now)
        self.active[rank] += 1

    def _end_comm(self, rank: int, now: int) -> None:
        self._account(rank, now)
        self.active[rank] -= 1

    # --- node life cycle --------------------------------------------------------------------------
    def _ready(self, g: int, now: int) -> None:
        kind = self.kinds[g]
        if kind == KIND_COMP:
            rank = self.rank_of[g]
            if self.busy[rank]:
                self.ready_compute[rank].append(g)
            else:
                self._start_compute(rank, g, now)
        elif kind == KIND_RECV:
            self._issue_recv(g, now)
        elif self.comm_limit:
            self._admit_comm(g, now)
        elif kind == KIND_COLL:
            self._issue_collective(g, now)
        else:
            self._issue_send(g, now)

    def _admit_comm(self, g: int, now: int) -> None:
        rank = self.rank_of[g]
        if self.comm_in_flight[rank] < self.comm_limit:
            self.comm_in_flight[rank] += 1
            self._issue_comm(g, now)
        else:
            heapq.heappush(self.comm_waiting[rank], g)

    def _issue_comm(self, g: int, now: int) -> None:
        if self.kinds[g] == KIND_COLL:
            self._issue_collective(g, now)
        else:
            self._issue_send(g, now)

    def _release_comm(self, nodes: list[int], now: int) -> None:
        """Free the issue slots of finished collective members or a send; issue what waited on them."""
        for g in nodes:
            rank = self.rank_of[g]
            self.comm_in_flight[rank] -= 1
            waiting = self.comm_waiting[rank]
            if waiting:
                self.comm_in_flight[rank] += 1
                self._issue_comm(heapq.heappop(waiting), now)

    def _complete(self, g: int, now: int) -> None:
        self.end_ns[g] = now
        first, end = self.successor_bounds[g], self.successor_bounds[g + 1]
        if first == end:
            return
        pending, kinds, busy, rank_of = self.pending, self.kinds, self.busy, self.rank_of
        for s in self.successors[first:end]:
            left = pending[s] - 1
            pending[s] = left
            if left:
                continue
            kind = kinds[s]  # _ready, with the two most frequent cases inlined
            if kind == KIND_COMP:
                rank = rank_of[s]
                if busy[rank]:
                    self.ready_compute[rank].append(s)
                    continue
                elapsed = now - self.last_ns[rank]  # _start_compute, inlined
                if elapsed:
                    if self.active[rank]:
                        self.exposed_ns[rank] += elapsed
                    self.last_ns[rank] = now
                busy[rank] = True
                self.start_ns[s] = now
                self.queue.push_batched(now + self.durations_ns[s], events.COMPUTE_DONE, s)
            elif kind == KIND_COLL and not self.comm_limit:
                self._issue_collective(s, now)
            else:
                self._ready(s, now)

    def _start_compute(self, rank: int, g: int, now: int) -> None:
        elapsed = now - self.last_ns[rank]  # not busy: the time since the last change was not compute
        if elapsed:
            if self.active[rank]:
                self.exposed_ns[rank] += elapsed
            self.last_ns[rank] = now
        self.busy[rank] = True
        self.start_ns[g] = now
        self.queue.push_batched(now + self.durations_ns[g], events.COMPUTE_DONE, g)

    def _compute_done(self, nodes: list[int], now: int) -> None:
        rank_of, last_ns, compute_ns, complete = self.rank_of, self.last_ns, self.compute_ns, self._complete
        for g in nodes:
            rank = rank_of[g]
            complete(g, now)  # still busy: compute nodes it releases queue up behind earlier ones
            elapsed = now - last_ns[rank]
            if elapsed:
                compute_ns[rank] += elapsed
                last_ns[rank] = now
            waiting = self.ready_compute[rank]
            if waiting:  # the rank stays busy: no time passes between the two nodes
                g = waiting.popleft()
                self.start_ns[g] = now
                self.queue.push_batched(now + self.durations_ns[g], events.COMPUTE_DONE, g)
            else:
                self.busy[rank] = False

    # --- collectives ------------------------------------------------------------------------------
    def _issue_collective(self, g: int, now: int) -> None:
        rank, group = self.rank_of[g], self.groups[g]
        counter = group * self.num_ranks + rank
        k = self.issued[counter]
        self.issued[counter] = k + 1
        key = k * self.num_groups + group
        comm = self.forming.get(key)
        if comm is None:
            w = self.w
            kind = w.coll_kind_name(g)
            comm = Comm(
                w.group_names[group],
                kind,
                self.sizes[g],
                self.comm_plans.collective(self.group_members[group], kind),
            )
            self.forming[key] = comm
        elif self.coll_types[g] != self.coll_types[comm.nodes[0]] or self.sizes[g] != comm.size:
            w = self.w
            raise RunDirError(
                f"{w.describe(g)} is matched with {w.describe(comm.nodes[0])} (the same "
                f"collective of group {comm.group!r}) but differs in type or size"
            )
        nodes = comm.nodes
        nodes.append(g)
        if len(nodes) == len(self.group_members[group]):
            del self.forming[key]
            self._start_comm(comm, now)

    def _start_comm(self, comm: Comm, now: int) -> None:
        """Start every member's node (`_begin_comm`, inlined: it runs once per member)."""
        comm.start_ns = now
        start_ns, rank_of, last_ns, active = self.start_ns, self.rank_of, self.last_ns, self.active
        for g in comm.nodes:
            start_ns[g] = now
            rank = rank_of[g]
            elapsed = now - last_ns[rank]
            if elapsed:
                if self.busy[rank]:
                    self.compute_ns[rank] += elapsed
                elif active[rank]:
                    self.exposed_ns[rank] += elapsed
                last_ns[rank] = now
            active[rank] += 1
        self._start_phase(comm, now)

    def _start_phase(self, comm: Comm, now: int) -> None:
        if comm.phase == len(comm.plan):
            self._finish_comm(comm, now)
            return
        phase = comm.plan[comm.phase]
        num_bytes = comm.size * phase.bytes_fraction
        if not phase.links or num_bytes <= 0:
            self.queue.push(now + self._phase_tail_ns(comm), events.PHASE_DONE, comm)
            return
        self._push_finishes(self.net.add(Flow(phase.links, num_bytes, comm, phase.solo_rate), now), now)

    def _push_finishes(self, flows: list[Flow], now: int) -> None:
        push = self.queue.push
        for flow in flows:
            push(flow.finish_time(now), events.FLOW_DONE, (flow, flow.version))

    def _flow_done(self, flow: Flow, now: int) -> None:
        flow.version = -1  # later events of this flow are stale
        self._push_finishes(self.net.remove(flow, now), now)
        comm: Comm = flow.owner  # type: ignore[assignment]
        self.queue.push(now + self._phase_tail_ns(comm), events.PHASE_DONE, comm)

    @staticmethod
    def _phase_tail_ns(comm: Comm) -> int:
        """What a phase costs after its data has moved: per-step latencies and reduction through memory."""
        phase = comm.plan[comm.phase]
        return phase.latency_ns + round(comm.size * phase.memory_ns_per_byte)

    def _phase_done(self, comm: Comm, now: int) -> None:
        comm.phase += 1
        self._start_phase(comm, now)

    def _finish_comm(self, comm: Comm, now: int) -> None:
        """End every member's node (`_end_comm`, inlined: it runs once per member) and complete it."""
        comm.end_ns = now
        self.done.append(comm)
        rank_of, last_ns, active, complete = self.rank_of, self.last_ns, self.active, self._complete
        for g in comm.nodes:
            rank = rank_of[g]
            elapsed = now - last_ns[rank]
            if elapsed:
                if self.busy[rank]:
                    self.compute_ns[rank] += elapsed
                elif active[rank]:
                    self.exposed_ns[rank] += elapsed
                last_ns[rank] = now
            active[rank] -= 1
            complete(g, now)
        if self.comm_limit:
            self._release_comm(comm.nodes, now)
        comm.arrived = True  # a transfer: its recv, when issued from now on, completes at once
        if comm.recv >= 0:  # a transfer whose recv was issued before the data arrived
            self._end_comm(self.rank_of[comm.recv], now)
            self._complete(comm.recv, now)

    # --- point to point ---------------------------------------------------------------------------
    def _issue_send(self, g: int, now: int) -> None:
        w = self.w
        src, dst = w.rank_of[g], w.peers[g]
        comm = Comm(f"{src}->{dst}", "send_recv", w.sizes[g], self.comm_plans.transfer(src, dst))
        comm.nodes.append(g)
        key = (src, dst, w.tags[g])
        waiting = self.recvs.get(key)
        if waiting:
            comm.recv = waiting.popleft()
            self.start_ns[comm.recv] = now
            self._begin_comm(dst, now)
        else:
            self.sends.setdefault(key, deque()).append(comm)
        self._start_comm(comm, now)

    def _issue_recv(self, g: int, now: int) -> None:
        w = self.w
        dst, src = w.rank_of[g], w.peers[g]
        key = (src, dst, w.tags[g])
        sent = self.sends.get(key)
        if not sent:
            self.recvs.setdefault(key, deque()).append(g)
            return
        comm = sent.popleft()
        comm.recv = g
        self.start_ns[g] = now
        if comm.arrived:
            self._complete(g, now)
        else:
            self._begin_comm(dst, now)

    # --- diagnostics ------------------------------------------------------------------------------
    def _deadlock_report(self) -> str:
        w = self.w
        waiting: dict[int, list[int]] = {}
        for g, end in enumerate(self.end_ns):
            if end < 0 and self.pending[g] == 0:
                waiting.setdefault(w.rank_of[g], []).append(g)
        lines = [
            f"deadlock: {self.end_ns.count(-1)} nodes never ran; "
            f"{len(waiting)} ranks wait on issued nodes that cannot complete:"
        ]
        for rank in sorted(waiting)[:_MAX_REPORTED]:
            nodes = ", ".join(w.describe(g, with_file=False) for g in waiting[rank][:_MAX_REPORTED])
            lines.append(f"  rank {rank} ({w.paths[rank]}): {nodes}")
        if len(waiting) > _MAX_REPORTED:
            lines.append(f"  ... and {len(waiting) - _MAX_REPORTED} more ranks")
        if not waiting:
            lines.append("  none: the remaining nodes wait on each other (a dependency cycle)")
        return "\n".join(lines)
