"""The embedded backend: simulate a run directory in-process and return a `RunOutput`."""

from __future__ import annotations

import gc
import time
from pathlib import Path
from typing import Any

from astra_hetero.backends.embedded.engine import Engine, EngineOutcome
from astra_hetero.backends.embedded.rundir_reader import SimInput, read_run_dir
from astra_hetero.backends.embedded.tracefile import KIND_COLL, KIND_COMP, KIND_SEND
from astra_hetero.results.model import CollectiveStat, RankResult, RunOutput, RunResult, Span

_SPAN_KINDS = {KIND_COMP: "compute", KIND_COLL: "comm", KIND_SEND: "send"}


class EmbeddedBackend:
    """Options: `timeline` (default True) returns one span per node for trace.json; `workers` sets the
    processes that decode traces (default: up to 2). Options meant for other backends (binary,
    timeout_s, ...) are accepted and ignored so that callers can pass one option set to any backend."""

    name = "embedded"

    def __init__(self, timeline: bool = True, workers: int | None = None, **_ignored: Any) -> None:
        self.timeline = timeline
        self.workers = workers

    def run(self, run_dir: Path) -> RunOutput:
        started = time.perf_counter()
        # The engine allocates millions of long-lived small objects; generational collection of them
        # would rescan all of them over and over and finds no cycles worth the cost.
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            sim = read_run_dir(Path(run_dir), self.workers)
            outcome = Engine(sim).run()
            output = self._output(sim, outcome, time.perf_counter() - started)
        finally:
            if gc_was_enabled:
                gc.enable()
        return output

    def _output(self, sim: SimInput, outcome: EngineOutcome, wall_s: float) -> RunOutput:
        iteration_ns = max(outcome.finish_ns, default=0)
        ranks = tuple(_rank_result(sim, rank, outcome, iteration_ns) for rank in range(sim.num_ranks))
        stats = tuple(
            CollectiveStat(
                group=c.group,
                type=c.kind,
                bytes=c.size,
                start_us=c.start_ns / 1000,
                end_us=c.end_ns / 1000,
                name=outcome.workload.name(c.nodes[0]),
                num_ranks=len(c.nodes) + (1 if c.recv >= 0 else 0),
            )
            for c in sorted(outcome.comms, key=lambda c: (c.start_ns, c.nodes[0]))
        )
        result = RunResult(
            backend=self.name,
            iteration_time_us=iteration_ns / 1000,
            ranks=ranks,
            collectives=stats,
            wall_time_s=round(wall_s, 3),
            meta={
                "collective_algorithm": sim.algorithm,
                "num_nodes": len(outcome.workload.kinds),
                "num_events": outcome.num_events,
                "num_rate_recomputes": outcome.num_recomputes,
                "network": "max-min fair flows on ns3/topology.txt",
                "link_model": sim.link_model,
            },
        )
        return RunOutput(result, _spans(outcome) if self.timeline else ())


def _rank_result(sim: SimInput, rank: int, outcome: EngineOutcome, iteration_ns: int) -> RankResult:
    label = sim.labels[rank] if rank < len(sim.labels) else {}
    compute, exposed = outcome.compute_ns[rank], outcome.exposed_ns[rank]
    return RankResult(
        rank=rank,
        gpu=str(label.get("gpu", "npu")),
        stage=int(label.get("stage", 0)),
        replica=int(label.get("replica", 0)),
        finish_us=outcome.finish_ns[rank] / 1000,
        compute_us=compute / 1000,
        exposed_comm_us=exposed / 1000,
        idle_us=(iteration_ns - compute - exposed) / 1000,
        node=int(label.get("node", sim.machines[rank])),
        tp_index=label.get("tp_index"),
    )


def _spans(outcome: EngineOutcome) -> tuple[Span, ...]:
    w = outcome.workload
    starts, ends, kinds = outcome.start_ns, outcome.end_ns, w.kinds
    spans = []
    for rank, (trace, base) in enumerate(zip(w.traces, w.offsets, strict=True)):
        for g, name in enumerate(trace.all_names(), base):  # names decoded a rank at a time
            if starts[g] >= 0:
                spans.append(Span(rank, _SPAN_KINDS.get(kinds[g], "recv"), name, starts[g], ends[g]))
    return tuple(spans)
