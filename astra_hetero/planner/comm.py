"""Communication times for the planner, read off the simulator's own communication model.

The embedded engine turns every collective and transfer into phases on the cluster's links: the
NCCL-like model (`backends/embedded/network/nccl.py`, whose prices are `astra_hetero.comm.tuning`'s:
NCCL's algorithm and protocol choice, latencies and achievable bandwidths on the rings it lays out) or
the ideal model (`backends/embedded/network/ideal.py`), as the spec's `collectives` section selects.
The planner builds the same topology, router and communication planner once per problem, in memory,
and times operations with them:

- `alone_ns`: the operation with the network to itself, exactly as the engine times it (latency, data
  at its solo rate, reduction through memory). The engine never gives a flow more than its solo rate
  and always pays the latency, so no run of the operation is shorter: the bounds use this.
- `together_ns`: several operations started at once, sharing links max-min fairly as in the engine
  (e.g. the tp data-parallel groups of one stage, or the tp ranks' activation sends): the estimate
  uses this.
"""

from __future__ import annotations

import heapq
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from astra_hetero.backends.embedded.network.flows import Flow, FlowNetwork
from astra_hetero.backends.embedded.network.ideal import IdealCommPlanner
from astra_hetero.backends.embedded.network.nccl import NcclCommPlanner
from astra_hetero.backends.embedded.network.phases import PhasePlan
from astra_hetero.backends.embedded.network.routing import Router
from astra_hetero.backends.embedded.rundir.comm_inputs import CommInputs
from astra_hetero.backends.embedded.rundir.topology import parse_topology
from astra_hetero.comm.measured import ScopedTable
from astra_hetero.comm.nccl_tests import parse_nccl_tests
from astra_hetero.spec.devices import Device
from astra_hetero.spec.schema import Spec
from astra_hetero.topology import checked_graph
from astra_hetero.topology.ns3 import link_kinds_text, topology_text

P2P = "p2p"


@dataclass(frozen=True)
class Op:
    """One collective on `members` (ranks), or a transfer (`kind` p2p, members = (src, dst)).
    `size` is the trace's comm_size (an all-gather's: each rank's input)."""

    members: tuple[int, ...]
    kind: str
    size: int


def trace_size(kind: str, buffer_bytes: float, num_ranks: int) -> int:
    """The comm_size the generator writes for a collective of this full buffer (workload/program.py)."""
    return int(buffer_bytes / num_ranks if kind == "all_gather" else buffer_bytes)


class CommModel:
    def __init__(self, spec: Spec, devices: Sequence[Device]) -> None:
        graph = checked_graph(spec)
        router = Router(parse_topology(topology_text(graph, spec.network), "the planner's topology"))
        self.capacities = router.bundle_bytes_per_ns
        machines = [d.domain for d in devices]  # NCCL's nodes: the scale-up domains
        collectives = spec.collectives
        self.model = collectives.model
        self.planner: IdealCommPlanner | NcclCommPlanner
        if collectives.model == "nccl":
            inputs = CommInputs(
                "nccl",
                collectives.resolved_algorithm,
                collectives.protocol,
                tuple(json.loads(link_kinds_text(graph))["kinds"]),
                tuple(d.spec.gpu.architecture for d in devices),
                tuple(d.group_name for d in devices),
                _tables(spec),
            )
            self.planner = NcclCommPlanner(router, machines, inputs)
        else:
            memory = [d.spec.gpu.hbm_tbps * d.spec.gpu.compute_multiplier * 1000 for d in devices]
            self.planner = IdealCommPlanner(router, machines, collectives.resolved_algorithm, memory)
        self._alone: dict[Op, int] = {}
        self._together: dict[tuple[Op, ...], int] = {}

    def phases(self, op: Op) -> tuple[PhasePlan, ...]:
        if op.kind == P2P:
            src, dst = op.members
            return self.planner.transfer(src, dst, op.size)
        return self.planner.collective(op.members, op.kind, op.size)

    def alone_ns(self, op: Op) -> int:
        found = self._alone.get(op)
        if found is None:
            found = self._alone[op] = sum(_phase_ns(p, op.size) for p in self.phases(op))
        return found

    def together_ns(self, ops: Sequence[Op]) -> int:
        """Until the last of `ops`, all started at time 0, has finished."""
        key = tuple(ops)
        found = self._together.get(key)
        if found is None:
            found = self._together[key] = (
                self.alone_ns(ops[0]) if len(ops) == 1 else _concurrent_ns(self, ops)
            )
        return found


def _phase_ns(phase: PhasePlan, size: int) -> int:
    """A phase alone on its links, rounded as the engine rounds it (network.Flow.finish_time)."""
    num_bytes = size * phase.bytes_fraction
    moving = math.ceil(num_bytes / phase.solo_rate - 1e-6) if phase.links and num_bytes > 0 else 0
    return max(0, moving) + phase.latency_ns + round(size * phase.memory_ns_per_byte)


def _concurrent_ns(model: CommModel, ops: Sequence[Op]) -> int:
    """The engine's handling of phases and flows (engine._start_phase, _flow_done), for these ops only."""
    network = FlowNetwork(model.capacities)
    plans = [model.phases(op) for op in ops]
    next_phase = [0] * len(ops)
    events: list[tuple[int, int, object]] = []  # (time, sequence, flow with its version | op index)
    sequence = 0
    finish = 0

    def push(time: int, item: object) -> None:
        nonlocal sequence
        heapq.heappush(events, (time, sequence, item))
        sequence += 1

    def push_flows(flows: list[Flow], now: int) -> None:
        for flow in flows:
            push(flow.finish_time(now), (flow, flow.version))

    def start(index: int, now: int) -> None:
        nonlocal finish
        if next_phase[index] == len(plans[index]):
            finish = max(finish, now)
            return
        phase = plans[index][next_phase[index]]
        num_bytes = ops[index].size * phase.bytes_fraction
        if not phase.links or num_bytes <= 0:
            push(now + _tail_ns(phase, ops[index].size), index)
        else:
            push_flows(network.add(Flow(phase.links, num_bytes, index, phase.solo_rate), now), now)

    for index in range(len(ops)):
        start(index, 0)
    while events:
        now, _, item = heapq.heappop(events)
        if isinstance(item, int):  # a phase's tail is over
            next_phase[item] += 1
            start(item, now)
            continue
        flow, version = item  # type: ignore[misc]
        if version != flow.version:
            continue  # its rate changed since: a later event stands for it
        flow.version = -1
        push_flows(network.remove(flow, now), now)
        index = flow.owner
        push(now + _tail_ns(plans[index][next_phase[index]], ops[index].size), index)
    return finish


def _tail_ns(phase: PhasePlan, size: int) -> int:
    return phase.latency_ns + round(size * phase.memory_ns_per_byte)


def _tables(spec: Spec) -> tuple[ScopedTable, ...]:
    """The spec's measured nccl-tests tables (paths resolved when the spec was loaded)."""
    tables = []
    for scope, entries in spec.collectives.nccl_tests.items():
        for entry in entries:
            path = Path(entry.path)
            table = parse_nccl_tests(path.read_text(encoding="utf-8"), path.name, entry.collective)
            tables.append(ScopedTable(scope, entry.node_group, str(path), table))
    return tuple(tables)
