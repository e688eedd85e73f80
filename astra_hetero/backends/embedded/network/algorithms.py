"""Collective algorithms as a plugin family: each turns a collective into phases of transfers.

A `Phase` is a set of concurrent (src, dst) rank transfers that move in lock step, each carrying
`bytes_fraction` × the collective's size, plus `steps` latency steps (each step pays the path
latency once). A ring all-reduce of S bytes over N ranks is one phase: N neighbour transfers of
2(N−1)/N·S bytes and 2(N−1) steps, which on links of bandwidth B takes 2(N−1)/N·S/B plus latencies
exactly as a step-by-step ring whose steps are all the same length. `size` is the trace's
`comm_size` with ASTRA-sim's meaning: the all-reduce input, the reduce-scatter input, and for an
all-gather each rank's *input* (the gathered output is N × size; measured on the real binary).

Reducing steps also stream their data through the GPU's memory: each of the N−1 reduce-scatter steps
reads two chunks and writes one. `reduce_fraction` × size is the data reduced per rank; the engine
charges 3 × that over the slowest member's memory bandwidth, in series with the transfer, which is how
ASTRA-sim charges it (its `local-mem-bw`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

ALL_REDUCE, REDUCE_SCATTER = "all_reduce", "reduce_scatter"
ALL_GATHER, ALL_TO_ALL = "all_gather", "all_to_all"
RING_KINDS = (ALL_REDUCE, REDUCE_SCATTER, ALL_GATHER)


@dataclass(frozen=True)
class Phase:
    pairs: tuple[tuple[int, int], ...]
    bytes_fraction: float
    steps: int
    reduce_fraction: float = 0.0


Algorithm = Callable[[str, Sequence[int], Sequence[int]], tuple[Phase, ...]]


def _ring_pairs(ring: Sequence[int]) -> list[tuple[int, int]]:
    n = len(ring)
    return [(ring[i], ring[(i + 1) % n]) for i in range(n)] if n > 1 else []


def _ring_phases(kind: str, rings: Sequence[Sequence[int]], scale: float = 1.0) -> tuple[Phase, ...]:
    """Concurrent equal-length rings; `scale` is the share of the buffer each ring reduces."""
    n = len(rings[0])
    if n < 2:
        return ()
    pairs = tuple(pair for ring in rings for pair in _ring_pairs(ring))
    reduced = (n - 1) / n * scale if kind in (ALL_REDUCE, REDUCE_SCATTER) else 0.0
    if kind == ALL_REDUCE:
        return (Phase(pairs, 2 * (n - 1) / n * scale, 2 * (n - 1), reduced),)
    return (Phase(pairs, (n - 1) / n * scale, n - 1, reduced),)


def ring(kind: str, members: Sequence[int], machines: Sequence[int]) -> tuple[Phase, ...]:
    """One ring over the members in rank order."""
    _check_ring_kind(kind)
    return _ring_phases(kind, [list(members)])


def hierarchical(kind: str, members: Sequence[int], machines: Sequence[int]) -> tuple[Phase, ...]:
    """NCCL-like: intra-machine reduce-scatter, inter-machine rings (one per local index) on 1/n of the
    data, intra-machine all-gather. Falls back to one ring when the group sits in one machine, has
    one member per machine, or has different member counts on different machines."""
    _check_ring_kind(kind)
    by_machine: dict[int, list[int]] = {}
    for rank in members:
        by_machine.setdefault(machines[rank], []).append(rank)
    locals_ = list(by_machine.values())
    n, k = len(locals_[0]), len(locals_)
    if k == 1 or n == 1 or any(len(local) != n for local in locals_):
        return ring(kind, members, machines)
    cross = [[local[i] for local in locals_] for i in range(n)]
    intra = _ring_phases(REDUCE_SCATTER, locals_)
    if kind == ALL_REDUCE:
        return intra + _ring_phases(ALL_REDUCE, cross, 1 / n) + intra
    if kind == REDUCE_SCATTER:
        return intra + _ring_phases(REDUCE_SCATTER, cross, 1 / n)
    return _ring_phases(ALL_GATHER, cross, 1 / n) + intra


def direct(kind: str, members: Sequence[int], machines: Sequence[int]) -> tuple[Phase, ...]:
    """All-to-all: every member sends 1/N of the buffer straight to every other member."""
    if kind != ALL_TO_ALL:
        raise ValueError(f"the direct algorithm runs all_to_all, not {kind}")
    n = len(members)
    pairs = tuple((a, b) for a in members for b in members if a != b)
    return (Phase(pairs, 1 / n, 1),) if pairs else ()


def _check_ring_kind(kind: str) -> None:
    if kind not in RING_KINDS:
        raise ValueError(f"ring algorithms run {', '.join(RING_KINDS)}, not {kind}")


ALGORITHMS: dict[str, Algorithm] = {"ring": ring, "hierarchical": hierarchical, "direct": direct}
SUPPORTED_KINDS = (*RING_KINDS, ALL_TO_ALL)


def algorithm(name: str) -> Algorithm:
    try:
        return ALGORITHMS[name]
    except KeyError:
        raise ValueError(f"unknown collective algorithm {name!r}; valid: {', '.join(ALGORITHMS)}") from None


def phases_for(
    algorithm_name: str, kind: str, members: Sequence[int], machines: Sequence[int]
) -> tuple[Phase, ...]:
    """The phases `kind` runs with: all-to-all is always direct, the rest use `algorithm_name`."""
    if kind == ALL_TO_ALL:
        return direct(kind, members, machines)
    phases = algorithm(algorithm_name)(kind, members, machines)
    if kind == ALL_GATHER:  # fractions above are of the gathered output, N × comm_size
        phases = tuple(
            Phase(p.pairs, p.bytes_fraction * len(members), p.steps, p.reduce_fraction * len(members))
            for p in phases
        )
    return phases
