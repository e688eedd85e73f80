"""`dynamics.json` of a run directory, validated into plain records for the engine.

The file holds the spec's `dynamics:` already resolved to ranks and topology.txt link lines (see
`astra_hetero.dynamics.selection`) and the number of iterations. A directory without it is static:
one iteration, no events.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from astra_hetero import rundir
from astra_hetero.dynamics.events import MAX_FACTOR, MAX_GBPS, MAX_SIGMA, SLOWEST
from astra_hetero.errors import RunDirError

MAX_NS = 10**15  # the spec bounds times to 1e9 ms

KINDS = ("link_rate", "device_slowdown", "background_traffic", "jitter")
NETWORK_KINDS = ("link_rate", "background_traffic")


@dataclass(frozen=True)
class TimedEvent:
    index: int  # position in the spec's `dynamics:` list
    event: str
    start_ns: int
    end_ns: int | None  # None: to the end of the run
    ranks: tuple[int, ...]
    links: tuple[int, ...] = ()  # topology.txt link lines (link_rate)
    factor: float = 1.0
    gbps: float = 0.0
    src_rank: int = -1
    dst_rank: int = -1
    sigma: float = 0.0
    seed: int = 0

    def active(self, now: int) -> bool:
        return self.start_ns <= now and (self.end_ns is None or now < self.end_ns)


@dataclass(frozen=True)
class Dynamics:
    iterations: int = 1
    events: tuple[TimedEvent, ...] = field(default_factory=tuple)

    def of_kind(self, *kinds: str) -> list[TimedEvent]:
        return [e for e in self.events if e.event in kinds]


def read_dynamics(root: Path, num_ranks: int, num_lines: int) -> Dynamics:
    path = Path(root) / rundir.DYNAMICS
    if not path.is_file():
        return Dynamics()
    data = rundir.read_json_object(path, "")
    where = str(path)
    iterations = data.get("iterations", 1)
    if not isinstance(iterations, int) or isinstance(iterations, bool) or not 1 <= iterations <= 100_000:
        raise RunDirError(f"{where}: iterations must be an integer in 1..100000, not {iterations!r}")
    raw = data.get("events", [])
    if not isinstance(raw, list):
        raise RunDirError(f"{where}: events must be a list")
    events = tuple(_event(e, f"{where}: events[{i}]", num_ranks, num_lines) for i, e in enumerate(raw))
    return Dynamics(iterations, events)


def _event(data: Any, where: str, num_ranks: int, num_lines: int) -> TimedEvent:
    if not isinstance(data, dict) or data.get("event") not in KINDS:
        raise RunDirError(f"{where}: expected an object with event one of {', '.join(KINDS)}")
    try:
        start, end = int(data["start_ns"]), data.get("end_ns")
        end = None if end is None else int(end)
        ranks = tuple(int(r) for r in data.get("ranks", ()))
        links = tuple(int(k) for k in data.get("links", ()))
        event = TimedEvent(
            int(data.get("index", 0)),
            data["event"],
            start,
            end,
            ranks,
            links,
            float(data.get("factor", 1.0)),
            float(data.get("gbps", 0.0)),
            int(data.get("src_rank", -1)),
            int(data.get("dst_rank", -1)),
            float(data.get("sigma", 0.0)),
            int(data.get("seed", 0)),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise RunDirError(f"{where}: malformed event ({exc})") from None
    if start < 0 or (end is not None and end <= start):
        raise RunDirError(f"{where}: needs 0 <= start_ns < end_ns")
    if any(not 0 <= r < num_ranks for r in ranks) or any(not 0 <= k < num_lines for k in links):
        raise RunDirError(
            f"{where}: a rank or link line outside the run directory's {num_ranks} ranks, {num_lines} links"
        )
    # the bounds the spec enforces (`dynamics.events`), for directories written by hand
    if not (event.factor == 0 or SLOWEST <= event.factor <= MAX_FACTOR) or (
        event.event == "device_slowdown" and event.factor == 0
    ):
        raise RunDirError(
            f"{where}: factor {event.factor} out of range (0 for links down, else {SLOWEST:g}..)"
        )
    if not 0 <= event.sigma <= MAX_SIGMA:
        raise RunDirError(f"{where}: sigma {event.sigma} outside 0..{MAX_SIGMA:g}")
    if end is not None and end > MAX_NS or start > MAX_NS:
        raise RunDirError(f"{where}: start_ns and end_ns must be at most {MAX_NS:.0e}")
    if event.event == "background_traffic" and not (
        0 < event.gbps <= MAX_GBPS and 0 <= event.src_rank < num_ranks and 0 <= event.dst_rank < num_ranks
    ):
        raise RunDirError(f"{where}: background_traffic needs gbps > 0 and src_rank, dst_rank")
    if event.event == "link_rate" and not links:
        raise RunDirError(f"{where}: link_rate selects no link")
    return event
