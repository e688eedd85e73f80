"""The machine-readable run summary that `run --json` prints: the same figures as the text summary
(what was simulated, throughput, memory, per-stage and per-GPU-type times, iterations and events),
as one JSON object for scripts, with the paths of the files the run wrote."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from astra_hetero.results.compare import summarize
from astra_hetero.results.facts import RunFacts
from astra_hetero.results.model import RESULT_FORMAT, RunResult

RUN_SUMMARY_FORMAT = "astra-hetero/run-summary@1"


def run_document(
    result: RunResult, run_dir: Path, facts: RunFacts, files: dict[str, Path | None]
) -> dict[str, Any]:
    summary = summarize([(Path(run_dir).name, result)])[0].to_json()
    summary.pop("ratio_to_first", None)  # one run: nothing to compare with
    return {
        "format": RUN_SUMMARY_FORMAT,
        "result_format": RESULT_FORMAT,
        "run_dir": str(run_dir),
        **summary,
        "simulated": facts.to_json(),
        "iterations": [dict(i) for i in result.iterations],
        "events": [dict(e) for e in result.events],
        "files": {name: None if path is None else str(path) for name, path in files.items()},
    }
