"""DCQCN as a fluid: per-flow sending rates under ECN feedback from switch queues, stepped in time.

The model follows the fluid models of DCQCN (Zhu et al., "Congestion Control for Large-Scale RDMA
Deployments", SIGCOMM 2015, section 5; Zhu et al., "ECN or Delay: Lessons Learnt from Analysis of
DCQCN and TIMELY", CoNEXT 2016, section 3): switch egress queues are fluids fed by the flows' rates
and drained at the link rate, RED/ECN marks packets with a probability that rises from 0 at KMIN to
PMAX at KMAX (1 above), and each sender (the reaction point, RP) keeps a current rate RC, a target
rate RT and a congestion estimate α. Where those papers write the RP as differential equations of
expected values, the RP here is the state machine ns-3 runs (astra-network-ns3 `RdmaHw`, "Mellanox's
version of DCQCN", CC_MODE 1), because with the timers ASTRA-sim's configurations use (RP_TIMER
900 µs, one fast-recovery step) its discrete jumps — not their averages — decide how long a congested
flow takes:

- α: every ALPHA_RESUME_INTERVAL, α ← (1−g)·α + g·[a CNP arrived]; here in expectation (the CoNEXT'16
  α equation): the chance that a CNP arrived in the interval is 1 − (1 − p)^n for n packets sent at
  marking probability p.
- cut: every RATE_DECREASE_INTERVAL, if a CNP arrived: RT ← RC (unless CLAMP_TARGET_RATE is 0 and no
  increase happened since the last cut), RC ← max(MIN_RATE, RC·(1 − α/2)); the increase stage goes
  back to 0 and the increase timer restarts. The chance of a CNP per interval is accumulated and a cut
  made each time it sums to one (the expected number of cuts, deterministic).
- feedback delay (the fluid models' τ*, Zhu et al. CoNEXT'16 section 3): a CNP reaches the sender
  only after the marked packet has crossed the queues after the marking one and its ACK the queues on
  the way back — ns-3's receiver answers every data packet with an ACK carrying the CNP flag, and
  with ACK_HIGH_PRIO 0 (ASTRA-sim's configuration) ACKs travel in the data packets' priority class, so
  they wait in the same queues and the same pauses. The CNPs of marks made now are held until
  now + Σ queue/rate over those queues (the reverse of each link on the path; `reverse`), then count
  one decrease interval later. Where the way back is congested (the other direction of a ring,
  stepping down too) the sender keeps its rate for hundreds of microseconds while PFC holds it.
- increase: every RP_TIMER after the last cut, stage < FAST_RECOVERY_TIMES: RC ← (RC + RT)/2 (fast
  recovery); = : RT += RATE_AI (additive); > : RT += RATE_HAI (hyper-additive), then RC ← (RC + RT)/2;
  RT is capped at the line rate. ns-3's RP has no byte counter, so neither has this model.
- the first CNP sets α = 1 and RT = RC (ns-3's RateOnFirstCnp = 1).

Queues. Every directed link (bundle, or link class when folded) leaving a switch has a queue q. A
link's arrival is its flows' rates as shaped by the links before it on their path (links are ordered
up-then-down by their height above the hosts): a link with a backlog sends at its rate C, each flow
C/A of what it brings (the mix of the arrivals: a fluid FIFO), so the bytes a queue holds flow on to
the next queues as it drains; a link without one passes what arrives, C/A of it when overloaded;
dq/dt = A − C. A host's own link has no queue: it shares its line rate among the host's queue pairs
as ns-3's NIC does, serving them in turn (`RdmaEgressQueue::GetNextQindex`, round robin), each paced
at its own rate — max-min fair: a pair slower than an equal share keeps its rate, the others split the
rest (not shares in proportion to their rates, which let an older pair keep more of the NIC). Marks
are counted at the rate a flow sends into a marking queue (at most its share of the drain): counting
them at a backlog's drain rate, as marking at dequeue would for the packets a slowed sender left
queued, cuts harder than ns-3 does on a 400→100G step-down (the calibration case of
benchmarks/packet_fidelity.py: +33 % against ns-3's iteration instead of +13 %); so does taking each
flow's share of the marks from the arrivals one sojourn time earlier (the bytes leaving a FIFO queue
now; study 4: 32 GPUs +16 %, incast +14 %).

PFC, hop by hop. When q reaches the pause threshold and still fills, the links feeding the queue (the
links one level before it on its flows' paths) are paused for the share of their time that keeps it
from filling: a paused switch link sends C·s (all its flows alike — ns-3 pauses a port's priority
class, not a flow), so its own queue fills, reaches its threshold and pauses the link before it in
turn, back to the senders, whose injection is held to what the first hop takes. Solved downstream
first, repeated until no queue at its threshold receives more than it drains. So a sender far faster
than the feedback loop (3600G NVLink GPUs into a 100G NIC) fills every buffer on its path at line
rate before its first CNP, and the bottleneck drains those bytes while DCQCN's timers run. The
threshold is ns-3's dynamic one: an ingress pauses when its share of the buffer reaches (B − used)/8
(`SwitchMmu::GetPfcThreshold`, `pfc_a_shift` 3), so n alike ingresses feeding one queue pause it at
q = n·B/(8 + n) — B/9 for one, B/3 for four senders meeting at a shared NIC (n: the sub-flows
loading the queue, at most the links into its switch; headroom and reserve left out).

A flow's bytes count as sent when they are injected; it completes when its last byte has also
crossed the queues then on its path (FIFO: every byte queued before it up to a hop crosses that hop
first, so its last byte leaves hop k after Σ_{j ≤ k} q_j / C_k, the largest over k).

Time steps adapt: while some queue is above KMIN, or some flow owes a cut or awaits CNPs, the model
steps every RATE_DECREASE_INTERVAL; otherwise it jumps to the next instant anything can change — a
flow's increase timer, a queue reaching or leaving KMIN, PFC's threshold or empty, a flow's last
byte — so a flow at line rate on an idle path costs two events, and cost grows with the congested
period, not with bytes. While every flow that marks or CNPs reach is at MIN_RATE (a cut then only
restarts its increase timer: an incast's queues drain for hundreds of microseconds at the floor),
the cuts are checked every RP_TIMER/32 instead, all the intervals' cuts at once, the timer
restarting from the decrease-interval tick at which the last of them would have been made (one
interval after the CNP that completed it). Those coarse steps still integrate marks, CNP delays and
queues over longer intervals: study 4's 32-GPU and shared-NIC points move by +7 and +4 points when
every step is a decrease interval (docs/network.md).

Flows are the flow model's coflows (`flows.Flow`: the transfers of one phase), but here each of their
sub-flows — one per path the phase plan lists (`PhasePlan.paths`) — is a queue pair with its own RP
and its own bytes, as in ns-3: a sub-flow from a 400G host into a 100G NIC is cut while its 100G
partner in the other direction runs on, and the phase ends with its slowest sub-flow. A plan without
paths is one sub-flow. Folded flows carry their representative instance's paths, mapped to link
classes and scaled to the class loads (the quotient's weights), so folded link and flow classes see
exactly what each of their members would. For ASTRA-sim's rank-by-rank collectives (`engine.static`)
a flow's paths can be held until their sender joins (`FluidFlow.held`, `release`), and the instant each
path's last message arrives is reported (`FluidFlow.path_ends`, `paths_done`).

Left out: per-packet randomness (ECN marks are taken in expectation), the NP's CNP pacing (ns-3's
receiver marks its ACK per marked packet; the RP's decrease interval is the only pacing), PFC
headroom, reserve and the buffer shared by a switch's ports (each queue's threshold counts only its
own bytes), a host's other flows held back by a pause of its port (only the flows through the
paused queue are), a backlog whose senders have all finished (its bytes count in their completion
times, but pass on to no further queue), and queues at hosts.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass

from astra_hetero.backends.embedded.network.flows import NEVER_NS, Flow
from astra_hetero.backends.embedded.rundir.dcqcn_config import DcqcnParams

_EPS = 1e-9
# A queue holding less than one byte that does not fill (arrival at most its drain, up to float noise)
# is empty: the integration leaves rounding residues (1e-10 bytes: at the wakeup planned for its last
# byte, or fed at its own rate by a backlogged link before it), which would make the link pass traffic
# at its full rate as if it had a backlog to drain, and differ between a folded link class and its
# members.
_LAST_BYTE = 1.0
_PFC_ROUNDS = 16  # PFC's pause pattern is solved by repeated passes, downstream first; a few suffice
_NO_LEVELS: dict[int, float] = {}  # (read only) a level none of whose hosts' links is overloaded


@dataclass(frozen=True)
class FluidLink:
    """One engine link: `queued` (leaves a switch: a queue with ECN and PFC) or a host's own link;
    `level` its place on any up-then-down path; thresholds in bytes, summed over the parallel links
    it stands for."""

    queued: bool
    level: float
    kmin: float = 0.0
    kmax: float = 0.0
    pmax: float = 0.0
    pfc: float = math.inf
    ingress: float = 1.0  # links into its switch that can feed it (bounds the ingresses that pause)


class _Sub:
    """One sub-flow: a queue pair with its own reaction point (RC, RT, α, stage, timer) and bytes."""

    __slots__ = (
        "flow",
        "path",
        "message",
        "levels",
        "links",
        "remaining",
        "rc",
        "rt",
        "line",
        "alpha",
        "alpha_at",
        "stage",
        "timer_at",
        "first_cnp",
        "credit",
        "ready",
        "crossed_at",
        "ready_crossed_at",
        "next_whole",
        "x",
        "out",
        "back",
        "pending",
        "done_at",
    )

    def __init__(
        self, flow: FluidFlow, links: list[tuple[int, float]], levels, num_bytes: float, line: float
    ):
        self.flow = flow
        self.links = links
        self.levels = levels  # [(level, [(link, weight, arrival weight)])] in path order
        self.line = line
        self.path = self.message = 0
        # a new queue pair: line rate, nothing learnt (ns-3's RdmaQueuePair)
        self.remaining = num_bytes
        self.rc = self.rt = self.line
        self.alpha, self.stage, self.timer_at, self.first_cnp = 1.0, 0, NEVER_NS, True
        self.alpha_at = 0  # when `alpha` was last brought up to date (it decays between, `_alpha`)
        self.credit = self.ready = 0.0
        # when the CNP credit last reached a whole CNP (as of now, and as of the last check): where
        # the cut checks are coarse (at MIN_RATE), when its last cut would have been made
        self.crossed_at = self.ready_crossed_at = 0.0
        self.next_whole = 1.0  # the whole number of CNPs the credit reaches next
        self.x = 0.0  # the rate it injects at now (bytes per ns)
        self.out: list[tuple[int, float]] = []  # (queued link, its rate leaving it): what the queue marks
        self.back: list[int] = []  # the queued links its ACKs (and CNPs) cross on the way back
        # CNPs on their way: (when they arrive, expected CNPs, α's share of them), oldest first
        self.pending: deque[tuple[float, float, float]] = deque()
        self.done_at = NEVER_NS


class FluidFlow(Flow):
    """A flow of the fluid model; `paths` (set by the engine from the phase plan): its sub-flows'
    links in the plan's link ids (bundles), empty for one sub-flow over `links`; `messages`: each
    path's bytes go as that many messages (ring steps), each on a new queue pair; `after[p]`: the
    path whose message m must have arrived before path p sends message m + 1 (a ring node forwards
    what its predecessor sent; -1 or absent: p's own message m), so messages of one path overlap
    when its predecessor is faster."""

    __slots__ = (
        "paths",
        "messages",
        "after",
        "message_bytes",
        "subs",
        "done_at",
        "routes",
        "started",
        "arrived",
        "held",
        "path_ends",
    )

    def __init__(
        self, links: tuple[tuple[int, float], ...], num_bytes: float, owner: object, solo_rate: float = 0.0
    ) -> None:
        super().__init__(links, num_bytes, owner, solo_rate)
        self.paths: tuple[tuple[tuple[int, float], ...], ...] = ()
        self.messages = 1
        self.after: tuple[int, ...] = ()
        self.message_bytes = 0.0
        self.subs: list[_Sub] = []  # every queue pair it has started
        self.done_at = NEVER_NS
        self.routes: list[tuple[list[tuple[int, float]], list, float]] = []  # per path: links, levels, line
        self.started: list[int] = []  # per path: messages started
        self.arrived: list[int] = []  # per path: messages arrived
        # per path: held back until its sender joins (`DcqcnNetwork.release`); empty: none held
        self.held: list[bool] = []
        # per path: (messages whose last byte is known to arrive, the latest such arrival); None: the
        # flow reports no path ends (`DcqcnNetwork.paths_done`)
        self.path_ends: list[list[int]] | None = None

    def finish_time(self, now: int) -> int:
        return self.done_at


class DcqcnNetwork:
    """Same interface as `flows.FlowNetwork` (`add`, `remove` return the flows whose completion time
    is now known), plus `wakeup_ns`, the next instant the model must be stepped (`step`).
    `link_of`: plan link id (bundle) -> engine link, for folded runs (paths are in bundle ids)."""

    def __init__(
        self,
        capacities: list[float],
        links: list[FluidLink],
        params: DcqcnParams,
        link_of: dict[int, int] | None = None,
        reverse: list[int] | None = None,
    ) -> None:
        if len(links) < len(capacities):  # links past the described ones (background caps): host-like
            links = [*links, *[FluidLink(False, -1.0)] * (len(capacities) - len(links))]
        self.capacity = list(capacities)
        self.links = links
        self._is_queued = [link.queued for link in links]  # (plain lists: read in the hot loops)
        self._kmin = [link.kmin for link in links]
        self._depth = [-link.level for link in links]  # (sort key: downstream links first)
        self.p = params
        self.link_of = link_of
        self.reverse = reverse  # engine link -> the link back (-1: none): where ACKs and CNPs return
        self.queue = [0.0] * len(capacities)
        self.arrival = [0.0] * len(capacities)
        self.paused = [False] * len(capacities)
        # the share of its time a link may send: below 1 while PFC from the next switch pauses it
        self.eff = [1.0] * len(capacities)
        self.pfc_at = [link.pfc for link in links] + [math.inf] * (len(capacities) - len(links))
        self.users: list[dict[_Sub, float]] = [{} for _ in capacities]
        self.subs: dict[_Sub, None] = {}  # sub-flows still sending
        self.t = 0
        self.wakeup_ns = NEVER_NS
        self.num_recomputes = 0  # rate solutions, as the flow model counts its recomputes
        self.num_steps = 0
        self.pfc_pauses = 0
        self.num_cuts = 0
        self.stepping = False
        self._levels = sorted({link.level for link in links})
        self._gain_per_ns = math.log1p(-params.ewma_gain) / params.alpha_resume_interval_ns
        self._tick = max(1, round(params.rate_decrease_interval_ns))
        self._queued = [k for k, spec in enumerate(links) if spec.queued]
        self._coarse = self._tick * max(1, int(params.rp_timer_ns / 32 // self._tick))
        self._dirty = True  # rates must be solved again
        self._by_level: list[list[tuple[_Sub, list[tuple[int, float, float]]]]] | None = []
        self._levels_plan: list[
            tuple[list, list, list, list[int]]
        ] = []  # (`_structure`: what `_shape` reads)
        self._used: list[int] = []
        self._used_queues: list[int] = []  # queues some sub-flow crosses (others stay as they are)
        # of those, the ones holding bytes or filling as of the last rate solution: the others stay
        # empty until rates change (a queue that empties marks the rates for solving again)
        self._active: list[int] = []
        # per queued link, what feeds it on each sub-flow's path: the links one level before (None:
        # the sub-flow's own host, whose injection a pause holds back); downstream links first
        self._feeders: list[tuple[int, list[tuple[_Sub, list[int] | None]]]] = []
        self._arrivals: list[tuple[int, int, _Sub]] = []  # heap: (arrival, seq, queue pair) of messages
        # (flow, path, instant its last message arrives) of flows with `path_ends`, for the engine to
        # take (and clear) after each call
        self.paths_done: list[tuple[FluidFlow, int, int]] = []
        self._seq = 0

    # --- the flow model's interface ----------------------------------------------------------------
    def add(self, flow: Flow, now: int) -> list[Flow]:
        if not isinstance(flow, FluidFlow):
            raise TypeError("DcqcnNetwork carries FluidFlow objects")
        self._advance(now)
        flow.updated_at = now
        flow.messages = max(1, flow.messages)
        flow.message_bytes = flow.remaining / flow.messages
        for links, spread in self._sub_links(flow):
            by_level: dict[float, list[tuple[int, float, float]]] = {}
            for link, w in links:
                by_level.setdefault(self.links[link].level, []).append((link, w, w * spread[link]))
            flow.routes.append((links, sorted(by_level.items()), self._line(links)))
        flow.started = [0] * len(flow.routes)
        flow.arrived = [0] * len(flow.routes)
        if len(flow.held) != len(flow.routes):
            flow.held = [False] * len(flow.routes)
        if flow.path_ends is not None:
            flow.path_ends = [[0, 0] for _ in flow.routes]
        for path in range(len(flow.routes)):
            if not flow.held[path]:
                self._start(flow, path)
        return self._settle(now)

    def release(self, flow: FluidFlow, paths: list[int], now: int) -> list[Flow]:
        """Let held paths of `flow` go (their sender has joined the collective): each sends its first
        message and, where its predecessor's messages have already arrived, the ones they release
        (ASTRA-sim's ring: a receive that found its message waiting completes at once)."""
        self._advance(now)
        for path in paths:
            if not flow.held[path]:
                continue
            flow.held[path] = False
            self._start_released(flow, path)
        return self._settle(now)

    def _start_released(self, flow: FluidFlow, path: int) -> None:
        """Start the path's messages its predecessor's arrivals allow (at least its first)."""
        after = flow.after
        before = after[path] if path < len(after) and after[path] >= 0 else path
        allowed = min(flow.messages, flow.arrived[before] + 1)
        while flow.started[path] < allowed:
            self._start(flow, path)

    def _start(self, flow: FluidFlow, path: int) -> None:
        """The path's next message, on a new queue pair."""
        links, levels, line = flow.routes[path]
        sub = _Sub(flow, links, levels, flow.message_bytes, line)
        sub.path, sub.message = path, flow.started[path]
        if self.reverse is not None:
            sub.back = [
                r for r in (self.reverse[link] for link, _ in links) if r >= 0 and self.links[r].queued
            ]
        flow.started[path] += 1
        flow.subs.append(sub)
        self.subs[sub] = None
        self._by_level = None
        self._dirty = True

    def remove(self, flow: Flow, now: int) -> list[Flow]:
        self._advance(now)
        for sub in flow.subs:  # type: ignore[attr-defined]
            self.subs.pop(sub, None)
        self._by_level = None
        self._dirty = True
        return self._settle(now)

    def step(self, now: int) -> list[Flow]:
        """Advance to `now` (a wakeup) and apply what is due then: cuts, increases, ends."""
        self._advance(now)
        self.num_steps += 1
        if now % self._tick == 0:
            self._cuts(now)
        self._increases(now)
        arrivals = self._arrivals
        while arrivals and arrivals[0][0] <= now:  # a message arrived: its successors send the next
            _, _, sub = heapq.heappop(arrivals)
            flow = sub.flow
            flow.arrived[sub.path] += 1  # messages of one path may arrive out of order: count them
            for path in range(len(flow.routes)):
                before = flow.after[path] if path < len(flow.after) and flow.after[path] >= 0 else path
                if before == sub.path and not flow.held[path]:
                    while flow.started[path] < min(flow.messages, flow.arrived[before] + 1):
                        self._start(flow, path)
        return self._settle(now)

    def set_capacities(self, capacities: dict[int, float], now: int) -> list[Flow]:
        """A timed link-rate change: a sender's line rate follows its own link's; one whose link was
        down starts again at line rate, one left below it resumes its increase timer."""
        self._advance(now)
        for link, capacity in capacities.items():
            self.capacity[link] = capacity
        self._dirty = True
        for sub in self.subs:
            line = self._line(sub.links)
            if sub.rc <= 0 < line:
                sub.rc = sub.rt = line
            sub.line, sub.rc, sub.rt = line, min(sub.rc, line), min(sub.rt, line)
            if sub.rc < line and sub.timer_at == NEVER_NS:
                sub.timer_at = now + round(self.p.rp_timer_ns)
        return self._settle(now)

    def _line(self, links: list[tuple[int, float]]) -> float:
        """A sender's line rate: its share of its first, queue-less links (its host's)."""
        spec = self.links
        first = min(spec[link].level for link, _ in links)
        caps = [(k, w) for k, w in links if not spec[k].queued and spec[k].level == first] or links
        return min(self.capacity[link] / w for link, w in caps)

    def stats(self) -> dict[str, int]:
        """Steps taken, rate cuts made and PFC pauses started (a folded class counts once)."""
        return {"steps": self.num_steps, "rate_cuts": self.num_cuts, "pfc_pauses": self.pfc_pauses}

    def _sub_links(self, flow: FluidFlow) -> list[tuple[list[tuple[int, float]], dict[int, float]]]:
        """Each sub-flow's (engine link, weight) and its share of each link's arrival.

        A sub-flow's weight on its own bundle b is scaled from the load its instance puts there (B_b,
        the representative's sub-flows) to the load every instance does (S_L, the flow's weight on
        b's class L): what the one bundle sees. A class link stands for the m_L bundles of L the
        representative's sub-flows cross, alike by symmetry, so each sub-flow adds 1/m_L of that to
        the class link's arrival. Unfolded, S = B and m = 1: the plain routes."""
        if not flow.paths:
            return [(list(flow.links), {link: 1.0 for link, _ in flow.links})]
        link_of = self.link_of
        own: dict[int, float] = {}  # bundle -> the representative's load there
        for path in flow.paths:
            for bundle, w in path:
                own[bundle] = own.get(bundle, 0.0) + w
        spread: dict[int, int] = {}  # class -> bundles of it the representative crosses
        for bundle in own:
            cls = link_of[bundle] if link_of is not None else bundle
            spread[cls] = spread.get(cls, 0) + 1
        weight = dict(flow.links)
        out = []
        for path in flow.paths:
            links: dict[int, float] = {}
            for bundle, w in path:
                cls = link_of[bundle] if link_of is not None else bundle
                links[cls] = links.get(cls, 0.0) + w * weight[cls] / own[bundle]
            out.append((list(links.items()), {cls: 1.0 / spread[cls] for cls in links}))
        return out

    # --- time ---------------------------------------------------------------------------------------
    def _advance(self, now: int) -> None:
        """Integrate queues, bytes, α and the CNP credit from `self.t` to `now` at the current rates."""
        dt = now - self.t
        if dt <= 0:
            return
        p, queue, capacity, links = self.p, self.queue, self.capacity, self.links
        arrival, pfc_at, eff, kmins = self.arrival, self.pfc_at, self.eff, self._kmin
        # per queue above KMIN at either end of the interval: log of the chance a packet leaves it
        # unmarked at its mean marking chance (-inf: all are marked)
        marking: dict[int, float] = {}
        log1p = math.log1p
        for link in self._active:
            old = queue[link]
            inflow = arrival[link]
            if inflow or old:
                drain = capacity[link] * eff[link]  # less while the next switch pauses it
                if not old and inflow <= drain:
                    continue  # empty and not filling: stays empty (most queues, most of the time)
                # clamped to [0, max(PFC level, old)] (conditionals: this loop is the model's hot path)
                q = old + (inflow - drain) * dt
                if q < _LAST_BYTE and inflow <= drain * (1 + _EPS):
                    q = 0.0  # drained: what float rounding leaves of it is no backlog (see _LAST_BYTE)
                pause = pfc_at[link]
                top = pause if pause > old else old
                if q > top:
                    q = top
                queue[link] = q
                pause *= 1 - 1e-6
                if (q > 0) != (old > 0) or (q >= pause) != (old >= pause):
                    self._dirty = True  # who passes what, or PFC, changes
                kmin = kmins[link]
                if q > kmin or old > kmin:
                    # RED/ECN marking probability (`SwitchMmu::ShouldSendCN`) at both ends of the
                    # step: 0 up to KMIN, PMAX·(q − KMIN)/(KMAX − KMIN) up to KMAX, 1 above; written
                    # out twice rather than called, as this loop runs every step
                    spec = links[link]
                    kmax = spec.kmax
                    if old <= kmin:
                        p0 = 0.0
                    elif old > kmax:
                        p0 = 1.0
                    else:
                        p0 = spec.pmax * (old - kmin) / (kmax - kmin) if kmax > kmin else 1.0
                    if q <= kmin:
                        p1 = 0.0
                    elif q > kmax:
                        p1 = 1.0
                    else:
                        p1 = spec.pmax * (q - kmin) / (kmax - kmin) if kmax > kmin else 1.0
                    prob = (p0 + p1) / 2
                    marking[link] = -math.inf if prob >= 1 else log1p(-prob)
        for sub in self.subs:  # (every sub-flow here is still sending: `_settle` drops the others)
            sub.remaining -= sub.x * dt
        if not marking:
            self.t = now
            return
        decay = math.exp(self._gain_per_ns * dt)
        alpha_packets = p.alpha_resume_interval_ns / p.payload_bytes  # packets per byte per ns, times ns
        cut_packets = p.rate_decrease_interval_ns / p.payload_bytes
        marked: dict[_Sub, float] = {}  # the sub-flows crossing a marking queue (keys)
        users = self.users
        for link in marking:
            marked.update(users[link])  # (its keys, in their order)
        subs = self.subs
        never = -math.inf
        for sub in marked:
            if sub.done_at != NEVER_NS or sub not in subs:
                continue  # ended since the links' users were last gathered
            # marks fall on the packets the sub-flow sends through each marking queue on its path
            # (at most its share of the drain); log of "no mark" per ns
            unmarked = 0.0
            if sub.out:
                for link, rate in sub.out:
                    unmark = marking.get(link)
                    if unmark is not None and rate > 0:
                        if unmark == never:
                            unmarked = unmark
                            break
                        unmarked += rate * unmark
            if not unmarked:
                continue
            # the CNPs of these marks arrive once the marked packets have crossed the queues after
            # the marking one and their ACKs the queues on the way back (ns-3's ACKs share the data
            # packets' priority class, so they wait in the same queues)
            delay = 0.0
            after = False
            for link, _ in sub.out:
                if after:
                    delay += queue[link] / capacity[link]
                after = after or link in marking
            for link in sub.back:
                delay += queue[link] / capacity[link]
            sub.pending.append(
                (
                    now + delay,
                    -math.expm1(unmarked * cut_packets) * (dt / p.rate_decrease_interval_ns),
                    (1 - decay) * -math.expm1(unmarked * alpha_packets),
                )
            )
        self.t = now

    def _cuts(self, now: int) -> None:
        p = self.p
        for sub in self.subs:
            pending = sub.pending  # (every sub-flow here is still sending)
            if pending and pending[0][0] <= now:  # CNPs that have arrived
                counting = not sub.first_cnp
                a = self._alpha(sub, now) if counting else 0.0
                while pending and pending[0][0] <= now:
                    arrived, cnps, alpha = pending.popleft()
                    sub.credit += cnps
                    if sub.credit >= sub.next_whole:
                        sub.crossed_at = arrived
                        sub.next_whole = math.floor(sub.credit) + 1.0
                    if counting:
                        a += alpha
                        if a > 1.0:
                            a = 1.0
                if counting:
                    sub.alpha = a
            if sub.ready >= 1:  # CNPs of marks made one interval ago have arrived
                # one cut per interval; at MIN_RATE, checked every `_coarse` ns, the intervals since
                # (each only restarts the timer: from the tick of the last of them)
                owed = 1 if sub.rc > p.min_rate else int(sub.ready)
                sub.credit -= owed
                sub.next_whole -= owed
                self.num_cuts += owed - 1
                if sub.first_cnp:
                    sub.first_cnp, sub.alpha, sub.alpha_at, sub.rt = False, 1.0, now, sub.rc
                else:
                    self._alpha(sub, now)
                if p.clamp_target_rate or sub.stage:
                    sub.rt = sub.rc
                rc = max(p.min_rate, sub.rc * (1 - sub.alpha / 2))
                if rc != sub.rc:  # a cut at MIN_RATE restarts the timer and changes no rate
                    sub.rc = rc
                    self._dirty = True
                sub.stage = 0
                last = now
                if owed > 1 or now % self._coarse == 0 and rc == p.min_rate:
                    # checked coarsely: the last of these cuts was due one check interval after the
                    # CNP that completed it counted (at the decrease-interval tick after it arrived)
                    tick = self._tick
                    last = min(now, (-(-_ceil(sub.ready_crossed_at) // tick) + 1) * tick)
                sub.timer_at = last + round(p.rp_timer_ns)
                self.num_cuts += 1
            sub.ready = sub.credit
            sub.ready_crossed_at = sub.crossed_at

    def _alpha(self, sub: _Sub, now: int) -> float:
        """α decays by (1 − g) every ALPHA_RESUME_INTERVAL without a CNP: applied when it is read
        (at CNP arrivals and cuts) for the time since it was last, rather than at every step."""
        if now != sub.alpha_at:
            sub.alpha *= math.exp(self._gain_per_ns * (now - sub.alpha_at))
            sub.alpha_at = now
        return sub.alpha

    def _increases(self, now: int) -> None:
        p = self.p
        for sub in self.subs:
            while sub.timer_at <= now and sub.done_at == NEVER_NS:
                if sub.stage > p.fast_recovery_times:
                    sub.rt = min(sub.line, sub.rt + p.rate_hai)
                elif sub.stage == p.fast_recovery_times:
                    sub.rt = min(sub.line, sub.rt + p.rate_ai)
                sub.rc = min(sub.line, (sub.rc + sub.rt) / 2)
                sub.stage += 1
                self._dirty = True
                sub.timer_at += round(p.rp_timer_ns)
                if sub.rc >= sub.line * (1 - _EPS) and sub.rt >= sub.line * (1 - _EPS):
                    sub.rc = sub.rt = sub.line
                    sub.timer_at = NEVER_NS  # at line rate: further increases change nothing

    # --- rates and what happens next ----------------------------------------------------------------
    def _settle(self, now: int) -> list[Flow]:
        """Finish sub-flows whose bytes are all sent (and flows whose sub-flows all are), solve the
        rates, and plan the next wakeup."""
        finished: list[Flow] = []
        ended = [  # (no max call: this runs at every step)
            sub
            for sub in self.subs
            if sub.x
            and sub.done_at == NEVER_NS
            and sub.remaining <= sub.x * 0.5 + _EPS * (sub.remaining if sub.remaining > 1.0 else 1.0)
        ]
        if ended:  # (most steps end no sub-flow)
            for sub in ended:
                sub.remaining = 0.0
                sub.done_at = now + self._drain_ns(sub)
            for sub in ended:
                if sub.message + 1 < sub.flow.messages:  # its arrival lets the next messages go
                    self._seq += 1
                    heapq.heappush(self._arrivals, (max(sub.done_at, now + 1), self._seq, sub))
            for sub in ended:
                ends = sub.flow.path_ends
                if ends is not None:  # the path's last message arrives: its receiver's part may end
                    entry = ends[sub.path]
                    entry[0] += 1
                    entry[1] = max(entry[1], sub.done_at)
                    if entry[0] == sub.flow.messages:
                        self.paths_done.append((sub.flow, sub.path, entry[1]))
            for flow in dict.fromkeys(sub.flow for sub in ended):
                complete = all(n == flow.messages for n in flow.started)
                if complete and all(sub.done_at != NEVER_NS for sub in flow.subs):
                    flow.done_at = max(sub.done_at for sub in flow.subs)
                    flow.remaining = 0.0
                    flow.version += 1
                    finished.append(flow)
            for sub in ended:
                self.subs.pop(sub)
                self._by_level = None
                self._dirty = True
        self._rates()
        self._plan(now)
        return finished

    def _drain_ns(self, sub: _Sub) -> int:
        """When the sub-flow's last byte, injected now, has left its path's queues (FIFO): every byte
        queued before it on the path up to a hop must cross that hop first."""
        total = ahead = 0.0
        for _, hops in sub.levels:
            ahead += max(self.queue[link] for link, _, _ in hops)
            rate = min(self.capacity[link] for link, _, _ in hops)
            if ahead > 0 and rate > 0:
                total = max(total, ahead / rate)
        return max(0, _ceil(total))

    def _rates(self) -> None:
        """Each sub-flow's injection: its RC, held to its share of its host's (queue-less) links and,
        where PFC pauses, to what the paused hops let through."""
        if not self._dirty:
            return  # nothing that sets a rate changed since the last solution
        self._dirty = False
        self.num_recomputes += 1
        if self._by_level is None:
            self._structure()
        for sub in self.subs:
            sub.x = sub.rc
        for link in self._used:  # PFC's pauses are solved anew (`_pfc`), from arrivals without them
            self.eff[link] = 1.0
        for sub, share in self._shape().items():  # a host's link shared among the flows it sends
            sub.x = sub.rc * share
        self._pfc()
        queue, arrival, capacity, eff = self.queue, self.arrival, self.capacity, self.eff
        self._active = [k for k in self._used_queues if queue[k] > 0 or arrival[k] > capacity[k] * eff[k]]

    def _structure(self) -> None:
        """Which sub-flows cross which links, level by level (rebuilt when sub-flows come or go)."""
        arrival, users = self.arrival, self.users
        for link in self._used:  # only the links last crossed carry arrivals, pauses, users
            arrival[link] = 0.0
            self.eff[link] = 1.0
            users[link].clear()
        per_level: dict[float, list[tuple[_Sub, list[tuple[int, float, float]]]]] = {}
        used: dict[int, None] = {}
        feeders: dict[int, list[tuple[_Sub, list[int] | None]]] = {}
        is_queued = self._is_queued
        for sub in self.subs:
            before: list[int] | None = None  # the queued links one level back (None: the host)
            for level, hops in sub.levels:
                entry = (sub, hops)
                at_level = per_level.get(level)
                if at_level is None:
                    per_level[level] = [entry]
                else:
                    at_level.append(entry)
                queued: list[int] | None = None
                for link, _, w in hops:
                    users[link][sub] = w
                    used[link] = None
                    if is_queued[link]:
                        feeders.setdefault(link, []).append((sub, before))
                        if queued is None:
                            queued = [link]
                        else:
                            queued.append(link)
                before = queued
        # per level: its entries, what `_shape` reads — (sub-flow, link, arrival weight) per hop of
        # each entry in turn, per entry (sub-flow, (link, queued) per hop, whether its first hop is
        # queue-less) — and its queue-less links (hosts' NICs: shared max-min, `_fair_levels`)
        by_level, plans = [], []
        for level in sorted(per_level):
            entries = per_level[level]
            loads, plan, nics = [], [], {}
            for sub, hops in entries:
                flags = []
                for link, _, w in hops:
                    queued_link = is_queued[link]
                    if not queued_link:
                        nics[link] = None
                    loads.append((sub, link, w))
                    flags.append((link, queued_link))
                plan.append((sub, flags, not is_queued[hops[0][0]]))
            by_level.append(entries)
            plans.append((entries, loads, plan, list(nics)))
        self._by_level = by_level
        self._levels_plan = plans
        self._used = list(used)
        links, depth = self.links, self._depth
        self._feeders = sorted(feeders.items(), key=lambda item: depth[item[0]])
        # ns-3 pauses an ingress whose share of the buffer reaches (B - used) / 8: with n ingresses
        # alike feeding one queue, at q = n B / (8 + n) (n = 1: the links' B/9)
        pfc_at = self.pfc_at
        for link in used:
            if is_queued[link]:
                spec = links[link]
                n = max(1.0, min(sum(users[link].values()), spec.ingress))
                pfc_at[link] = spec.pfc * 9 * n / (8 + n)
        queue = self.queue  # queues still draining stay, with no arrival
        self._used_queues = [k for k in self._queued if queue[k] > 0 or k in used]

    def _pfc(self) -> None:
        """PFC, hop by hop: a queue at its pause threshold and still filling pauses what feeds it, so
        that it receives only what it drains. A paused switch link sends that share of its time (all
        its flows alike: the pause is per port), so its own queue grows, reaches its threshold and
        pauses the link before it in turn; a paused host sends only what the first hop takes. Solved
        downstream first, repeated until no queue at its threshold receives more than it drains."""
        capacity, queue, arrival, eff, pfc_at = self.capacity, self.queue, self.arrival, self.eff, self.pfc_at
        over = 1 + _EPS  # (bound once: the same factor as written out in each comparison)
        pausing: set[int] = set()
        for _ in range(_PFC_ROUNDS):
            throttle: dict[_Sub, float] = {}
            for link, feeders in self._feeders:
                drain = capacity[link] * eff[link]
                if queue[link] < pfc_at[link] * (1 - 1e-6) or arrival[link] <= drain * over:
                    continue
                pausing.add(link)
                share = drain / arrival[link]
                sending: dict[int, float] = {}  # a feeding link's new sending share
                for sub, before in feeders:
                    if before is None:
                        throttle[sub] = min(throttle.get(sub, 1.0), share)
                        continue
                    for up in before:
                        out = capacity[up] * eff[up]
                        if queue[up] <= 0:
                            out = min(out, arrival[up])
                        sending[up] = min(sending.get(up, eff[up]), out * share / capacity[up])
                for up, value in sending.items():
                    eff[up] = value
            if not pausing or (
                not throttle
                and not any(
                    queue[k] >= pfc_at[k] * (1 - 1e-6) and arrival[k] > capacity[k] * eff[k] * (1 + _EPS)
                    for k in pausing
                )
            ):
                break
            for sub, share in throttle.items():
                sub.x *= share
            self._shape()
        paused = self.paused
        for link in self._used_queues:
            if link in pausing:
                if not paused[link]:
                    paused[link] = True
                    self.pfc_pauses += 1
            elif queue[link] < pfc_at[link] * (1 - 1e-6):
                paused[link] = False

    def _shape(self) -> dict[_Sub, float]:
        """Arrival per link with each sub-flow shaped by the links before it on its path: a link with
        a backlog sends at its rate C (times the share of its time PFC leaves it), each flow C/A of
        what it brings; one without passes what arrives, C/A of it when overloaded. Returns each
        sub-flow's share of the queue-less links it crosses first (its host's: how fast it can
        inject), and notes each sub-flow's rate out of each queue it crosses (`out`)."""
        arrival, capacity, queue, links, eff = self.arrival, self.capacity, self.queue, self.links, self.eff
        over = 1 + _EPS  # (bound once: the same factor as written out in each comparison)
        inf, no_levels = math.inf, _NO_LEVELS
        for link in self._used:
            arrival[link] = 0.0
        factor = {}
        for sub in self.subs:
            factor[sub] = sub.x
            sub.out = []
        share_of: dict[_Sub, float] = {}
        for entries, loads, plan, nics in self._levels_plan:
            for sub, link, w in loads:
                arrival[link] += w * factor[sub]
            level = no_levels
            for link in nics:
                if arrival[link] > capacity[link] * eff[link] * over:
                    level = _fair_levels(entries, factor, arrival, capacity, eff, links)
                    break
            for sub, flags, from_host in plan:
                rate = factor[sub]
                share = inf
                out = sub.out
                for link, queued in flags:
                    a, c = arrival[link], capacity[link] * eff[link]
                    if queued and queue[link] > 0 and a > 0:
                        one = c / a  # a backlog: the link sends at its rate, in the mix that arrives
                    elif a > c * over:
                        if link in level:  # a host's link: its queue pairs in turn, each up to its rate
                            fair = level[link]
                            one = fair / rate if fair < rate else 1.0
                        else:
                            one = c / a
                    else:
                        one = 1.0
                    if queued:
                        out.append((link, rate * one if one < 1.0 else rate))
                    if one < share:
                        share = one
                if share < 1 and from_host:
                    before = share_of.get(sub, 1.0)
                    share_of[sub] = share if share < before else before
                factor[sub] = rate * share
        return share_of

    def _plan(self, now: int) -> None:
        """The next instant something changes: a cut check, an increase, a queue crossing a
        threshold or emptying, a sub-flow's last byte. Cut checks come every decrease interval while
        a cut can change a rate; while every sub-flow that marks or CNPs reach sits at MIN_RATE, a cut
        only restarts its increase timer, and the checks come every `_coarse` ns instead (1/32 of
        RP_TIMER; the timer restarts from the tick of the last cut, `_cuts`)."""
        queue, capacity = self.queue, self.capacity
        ceil = math.ceil  # (`_ceil`, inlined: this loop runs at every step)
        wake = NEVER_NS
        marking = False
        marks: set[int] = set()
        arrival, eff, pfc_at = self.arrival, self.eff, self.pfc_at
        soon = now + 1  # (conditionals, not min/max: this loop runs at every step)
        kmins = self._kmin
        for link in self._active:
            q, net = queue[link], arrival[link] - capacity[link] * eff[link]
            if not q and net <= 0:
                continue  # empty and not filling: nothing to plan (most queues, most of the time)
            kmin = kmins[link]
            if q > kmin and q > 0:
                marking = True
                marks.add(link)
            if net > _EPS * capacity[link]:
                if q < kmin:
                    at = now + ceil((kmin - q) / net - 1e-6) + 1
                    if at < wake:
                        wake = at
                if q < pfc_at[link]:
                    at = now + ceil((pfc_at[link] - q) / net - 1e-6)
                    if at < soon:
                        at = soon
                    if at < wake:
                        wake = at
            elif q > 0 and net < -_EPS * capacity[link]:
                if q > kmin:  # marking stops
                    at = now + ceil((q - kmin) / -net - 1e-6) + 1
                    if at < soon:
                        at = soon
                    if at < wake:
                        wake = at
                at = now + ceil(q / -net - 1e-6)
                if at < soon:
                    at = soon
                if at < wake:
                    wake = at
        tick = self._tick
        floor = self.p.min_rate
        live = False  # a sub-flow whose rate a cut can still change
        waiting = False  # CNPs on their way to some sub-flow
        for sub in self.subs:  # (conditionals, not min/max: this loop runs at every step)
            owes = sub.credit >= 1 or sub.ready >= 1
            if owes:
                marking = True
            pending = sub.pending
            if pending:
                waiting = True
            live_sub = False  # a cut can still change its rate
            if sub.rc > floor:
                if owes or pending:
                    live_sub = True
                elif marks:
                    for link, _ in sub.out:  # (a loop, not any() over a generator)
                        if link in marks:
                            live_sub = True
                            break
            if live_sub:
                live = True
                if pending:  # the tick at which its next CNPs count
                    at = -(-ceil(pending[0][0] - 1e-6) // tick) * tick
                    if at < wake:
                        wake = at
            if sub.timer_at < wake:
                wake = sub.timer_at
            x = sub.x
            if x > 0:
                at = now + ceil(sub.remaining / x - 1e-6)
                if at <= now:
                    at = now + 1
                if at < wake:
                    wake = at
        if self._arrivals and self._arrivals[0][0] < wake:
            wake = self._arrivals[0][0]
        self.stepping = marking
        if marking or waiting:
            every = tick if live else self._coarse
            wake = min(wake, (now // every + 1) * every)
        self.wakeup_ns = wake if wake > now else now + 1


def _fair_levels(entries, factor, arrival, capacity, eff, links) -> dict[int, float]:
    """Per overloaded queue-less link (a host's NIC) of one level, the rate each of its queue pairs
    gets: ns-3's NIC serves its queue pairs in turn (`RdmaEgressQueue::GetNextQindex`, round robin),
    each paced at its own rate (`m_nextAvail`), so a pair slower than an equal share keeps its rate
    and the others split the rest — max-min fair: the level λ with Σ w·min(x, λ) = C (w: the pairs a
    sub-flow stands for on the link)."""
    over: dict[int, list[tuple[float, float]]] = {}
    for sub, hops in entries:
        rate = factor[sub]
        for link, _, w in hops:
            if not links[link].queued and arrival[link] > capacity[link] * eff[link] * (1 + _EPS):
                over.setdefault(link, []).append((rate, w))
    level: dict[int, float] = {}
    for link, pairs in over.items():
        pairs.sort()
        left = capacity[link] * eff[link]
        weight = sum(w for _, w in pairs)
        fair = left / weight
        for rate, w in pairs:
            if rate >= fair:
                break
            left -= rate * w
            weight -= w
            fair = left / weight
        level[link] = fair
    return level


def _ceil(ns: float) -> int:
    """Whole nanoseconds, rounding up but forgiving float noise (as `flows.Flow.finish_time` does), so
    that a folded class's summed loads and its members' separate ones give the same instants."""
    return math.ceil(ns - 1e-6)
