"""Read `nccl-tests` output (all_reduce_perf and friends) into a per-size table of measured times.

nccl-tests prints one row per message size under a header such as (shortened here)

    #  size    count   type  redop  root   time  algbw  busbw #wrong   time  algbw  busbw #wrong
    #   (B) (elements)                     (us) (GB/s) (GB/s)          (us) (GB/s) (GB/s)
    1048576   262144  float    sum    -1  203.2   5.16   9.68      0  207.2   5.06   9.49      0

with out-of-place then in-place columns. What people actually have is read as well:
- older releases: no `root` (or no `redop`) column, `error` instead of `#wrong`, rank lines without
  `Group` (`#   Rank  0 Pid 1234 on host device 0 [0x1a] ...`), the first releases' `bytes`/`N` header;
- `-c 0` (N/A in #wrong), launcher echo, NCCL INFO and warning lines anywhere;
- a launcher's prefix on every line: `[1,0]<stdout>:` (mpirun --tag-output), `0: ` (srun --label),
  `host: ` (pdsh). The prefix in front of the column header marks the process that printed the table;
  lines with another prefix (other ranks' NCCL INFO output) are left out.
Columns are found by the header's names. The table keeps, per size, the *better* (smaller) of the
out-of-place and in-place times: they move the same bytes, and the slower placement carries the extra
copy or the worse buffer alignment a training framework does not pay (in-place collectives are the
norm in Megatron's gradient and TP buffers); `placement` says which one that was (`out-of-place`,
`in-place`, or `mixed: ...` with how many sizes each won). It also keeps the run's bus-bandwidth
factor busbw / algbw (doc/PERFORMANCE.md: 2(n-1)/n for all-reduce, (n-1)/n for all-gather, reduce-scatter
and all-to-all, 1 for send/recv), so that its bus bandwidth carries over to communicators of another
size, and the ranks and hosts listed under "Using devices", which pick the closest of several tables
of one scope.
`size` is nccl-tests' size: the whole buffer (the all-gather output, the reduce-scatter input).

Between measured sizes the time is interpolated linearly (a collective's time is latency + size /
bandwidth, affine between neighbours); below the smallest size it stays at the smallest size's time
(latency-bound); above the largest it grows at the largest size's bandwidth.
"""

from __future__ import annotations

import bisect
import math
import re
from dataclasses import dataclass
from pathlib import Path

# nccl-tests binary stem -> the collective it measures, as the simulator names it
SUPPORTED = {
    "all_reduce": "all_reduce",
    "all_gather": "all_gather",
    "reduce_scatter": "reduce_scatter",
    "alltoall": "all_to_all",
    "sendrecv": "send_recv",
}
COLLECTIVES = tuple(SUPPORTED.values())
_BINARY = re.compile(r"\b([a-z_]+?)_perf(?:_mpi)?\b")
_STARTING = re.compile(r"Collective test starting:\s*([a-z_]+?)_perf", re.IGNORECASE)
_RANK_LINE = re.compile(r"^#\s+Rank\s+(\d+)\b.*?\bon\s+(\S+)\s+device\b", re.IGNORECASE)
_SIZE_NAMES = ("size", "bytes")  # "bytes" in the first releases' header


class NcclTestsError(ValueError):
    """The text is not nccl-tests output this reader can use; the message says why."""


@dataclass(frozen=True)
class MeasuredTable:
    collective: str  # one of COLLECTIVES
    sizes: tuple[int, ...]  # bytes, ascending
    times_us: tuple[float, ...]
    bus_factor: float  # busbw / algbw of the measured run
    num_ranks: int | None  # ranks listed under "Using devices", when printed
    num_nodes: int | None = None  # distinct hosts among them
    placement: str = "out-of-place"  # the columns whose times were kept (the better, per size)

    def time_us(self, size: float) -> float:
        sizes, times = self.sizes, self.times_us
        if size <= sizes[0]:
            return times[0]
        if size >= sizes[-1]:
            return times[-1] * size / sizes[-1] if sizes[-1] else times[-1]
        upper = bisect.bisect_right(sizes, size)
        s0, s1, t0, t1 = sizes[upper - 1], sizes[upper], times[upper - 1], times[upper]
        return t0 + (t1 - t0) * (size - s0) / (s1 - s0)

    def busbw_gbs(self, size: float) -> float:
        """Bus bandwidth at `size` bytes (interpolated), GB/s."""
        return self.bus_factor * size / (1000.0 * self.time_us(size))


def collective_of(text: str, filename: str = "") -> str | None:
    """The nccl-tests binary named in the output (or, failing that, in the file name), as a collective."""
    names = [m.group(1).lower() for m in _STARTING.finditer(text)]
    if not names:
        names = [m.group(1) for m in _BINARY.finditer(text.lower())]
    if not names:
        stem = Path(filename).name.lower()
        names = [key for key in sorted(SUPPORTED, key=len, reverse=True) if key in stem][:1]
    distinct = sorted(set(names))
    if len(distinct) > 1:
        raise NcclTestsError(f"the output names several tests ({', '.join(distinct)}); give one per file")
    if not distinct:
        return None
    if distinct[0] not in SUPPORTED:
        raise NcclTestsError(
            f"{distinct[0]}_perf is not used by the simulator; supported: "
            f"{', '.join(k + '_perf' for k in SUPPORTED)}"
        )
    return SUPPORTED[distinct[0]]


def parse_nccl_tests(text: str, filename: str = "", collective: str | None = None) -> MeasuredTable:
    """The table in one nccl-tests output. `collective` names what it measured where the output and the
    file name do not; where they do, it must agree with them."""
    if collective is not None and collective not in COLLECTIVES:
        raise NcclTestsError(f"unknown collective {collective!r}; known: {', '.join(COLLECTIVES)}")
    named = collective_of(text, filename)
    if collective is not None and named is not None and named != collective:
        raise NcclTestsError(f"the output measured {named} but the spec says collective: {collective}")
    found = collective or named
    if found is None:
        raise NcclTestsError(
            "cannot tell which collective was measured (no '<name>_perf' in the output or the file "
            "name); say it with `collective:`"
        )
    lines = _own_lines(text.splitlines())
    header: list[str] | None = None
    rows: dict[int, tuple[float, float, float]] = {}
    winners: dict[int, str] = {}
    for number, line in lines:
        tokens = line.split()
        if not tokens:
            continue
        if tokens[0].startswith("#"):
            names = _header_names(line)
            if header is None and names is not None:
                header = names
            continue
        if header is None or not tokens[0].isdigit():
            continue  # launcher echo, NCCL INFO lines, warnings
        size, row, winner = _row(tokens, header, number)
        if size in rows:
            raise NcclTestsError(f"line {number}: size {size} appears twice; give one run, one datatype")
        rows[size], winners[size] = row, winner
    if header is None:
        raise NcclTestsError("no nccl-tests header line ('#  size  count  type ... busbw')")
    if not rows:
        raise NcclTestsError("no result rows under the header")
    sizes = sorted(rows)
    largest = rows[sizes[-1]]
    if largest[1] <= 0:
        raise NcclTestsError(f"algbw is 0 at the largest size {sizes[-1]}; cannot derive the bus factor")
    if not 0 < largest[2] / largest[1] <= 2:  # nccl-tests' factors: 2(n-1)/n (all-reduce) or below
        raise NcclTestsError(
            f"busbw / algbw at the largest size {sizes[-1]} is {largest[2] / largest[1]:.3g}; nccl-tests "
            "prints a bus factor in (0, 2] (all-reduce 2(n-1)/n, gathers (n-1)/n, broadcast 1)"
        )
    hosts = {}
    for _, line in lines:
        match = _RANK_LINE.match(line.strip())
        if match:
            hosts[int(match.group(1))] = match.group(2)
    return MeasuredTable(
        found,
        tuple(sizes),
        tuple(rows[s][0] for s in sizes),
        largest[2] / largest[1],
        len(hosts) or None,
        len(set(hosts.values())) or None,
        _placement(list(winners.values())),
    )


def _placement(winners: list[str]) -> str:
    """Which columns the kept times came from: one placement, or how many sizes each won."""
    kinds = sorted(set(winners))
    if len(kinds) == 1:
        return kinds[0]
    counts = {kind: winners.count(kind) for kind in ("out-of-place", "in-place")}
    return (
        f"mixed: out-of-place at {counts['out-of-place']} of {len(winners)} sizes, "
        f"in-place at {counts['in-place']}"
    )


def _header_names(line: str) -> list[str] | None:
    names = line.strip().lstrip("#").split()
    has_size = any(n in _SIZE_NAMES for n in names)
    return ["size" if n in _SIZE_NAMES else n for n in names] if has_size and "busbw" in names else None


def _own_lines(lines: list[str]) -> list[tuple[int, str]]:
    """(line number, text) of the process that printed the table, its launcher prefix removed: the
    text in front of the column header's '#' is the prefix; lines without it belong to other
    processes. Without a prefix every line is kept."""
    numbered = list(enumerate(lines, start=1))
    for _, line in numbered:
        at = line.find("#")
        if at > 0 and line[:at].strip() and _header_names(line[at:]) is not None:
            prefix = line[:at].rstrip()
            return [(n, text[len(prefix) :]) for n, text in numbered if text.startswith(prefix)]
    return numbered


MAX_TIME_US = 86_400e6  # a day: no collective nccl-tests times takes longer; 1e308 would overflow the model
MAX_GBS = 1e6  # GB/s: 500x NVLink 5's 1.8 TB/s per GPU (NVIDIA's Blackwell datasheet): no measurement


def _row(tokens: list[str], header: list[str], number: int) -> tuple[int, tuple[float, float, float], str]:
    """(size, (best time us, mean algbw, mean busbw), the placement of the best time) of one result row:
    nccl-tests prints out-of-place first, then in-place; a single time column is out-of-place."""
    if len(tokens) < len(header):
        raise NcclTestsError(f"line {number}: {len(tokens)} columns, the header names {len(header)}")
    columns: dict[str, list[float]] = {"time": [], "algbw": [], "busbw": []}
    times: list[tuple[float, str]] = []  # (time, placement): the first time column is out-of-place
    seen_times = 0
    for name, value in zip(header, tokens, strict=False):
        key = "time" if name in ("time", "cputime") else name
        if key == "time":
            seen_times += 1
        if key in columns:
            try:
                value_ = float(value)
            except ValueError:
                continue  # "N/A" and the like: the other placement still counts
            if (
                not math.isfinite(value_)
                or value_ < 0
                or value_ > (MAX_TIME_US if key == "time" else MAX_GBS)
            ):
                raise NcclTestsError(
                    f"line {number}: {name} {value!r} is not a measurement (finite, >= 0; a time at most "
                    f"{MAX_TIME_US:.0e} us, a day; a bandwidth at most {MAX_GBS:.0e} GB/s)"
                )
            columns[key].append(value_)
            if key == "time":
                times.append((columns[key][-1], "out-of-place" if seen_times == 1 else "in-place"))
    if not all(columns.values()):
        raise NcclTestsError(f"line {number}: no numeric time, algbw or busbw")
    time_us, placement = min(times, key=lambda entry: entry[0])
    algbw, busbw = (sum(v) / len(v) for v in (columns["algbw"], columns["busbw"]))
    if time_us <= 0:
        raise NcclTestsError(f"line {number}: time must be positive, got {time_us}")
    return int(tokens[header.index("size")]), (time_us, algbw, busbw), placement
