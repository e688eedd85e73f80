"""trace.json: Chrome trace events with one track per rank and spans exactly as the backend gave them."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

from astra_hetero.results.model import Span
from astra_hetero.results.timeline import build_trace, write_timeline
from tests.results.builders import mixed_result

SPANS = (
    Span(rank=0, kind="compute", name="fwd mb0", start_ns=0, end_ns=10_500),
    Span(rank=0, kind="comm", name="tp all-reduce", start_ns=2_000, end_ns=7_250),
    Span(rank=0, kind="send", name="send act", start_ns=3_000, end_ns=9_001),  # overlaps the all-reduce
    Span(rank=2, kind="recv", name="recv act", start_ns=3_000, end_ns=9_001),
    Span(rank=2, kind="compute", name="fwd mb0", start_ns=9_001, end_ns=30_000),
    Span(rank=1, kind="compute", name="fwd mb0", start_ns=0, end_ns=10_500),
)


def slices(trace: dict) -> list[dict]:
    return [e for e in trace["traceEvents"] if e["ph"] == "X"]


def metadata(trace: dict, name: str) -> list[dict]:
    return [e for e in trace["traceEvents"] if e["ph"] == "M" and e["name"] == name]


def test_file_is_json_with_one_named_track_per_rank_sorted_by_rank(tmp_path) -> None:
    result = mixed_result()
    path = write_timeline(tmp_path / "trace.json", result, SPANS)
    trace = json.loads(path.read_text())
    names = metadata(trace, "process_name")
    assert [e["pid"] for e in names] == sorted(r.rank for r in result.ranks)
    assert names[2]["args"]["name"] == "rank 2 · a100-80 · stage 1 · replica 0"
    assert {e["pid"]: e["args"]["sort_index"] for e in metadata(trace, "process_sort_index")} == {
        r.rank: r.rank for r in result.ranks
    }
    assert [p.name for p in tmp_path.iterdir()] == ["trace.json"]


def test_span_times_are_microseconds_with_fractions_kept() -> None:
    events = slices(build_trace(mixed_result(), SPANS))
    by_key = {(e["pid"], e["name"]): e for e in events}
    for span in SPANS:
        event = by_key[(span.rank, span.name)]
        assert event["ts"] == pytest.approx(span.start_ns / 1000, abs=1e-12)
        assert event["dur"] == pytest.approx((span.end_ns - span.start_ns) / 1000, abs=1e-12)
        assert event["cat"] == span.kind
    assert len(events) == len(SPANS)
    assert by_key[(0, "send act")]["dur"] == 6.001


def test_slices_are_sorted_by_time_after_all_metadata() -> None:
    events = build_trace(mixed_result(), SPANS)["traceEvents"]
    phases = [e["ph"] for e in events]
    assert phases == sorted(phases, key=lambda ph: ph != "M")
    starts = [e["ts"] for e in events if e["ph"] == "X"]
    assert starts == sorted(starts)


def test_compute_and_comm_use_separate_threads_and_no_thread_has_overlaps() -> None:
    trace = build_trace(mixed_result(), SPANS)
    threads: dict[tuple[int, int], list[dict]] = defaultdict(list)
    for event in slices(trace):
        threads[(event["pid"], event["tid"])].append(event)
    for events in threads.values():
        assert len({e["cat"] == "compute" for e in events}) == 1
        for earlier, later in zip(events, events[1:], strict=False):
            assert earlier["ts"] + earlier["dur"] <= later["ts"]
    rank0_comm_threads = {tid for (pid, tid), ev in threads.items() if pid == 0 and ev[0]["cat"] != "compute"}
    assert len(rank0_comm_threads) == 2  # the send overlaps the all-reduce
    named = {(e["pid"], e["tid"]) for e in metadata(trace, "thread_name")}
    assert named == set(threads)


def test_without_spans_each_rank_gets_one_summary_span_to_its_finish() -> None:
    result = mixed_result()
    events = slices(build_trace(result, ()))
    assert sorted(e["pid"] for e in events) == [r.rank for r in result.ranks]
    for event in events:
        assert event["ts"] == 0
        assert event["dur"] == pytest.approx(result.ranks[event["pid"]].finish_us)


def test_span_on_a_rank_outside_the_result_is_refused() -> None:
    with pytest.raises(ValueError, match="rank 99"):
        build_trace(mixed_result(), [Span(rank=99, kind="compute", name="x", start_ns=0, end_ns=1)])


def test_span_ending_before_it_starts_is_refused() -> None:
    with pytest.raises(ValueError, match="ends .* before it starts"):
        build_trace(mixed_result(), [Span(rank=0, kind="comm", name="x", start_ns=5, end_ns=1)])
