"""`trace.json`: a run's timeline in the Chrome trace-event format that Perfetto and chrome://tracing open.

One process per rank (sorted by rank, named after its placement). Within a rank, compute and
communication go on separate threads, and spans that overlap in time are spread over extra lanes
("comm 2", ...) because trace viewers only draw properly nested slices on one thread.
Timestamps are microseconds with the fractional nanoseconds kept (ns / 1000).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from astra_hetero.results.model import RankResult, RunResult, Span
from astra_hetero.rundir import write_text_atomic
from astra_hetero.units import NS_PER_US, us_to_ns

# Span kinds drawn on the compute thread ("summary" stands in for a whole rank when there are no spans);
# every other kind ("comm", "send", "recv") is communication.
COMPUTE_KINDS = frozenset({"compute", "summary"})
# Thread ids: compute lanes count up from here, communication lanes from COMM_TID_BASE.
COMPUTE_TID_BASE = 1
COMM_TID_BASE = 1000


def write_timeline(path: Path, result: RunResult, spans: Sequence[Span], note: str = "") -> Path:
    """Write the timeline of `result` to `path` atomically; without spans, one summary span per rank."""
    trace = build_trace(result, spans)
    if note:
        trace["otherData"]["note"] = note
    write_text_atomic(Path(path), json.dumps(trace, separators=(",", ":")) + "\n")
    return Path(path)


def build_trace(result: RunResult, spans: Sequence[Span]) -> dict[str, Any]:
    """The trace-event document for `result`: metadata events first, then spans sorted by time."""
    ranks = {r.rank: r for r in result.ranks}
    _check_spans(spans, ranks)
    chosen = list(spans) if spans else summary_spans(result)
    threads = _assign_lanes(chosen)
    events = [_slice_event(span, thread) for span, thread in zip(chosen, threads, strict=True)]
    events.sort(key=lambda e: (e["ts"], e["pid"], e["tid"], -e["dur"]))
    return {
        "traceEvents": _metadata_events(ranks, set(threads)) + events + _dynamics_events(result),
        "displayTimeUnit": "ns",
        "otherData": {
            "backend": result.backend,
            "iteration_time_us": result.iteration_time_us,
            "num_ranks": result.num_ranks,
            "span_source": "backend" if spans else "summary (the backend gave no spans)",
        },
    }


def summary_spans(result: RunResult) -> list[Span]:
    """One span per rank from 0 to its finish time, for backends that report no timeline."""
    return [
        Span(
            rank=r.rank, kind="summary", name="iteration (summary)", start_ns=0, end_ns=us_to_ns(r.finish_us)
        )
        for r in result.ranks
    ]


def track_name(rank: RankResult) -> str:
    if rank.stage is None:
        return f"rank {rank.rank} · {rank.gpu} · idle"
    return f"rank {rank.rank} · {rank.gpu} · stage {rank.stage} · replica {rank.replica}"


def _check_spans(spans: Sequence[Span], ranks: dict[int, RankResult]) -> None:
    for span in spans:
        if span.rank not in ranks:
            raise ValueError(f"span {span.name!r}: rank {span.rank} is not in the result")
        if span.end_ns < span.start_ns:
            raise ValueError(
                f"span {span.name!r} on rank {span.rank}: ends ({span.end_ns} ns) "
                f"before it starts ({span.start_ns} ns)"
            )


def _assign_lanes(spans: Sequence[Span]) -> list[tuple[int, int]]:
    """(pid, tid) per span, such that spans sharing a thread never overlap.

    Greedy interval partitioning per (rank, compute|comm), in start order: a span takes the first
    lane that is free at its start, so a rank gets as many lanes as its deepest overlap.
    """
    order = sorted(range(len(spans)), key=lambda i: (spans[i].start_ns, spans[i].end_ns, i))
    lane_ends: dict[tuple[int, bool], list[int]] = defaultdict(list)
    threads: list[tuple[int, int]] = [(0, 0)] * len(spans)
    for i in order:
        span = spans[i]
        is_compute = span.kind in COMPUTE_KINDS
        ends = lane_ends[(span.rank, is_compute)]
        lane = next((k for k, end in enumerate(ends) if end <= span.start_ns), len(ends))
        if lane == len(ends):
            ends.append(span.end_ns)
        else:
            ends[lane] = span.end_ns
        threads[i] = (span.rank, (COMPUTE_TID_BASE if is_compute else COMM_TID_BASE) + lane)
    return threads


def _slice_event(span: Span, thread: tuple[int, int]) -> dict[str, Any]:
    event = {
        "name": span.name,
        "cat": span.kind,
        "ph": "X",
        "pid": thread[0],
        "tid": thread[1],
        "ts": span.start_ns / NS_PER_US,
        "dur": (span.end_ns - span.start_ns) / NS_PER_US,
    }
    if span.args:
        event["args"] = dict(span.args)  # Perfetto lists these under the selected slice
    return event


def _thread_name(tid: int) -> str:
    if tid >= COMM_TID_BASE:
        lane = tid - COMM_TID_BASE
        return "communication" if lane == 0 else f"communication {lane + 1}"
    lane = tid - COMPUTE_TID_BASE
    return "compute" if lane == 0 else f"compute {lane + 1}"


def _metadata_events(ranks: dict[int, RankResult], threads: set[tuple[int, int]]) -> list[dict[str, Any]]:
    """Process names and sort order for every rank (even one without spans), thread names per lane."""
    events: list[dict[str, Any]] = []
    for rank in sorted(ranks):
        events.append(
            {
                "name": "process_name",
                "ph": "M",
                "pid": rank,
                "tid": 0,
                "args": {"name": track_name(ranks[rank])},
            }
        )
        events.append(
            {"name": "process_sort_index", "ph": "M", "pid": rank, "tid": 0, "args": {"sort_index": rank}}
        )
    for pid, tid in sorted(threads):
        events.append(
            {"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": _thread_name(tid)}}
        )
        events.append(
            {"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid, "args": {"sort_index": tid}}
        )
    return events


def _dynamics_events(result: RunResult) -> list[dict[str, Any]]:
    """The run's dynamics events on a track of their own (after the ranks): a slice from each event's
    start to its end (or the end of the run) and an instant mark across every track at its start."""
    if not result.events:
        return []
    pid = max((r.rank for r in result.ranks), default=-1) + 1
    run_end_us = result.iteration_time_us * max(1, len(result.iterations))
    out: list[dict[str, Any]] = [
        {"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": "dynamics events"}},
        {"name": "process_sort_index", "ph": "M", "pid": pid, "tid": 0, "args": {"sort_index": pid}},
    ]
    for e in result.events:
        name = f"dynamics[{e['index']}] {e['event']}"
        start = e["start_us"]
        end = e["end_us"] if e["end_us"] is not None else max(run_end_us, start)
        args = {"ranks": e["ranks"], "links": e["links"]}
        out.append(
            {
                "name": name,
                "cat": "dynamics",
                "ph": "X",
                "ts": start,
                "dur": end - start,
                "pid": pid,
                "tid": e["index"],
                "args": args,
            }
        )
        out.append(
            {"name": name, "cat": "dynamics", "ph": "i", "s": "g", "ts": start, "pid": pid, "tid": e["index"]}
        )
    return out
