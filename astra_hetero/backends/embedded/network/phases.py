"""What a collective or transfer becomes on the network: a tuple of `PhasePlan`, one per phase.

Every communication model (`ideal.IdealCommPlanner`, `nccl.NcclCommPlanner`) answers the same two
questions, `collective(members, kind, size)` and `transfer(src, dst, size)`; `CommPlanner` names that
interface for the code that only asks them (the engine's and the folding's communication models).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from astra_hetero.backends.embedded.network.routing import Router

TransferKey = tuple[int, int, int]  # (src rank, dst rank, tag): how a recv finds its send


@dataclass(frozen=True)
class PhasePlan:
    links: tuple[tuple[int, float], ...]  # directed link -> summed fraction of the phase's sub-flows
    bytes_fraction: float
    latency_ns: int
    solo_rate: float  # the phase's flow rate alone on its links (0 without links), computed once here
    memory_ns_per_byte: float = 0.0  # reduction through memory, per byte of the collective's size
    # each transfer's own route (bundle -> fraction), for the DCQCN fluid model's per-queue-pair rates;
    # empty: one transfer over `links`. A folded plan keeps its representative instance's routes.
    paths: tuple[tuple[tuple[int, float], ...], ...] = ()
    # how many messages in turn each transfer's bytes go as (a ring's steps, as ASTRA-sim sends them:
    # each a new queue pair in ns-3); the DCQCN fluid model restarts its senders for each
    messages: int = 1
    # per path, the path whose message m must have arrived before this one sends message m + 1 (a
    # ring node forwards what its predecessor sent, as ASTRA-sim's ring does); -1: its own
    after: tuple[int, ...] = ()
    # per path, the rank that sends it (the member whose issue lets its first message go, under
    # ASTRA-sim's per-rank start; see `engine.static`); empty: unknown (the phase waits for every member)
    senders: tuple[int, ...] = ()
    # per path, the rank it delivers to (whose part of the collective ends with that path's last
    # message, under ASTRA-sim's rules); empty: unknown (every member ends with the phase)
    receivers: tuple[int, ...] = ()


class CommPlanner(Protocol):
    """The phase plans of one run's communication model, on its router's links."""

    router: Router

    def collective(self, members: tuple[int, ...], kind: str, size: int) -> tuple[PhasePlan, ...]: ...

    def transfer(self, src: int, dst: int, size: int) -> tuple[PhasePlan, ...]: ...

    # (algorithm, protocol) of a planned collective, or of a transfer (kind "p2p", members (src, dst))
    def choice(self, members: tuple[int, ...], kind: str, size: int) -> tuple[str, str] | None: ...
