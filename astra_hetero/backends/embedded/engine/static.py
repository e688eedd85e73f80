"""The discrete-event engine: per-rank Chakra graphs driving collectives and transfers over the network.

Semantics
- A node is ready when all its data and control dependencies have completed. A rank runs one compute
  node at a time (in the order they became ready), for its compute time (`trace.decode`: roofline
  from the system file, else `duration_micros` × 1000 ns).
- Communication overlaps compute. A collective is matched across its comm group in issue order (the
  k-th collective a rank issues on a group meets every member's k-th) and starts when every member
  has issued it. A send starts transferring as soon as it is issued; it completes when its data has
  arrived. The matching recv (same src, dst, tag, in issue order) completes when the data has arrived
  and the recv has been issued.
- Per-member collectives (the DCQCN fluid network, `network.dcqcn`, under ASTRA-sim's rules): where
  the collective's first phase moves bytes and names each path's sender (`PhasePlan.senders`), a
  member's paths start as soon as that member has issued it — ASTRA-sim starts each rank's stream of
  a collective when that rank's system issues it (Ring::run, StreamInit), and a ring node sends on
  as it receives (later messages keep the `PhasePlan.after` chain). A one-phase collective whose plan
  names each path's receiver also ends member by member: a member's part ends with the arrival of
  the last message into it (plus the phase's tail), as ASTRA-sim's ring ends a rank's stream on its
  last receive without waiting for its own last send to be delivered (Ring::ready, Ring::iteratable);
  the collective ends when its last message has arrived. A later phase starts only once every member
  has issued. The flow model keeps the rule above.
- Time accounting per rank, over [0, iteration]: `compute` is time running a compute node;
  `exposed` is time with no compute running while at least one communication of the rank is under
  way — a collective from its start (all members issued; for a per-member collective, from the
  member's own issue) to its end (for a per-member collective, the member's own end), a send from its
  issue to its arrival, a recv from max(its issue, the send's issue) to the arrival; `idle` is the
  rest (iteration − compute − exposed): dependency stalls, pipeline bubbles, waiting for peers that
  have not issued yet, and the tail after the rank's last node while slower ranks finish.
"""

from __future__ import annotations

import heapq
from collections import deque
from itertools import pairwise

from astra_hetero.backends.embedded.engine import events
from astra_hetero.backends.embedded.engine.comm import PlainComm
from astra_hetero.backends.embedded.engine.deadlock import deadlock_report
from astra_hetero.backends.embedded.engine.lanes import HostLane, LowestFirst
from astra_hetero.backends.embedded.engine.records import Comm, EngineOutcome
from astra_hetero.backends.embedded.engine.workload import FlatWorkload
from astra_hetero.backends.embedded.folding.comm import FoldedComm
from astra_hetero.backends.embedded.network.dcqcn import DcqcnNetwork, FluidFlow
from astra_hetero.backends.embedded.network.flows import NEVER_NS, Flow, FlowNetwork
from astra_hetero.backends.embedded.network.phases import PhasePlan
from astra_hetero.backends.embedded.trace.records import KIND_COLL, KIND_COMP, KIND_CPU, KIND_RECV
from astra_hetero.errors import RunDirError, SimulationDeadlock


class Engine(HostLane):
    """Simulates the ranks of `workload` (every rank, or one per folded class) with `comm` answering
    how their collectives meet and what their flows load (see `engine.comm`, `folding.comm`).
    `lowest_first`: ready compute nodes start lowest node first instead of in the order they became
    ready. `network`: the DCQCN fluid network over `comm`'s links instead of the max-min flow network."""

    def __init__(
        self,
        workload: FlatWorkload,
        comm: PlainComm | FoldedComm,
        max_comm_in_flight: int = 0,
        lowest_first: bool = False,
        network: DcqcnNetwork | None = None,
    ) -> None:
        self.w = workload
        self.comm = comm
        # the lists the hot paths index, bound once
        self.kinds, self.rank_of = self.w.kinds, self.w.rank_of
        self.successors, self.successor_bounds = self.w.successors, self.w.successor_bounds
        self.durations_ns = self.w.durations_ns
        self.groups, self.sizes = self.w.groups, self.w.sizes
        self.group_keys, self.group_expected = comm.group_keys, comm.group_expected
        self.coll_types = self.w.coll_types
        self.net: FlowNetwork | DcqcnNetwork = (
            network if network is not None else FlowNetwork(comm.capacities)
        )
        self.fluid = network is not None
        self.flow_type = FluidFlow if self.fluid else Flow
        self.net_wake = NEVER_NS  # the fluid network's step last scheduled
        self.queue = events.EventQueue()
        n, num_ranks = len(self.w.kinds), len(self.w.ranks)
        self.num_ranks, self.num_groups = num_ranks, max(self.group_keys, default=-1) + 1
        self.pending = list(self.w.num_deps)
        self.start_ns = [-1] * n
        self.end_ns = [-1] * n
        self.busy = [False] * num_ranks
        queue_type = LowestFirst if lowest_first else deque
        self.ready_compute: list[deque[int]] = [queue_type() for _ in range(num_ranks)]  # type: ignore[misc]
        # host operators of measured traces: one at a time per rank, beside its GPU work (no accounting:
        # a rank's compute time is its GPU's)
        self.cpu_busy = [False] * num_ranks
        self.ready_cpu: list[deque[int]] = [queue_type() for _ in range(num_ranks)]  # type: ignore[misc]
        # Communication issue slots per rank (0 = unlimited). ASTRA-sim lets each rank have one
        # collective or send in flight (recvs exempt); waiting ones issue lowest node id first.
        self.comm_limit = max_comm_in_flight
        self.comm_in_flight = [0] * num_ranks
        self.comm_waiting: list[list[int]] = [[] for _ in range(num_ranks)]
        self.active = [0] * num_ranks
        self.last_ns = [0] * num_ranks
        self.compute_ns = [0] * num_ranks
        self.exposed_ns = [0] * num_ranks
        # collectives issued per (group, rank), at group * num_ranks + rank
        self.issued = [0] * (len(self.w.group_names) * num_ranks)
        self.forming: dict[int, Comm] = {}  # k * num_groups + group key -> the k-th collective of group
        self.collective_info: dict[tuple[int, int, int], tuple[str, str, tuple[PhasePlan, ...], int]] = {}
        self.sends: dict[tuple[int, int, int], deque[Comm]] = {}
        self.recvs: dict[tuple[int, int, int], deque[int]] = {}
        self.done: list[Comm] = []
        # a node without successors completing calls `_sink_done` (a rank's last sink ends its iteration)
        self.count_sinks = False

    def _sink_done(self, g: int, now: int) -> None:
        """Overridden by the engine that runs several iterations (`engine.dynamic`)."""

    def run(self) -> EngineOutcome:
        for g in self.w.roots:
            self._ready(g, 0)
        queue = self.queue
        pop, heap = queue.pop, queue.heap
        compute_done, flow_done, phase_done = self._compute_done, self._flow_done, self._phase_done
        while heap:
            now, kind, payload = pop()
            if kind == events.COMPUTE_DONE:
                compute_done(payload, now)  # a list of nodes that finish at `now`, in event order
            elif kind == events.FLOW_DONE:
                flow, version = payload
                if version == flow.version:
                    flow_done(flow, now)
            elif kind == events.CPU_DONE:
                self._cpu_done(payload, now)
            elif kind == events.NET_STEP:
                self._net_step(payload, now)
            else:
                phase_done(payload, now)
        return self._outcome()

    # --- the DCQCN fluid network's own steps ------------------------------------------------------
    def _net_step(self, wake: int, now: int) -> None:
        if wake != self.net.wakeup_ns:  # type: ignore[union-attr]
            return  # superseded: the network replanned since
        self._push_flows(self.net.step(now), now)  # type: ignore[union-attr]

    def _schedule_net(self) -> None:
        wake = self.net.wakeup_ns  # type: ignore[union-attr]
        if wake < NEVER_NS and wake != self.net_wake:
            self.net_wake = wake
            self.queue.push(wake, events.NET_STEP, wake)

    def _outcome(self) -> EngineOutcome:
        if self._unfinished():
            raise SimulationDeadlock(deadlock_report(self.w, self.end_ns, self.pending))
        queue = self.queue
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
            self.net.stats() if self.fluid else None,  # type: ignore[union-attr]
        )

    def _unfinished(self) -> bool:
        """Whether a node that should have run never completed."""
        return -1 in self.end_ns

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
        elif kind == KIND_CPU:
            self._ready_cpu(g, now)
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
            if self.count_sinks:
                self._sink_done(g, now)
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
    def _collective(self, g: int, group: int) -> Comm:
        """A new collective instance for node `g` of `group` (plans looked up once per group and type)."""
        size = self.sizes[g]
        key = (group, self.coll_types[g], size)
        info = self.collective_info.get(key)
        if info is None:
            kind = self.w.coll_kind_name(g)
            info = self.collective_info[key] = (
                self.w.group_names[group],
                kind,
                self.comm.collective_plan(group, kind, size),
                self.comm.group_instances[group],
            )
        name, kind, plan, instances = info
        return Comm(name, kind, size, plan, instances)

    def _issue_collective(self, g: int, now: int) -> None:
        rank, group = self.rank_of[g], self.groups[g]
        if self.group_expected[group] == 1:  # no other node to wait for (a folded class's group)
            comm = self._collective(g, group)
            comm.nodes.append(g)
            self._start_comm(comm, now)
            return
        counter = group * self.num_ranks + rank
        k = self.issued[counter]
        self.issued[counter] = k + 1
        key = k * self.num_groups + self.group_keys[group]
        comm = self.forming.get(key)
        if comm is None:
            comm = self.forming[key] = self._collective(g, group)
        elif self.coll_types[g] != self.coll_types[comm.nodes[0]] or self.sizes[g] != comm.size:
            w = self.w
            raise RunDirError(
                f"{w.describe(g)} is matched with {w.describe(comm.nodes[0])} (the same "
                f"collective of group {comm.group!r}) but differs in type or size"
            )
        nodes = comm.nodes
        nodes.append(g)
        expected = self.group_expected[group]
        if len(nodes) == 1 and self.fluid:
            comm.expected = expected if self._per_member(comm) else 0
        if comm.expected:
            self._join(comm, g, now)
            if len(nodes) == expected:
                del self.forming[key]
                if comm.parked:  # its first phase ended before this member joined
                    comm.parked = False
                    self._start_phase(comm, now)
            return
        if len(nodes) == expected:
            del self.forming[key]
            self._start_comm(comm, now)

    # --- per-member start (the fluid network under ASTRA-sim's rules) -------------------------------
    def _per_member(self, comm: Comm) -> bool:
        """Whether each member starts its part of the collective on its own issue: its first phase
        moves bytes on the fluid network and names each path's sender (`PhasePlan.senders`)."""
        phase = comm.plan[0] if comm.plan else None
        return (
            phase is not None
            and bool(phase.links)
            and len(phase.senders) == len(phase.paths) > 0
            and comm.size * phase.bytes_fraction > 0
        )

    def _simulated(self, rank: int) -> int:
        """The simulated rank that stands for `rank` (itself unless folded)."""
        rows = self.comm.rows
        return rows[rank] if rows else rank

    def _join(self, comm: Comm, g: int, now: int) -> None:
        """Member `g` issued a per-member collective: its communication is under way from now, and
        the first phase's paths it sends go (the first member creates the phase's flow with the
        other members' paths held)."""
        rank = self.rank_of[g]
        self.start_ns[g] = now
        self._begin_comm(rank, now)
        phase = comm.plan[0]
        senders = [self._simulated(s) for s in phase.senders]
        if comm.flow is None:
            comm.start_ns = now
            self._start_phase(comm, now, [s != rank for s in senders])
            return
        mine = [p for p, s in enumerate(senders) if s == rank]
        if mine and comm.phase == 0:
            self._push_flows(self.net.release(comm.flow, mine, now), now)  # type: ignore[union-attr]

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

    def _start_phase(self, comm: Comm, now: int, held: list[bool] | None = None) -> None:
        """Start the collective's current phase; `held`: per path of a per-member collective's first
        phase, whether its sender has yet to join."""
        if comm.phase == len(comm.plan):
            self._finish_comm(comm, now)
            return
        phase = comm.plan[comm.phase]
        num_bytes = comm.size * phase.bytes_fraction
        if not phase.links or num_bytes <= 0:
            tail = phase.latency_ns + round(comm.size * phase.memory_ns_per_byte)
            self.queue.push(now + tail, events.PHASE_DONE, comm)
            return
        flow = self.flow_type(phase.links, num_bytes, comm, phase.solo_rate)
        if self.fluid:
            flow.paths, flow.messages, flow.after = phase.paths, phase.messages, phase.after  # type: ignore[attr-defined]
            if held is not None:
                flow.held = held  # type: ignore[attr-defined]
                comm.flow = flow
                if len(comm.plan) == 1 and len(phase.receivers) == len(phase.paths):
                    incoming: dict[int, int] = {}
                    for r in phase.receivers:
                        row = self._simulated(r)
                        incoming[row] = incoming.get(row, 0) + 1
                    comm.incoming = incoming
                    flow.path_ends = []  # type: ignore[attr-defined]
        self._push_flows(self.net.add(flow, now), now)

    def _push_flows(self, changed: list[Flow], now: int) -> None:
        """Queue the completions the network now knows (and the fluid network's next step), and the
        ends of members' parts whose last incoming message's arrival is now known."""
        push = self.queue.push
        for flow in changed:
            push(flow.finish_time(now), events.FLOW_DONE, (flow, flow.version))
        if self.fluid:
            self._schedule_net()
            arrived = self.net.paths_done  # type: ignore[union-attr]
            if arrived:
                for flow, path, at in arrived:
                    self._path_arrives(flow.owner, path, at)  # type: ignore[arg-type]
                arrived.clear()

    def _path_arrives(self, comm: Comm, path: int, at: int) -> None:
        """A path of a per-member collective delivers its last message at `at`: once every path into
        its receiver has, that member's part ends after the phase's tail (ASTRA-sim: a rank's ring
        ends with its last receive; its last send may still be on its way)."""
        phase = comm.plan[0]
        r = phase.receivers[path]
        row = self._simulated(r)
        left = comm.incoming[row] - 1  # type: ignore[index]
        comm.incoming[row] = left  # type: ignore[index]
        if not left:
            tail = phase.latency_ns + round(comm.size * phase.memory_ns_per_byte)
            self.queue.push(at + tail, events.PHASE_DONE, (comm, row))

    def _member_ends(self, comm: Comm, row: int, now: int) -> None:
        """End the member nodes of simulated rank `row` (`_end_comm`, then complete them)."""
        if comm.end_ns >= 0:
            return  # the whole collective ended at this instant already
        for g in comm.nodes:
            if self.rank_of[g] == row and g not in comm.ended:
                comm.ended.add(g)
                self._end_comm(row, now)
                self._complete(g, now)
                if self.comm_limit:
                    self._release_comm([g], now)

    def _flow_done(self, flow: Flow, now: int) -> None:
        flow.version = -1  # later events of this flow are stale
        self._push_flows(self.net.remove(flow, now), now)
        comm: Comm = flow.owner  # type: ignore[assignment]
        # what a phase costs after its data has moved: per-step latencies and reduction through memory
        phase = comm.plan[comm.phase]
        self.queue.push(
            now + phase.latency_ns + round(comm.size * phase.memory_ns_per_byte), events.PHASE_DONE, comm
        )

    def _phase_done(self, comm: Comm | tuple[Comm, int], now: int) -> None:
        if type(comm) is tuple:  # one member's part of a per-member collective
            self._member_ends(comm[0], comm[1], now)
            return
        comm.phase += 1  # type: ignore[union-attr]
        if comm.expected and len(comm.nodes) < comm.expected:  # type: ignore[union-attr]
            comm.parked = True  # type: ignore[union-attr]  # a member without a path has yet to join
            return
        self._start_phase(comm, now)  # type: ignore[arg-type]

    def _finish_comm(self, comm: Comm, now: int) -> None:
        """End every member's node (`_end_comm`, inlined: it runs once per member) and complete it."""
        comm.end_ns = now
        self.done.append(comm)
        rank_of, last_ns, active, complete = self.rank_of, self.last_ns, self.active, self._complete
        nodes = [g for g in comm.nodes if g not in comm.ended] if comm.ended else comm.nodes
        for g in nodes:
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
            self._release_comm(nodes, now)
        comm.arrived = True  # a transfer: its recv, when issued from now on, completes at once
        if comm.recv >= 0:  # a transfer whose recv was issued before the data arrived
            self._end_comm(self.rank_of[comm.recv], now)
            self._complete(comm.recv, now)

    # --- point to point ---------------------------------------------------------------------------
    def _issue_send(self, g: int, now: int) -> None:
        w = self.w
        src, dst, size = w.ranks[w.rank_of[g]], w.peers[g], w.sizes[g]
        comm = Comm(f"{src}->{dst}", "send_recv", size, self.comm.transfer_plan(src, dst, size))
        comm.nodes.append(g)
        key = (src, dst, w.tags[g])
        waiting = self.recvs.get(key)
        if waiting:
            comm.recv = waiting.popleft()
            self.start_ns[comm.recv] = now
            self._begin_comm(self.rank_of[comm.recv], now)
        else:
            self.sends.setdefault(key, deque()).append(comm)
        self._start_comm(comm, now)

    def _issue_recv(self, g: int, now: int) -> None:
        w = self.w
        rank = w.rank_of[g]
        key = self.comm.recv_key((w.peers[g], w.ranks[rank], w.tags[g]))
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
            self._begin_comm(rank, now)

    # --- diagnostics ------------------------------------------------------------------------------
