"""The ideal collective model as ASTRA-sim's system layer runs it, for imported ASTRA-sim studies.

`collective_model: ideal` with `collective_algorithm: astrasim` (what `astra-hetero import` writes)
prices every collective as ASTRA-sim 518bd51 does with the study's own system file, on the study's
network (`AstraSimCommPlanner`):
- a collective over every NPU runs on ASTRA-sim's logical dimensions (its network's, or the ns-3
  logical topology's): one phase per dimension with more than one NPU, in ascending order (all-gather:
  descending), each with that dimension's `*-implementation`; an all-reduce under `localBWAware` is a
  reduce-scatter up the dimensions, an all-reduce on the last one and an all-gather back down,
  under `baseline` an all-reduce on each; a `one*` implementation is one ring over all NPUs;
- a collective over a comm group smaller than the job is one phase on a ring of its members (a ring
  whenever the file lists more than one implementation, as ASTRA-sim decides), with ASTRA-sim's fixed
  10 ns local endpoint delay;
- chunks and queues as `astrasim_streams`, phases as `astrasim_phases`, messages as the network
  prices them (`delay`), a send as one message.
The result is one plan per collective (no link is loaded: ASTRA-sim's analytical network has no
contention); what the model cannot follow is named in `approximations`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from astra_hetero.astrasim_inputs.system import Implementation, SystemConfig
from astra_hetero.backends.embedded.network import astrasim_phases as phases
from astra_hetero.backends.embedded.network.algorithms import ALL_GATHER, ALL_REDUCE, REDUCE_SCATTER
from astra_hetero.backends.embedded.network.astrasim_streams import Step, collective_ns, num_chunks
from astra_hetero.backends.embedded.network.phases import PhasePlan
from astra_hetero.backends.embedded.network.routing import Router
from astra_hetero.errors import RunDirError

LOCAL_ENDPOINT_NS = 10  # MemBus "fast" transmission: comm-group rings, whatever the system file says


@dataclass(frozen=True)
class Ring:
    """A logical ring ASTRA-sim runs a phase on: its NPUs in sending order (per line of a dimension)."""

    lines: tuple[tuple[int, ...], ...]  # every line of the dimension (one for a comm group)
    implementation: Implementation
    endpoint_ns: int
    queue_level: int


class AstraSimCommPlanner:
    def __init__(
        self,
        router: Router,
        system: SystemConfig,
        dims: Sequence[int],
        delay: phases.Delay,
        queues_per_dim: int = 1,
    ) -> None:
        self.router = router
        self.system = system
        self.dims = tuple(dims)
        self.num_npus = math.prod(self.dims)
        self.delay = delay
        self.queues_per_dim = queues_per_dim
        self.per_queue = math.ceil(system.active_chunks_per_dimension / queues_per_dim)
        self._plans: dict[tuple, tuple[PhasePlan, ...]] = {}
        self._phases: dict[tuple, int] = {}

    def collective(self, members: tuple[int, ...], kind: str, size: int = 0) -> tuple[PhasePlan, ...]:
        key = (members, kind, size)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = (PhasePlan((), 0.0, self._collective_ns(members, kind, size), 0.0),)
        return plan

    def transfer(self, src: int, dst: int, size: int = 0) -> tuple[PhasePlan, ...]:
        key = ((src, dst), "p2p", size)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = (PhasePlan((), 0.0, self.delay(src, dst, size), 0.0),)
        return plan

    def choice(self, members: tuple[int, ...], kind: str, size: int) -> tuple[str, str] | None:
        """(algorithm, protocol) for the trace viewer: the system file's implementation of each
        phase the collective runs ("ring+direct" over two dimensions), direct for a transfer; ASTRA-sim
        has no protocols. Only called for collectives already planned, so the file has their kind."""
        if kind == "p2p":
            return ("direct", "")
        if len(members) < 2:
            return None
        if len(members) != self.num_npus:
            return (self._group_ring(members, kind).implementation.name, "")
        names = [r.implementation.name for r in self._world_rings(kind) if len(r.lines[0]) > 1]
        return ("+".join(names), "") if names else None

    # --- one collective -----------------------------------------------------------------------
    def _collective_ns(self, members: tuple[int, ...], kind: str, size: int) -> int:
        if len(members) < 2:
            return 0
        splits = self.system.preferred_dataset_splits
        if splits < 1:
            raise RunDirError(
                f"{self.system.path}: preferred-dataset-splits is missing; ASTRA-sim divides every "
                "collective into that many chunks"
            )
        chunks, chunk = num_chunks(size, splits, self.num_npus, gather=kind == ALL_GATHER)
        if chunks == 0 and size > 0:
            raise RunDirError(
                f"{self.system.path}: an all-gather of {size} bytes is smaller than preferred-dataset-splits "
                f"({splits}): ASTRA-sim cuts it into empty chunks and never finishes it"
            )
        steps = self._steps(members, kind, chunk)
        return collective_ns(chunks, steps, self.per_queue)

    def _steps(self, members: tuple[int, ...], kind: str, chunk: int) -> tuple[Step, ...]:
        """Each chunk's phases: (queue, duration), in the order the system layer creates them."""
        allocator = _QueueAllocator(len(self.dims), self.queues_per_dim)
        if len(members) != self.num_npus:
            ring = self._group_ring(members, kind)
            return (Step(allocator.first(0), self._phase_ns(ring, kind, chunk)),)
        rings = self._world_rings(kind)
        active = [r for r in rings if len(r.lines[0]) > 1]
        out, remain = [], chunk
        if kind != ALL_REDUCE or self.system.collective_optimization == "baseline":
            order = active[::-1] if kind == ALL_GATHER else active
            for ring in order:
                out.append(Step(allocator.next(ring.queue_level), self._phase_ns(ring, kind, remain)))
                remain = phases.output_size(kind, remain, len(ring.lines[0]))
            return tuple(out)
        *lower, last = active or [None]
        if last is None:
            return ()
        for ring in lower:
            out.append(Step(allocator.first(ring.queue_level), self._phase_ns(ring, REDUCE_SCATTER, remain)))
            remain = phases.output_size(REDUCE_SCATTER, remain, len(ring.lines[0]))
        out.append(Step(allocator.first(last.queue_level), self._phase_ns(last, ALL_REDUCE, remain)))
        for ring in reversed(lower):
            out.append(
                Step(allocator.last(ring.queue_level), self._phase_ns(ring, ALL_GATHER, remain, reverse=True))
            )
            remain = phases.output_size(ALL_GATHER, remain, len(ring.lines[0]))
        return tuple(out)

    def _phase_ns(self, ring: Ring, kind: str, size: int, reverse: bool = False) -> int:
        key = (ring, kind, size, reverse)
        found = self._phases.get(key)
        if found is not None:
            return found
        impl = ring.implementation
        worst = 0
        for line in ring.lines:
            order = line[::-1] if reverse else line
            if impl.name in ("direct", "oneDirect"):
                worst = max(
                    worst, phases.direct_phase(kind, order, size, self.delay, ring.endpoint_ns, impl.window)
                )
            elif impl.name in ("halvingDoubling", "oneHalvingDoubling"):
                worst = max(
                    worst,
                    phases.halving_doubling_phase(
                        kind, order, size, self.delay, ring.endpoint_ns, self._reduce_ns
                    ),
                )
            else:  # ring, oneRing (and doubleBinaryTree, named as an approximation)
                worst = max(
                    worst, phases.ring_phase(kind, order, size, self.delay, ring.endpoint_ns, self._reduce_ns)
                )
        self._phases[key] = worst
        return worst

    def _reduce_ns(self, size: int) -> int:
        """Reading two chunks and writing one through local memory (PacketBundle::call), each third
        truncated to whole ns on its own."""
        bandwidth = self.system.local_mem_gbytes_per_s * 1e9
        if bandwidth <= 0:
            raise RunDirError(
                f"{self.system.path}: local-mem-bw is missing; ASTRA-sim prices every reduction step of "
                "a collective through it"
            )
        return 3 * int(float(size) / bandwidth * 1e9)

    # --- rings ----------------------------------------------------------------------------------
    def _implementations(self, kind: str) -> tuple[Implementation, ...]:
        found = self.system.implementations.get(kind)
        if not found:
            key = kind.replace("_", "-") + "-implementation"
            raise RunDirError(f"{self.system.path}: {key} is missing; the traces run {kind} collectives")
        return found

    def _group_ring(self, members: tuple[int, ...], kind: str) -> Ring:
        implementations = self._implementations(kind)
        # CommunicatorGroup::get_collective_plan: several dimensions' worth collapses to a ring
        impl = Implementation("ring") if len(implementations) > 1 else implementations[0]
        return Ring((members,), impl, LOCAL_ENDPOINT_NS, 0)

    def _world_rings(self, kind: str) -> list[Ring]:
        """GeneralComplexTopology: one ring per listed implementation (no more than the dimensions);
        a one* implementation makes one ring over every NPU and ends the list."""
        implementations = self._implementations(kind)
        endpoint = self.system.endpoint_delay_ns
        rings, stride = [], 1
        for level, impl in enumerate(implementations[: len(self.dims)]):
            if impl.name.startswith("one"):
                rings.append(Ring((tuple(range(self.num_npus)),), impl, endpoint, level))
                break
            size = self.dims[level]
            lines = tuple(
                tuple(base + k * stride for k in range(size))
                for base in range(self.num_npus)
                if base // stride % size == 0
            )
            rings.append(Ring(lines, impl, endpoint, level))
            stride *= size
        return rings


class _QueueAllocator:
    """QueueLevelHandler: Q queues per dimension; plain phases take them in turn, an all-reduce's
    first half and turning point the first Q/2, its all-gather half the second Q/2."""

    def __init__(self, num_dims: int, per_dim: int) -> None:
        self.per_dim = per_dim
        self.turn = [0] * num_dims
        self.first_turn = [0] * num_dims
        self.last_turn = [per_dim // 2] * num_dims

    def next(self, level: int) -> int:
        queue = self.turn[level]
        self.turn[level] = (queue + 1) % self.per_dim
        return level * self.per_dim + queue

    def first(self, level: int) -> int:
        queue = self.first_turn[level]
        half = max(self.per_dim // 2, 1)
        self.first_turn[level] = 0 if queue + 1 >= half else queue + 1
        return level * self.per_dim + queue

    def last(self, level: int) -> int:
        queue = self.last_turn[level]
        nxt = queue + 1
        self.last_turn[level] = self.per_dim // 2 if nxt >= self.per_dim else nxt
        return level * self.per_dim + queue
