"""How well a simulated iteration uses the hardware: tokens/s, model TFLOP/s per GPU and MFU.

The figures come from what the generator records in manifest.json (`throughput`: the model FLOPs
and tokens of one iteration, and every GPU type's count and dense peak; see
workload/model_flops.py) and the iteration time a backend returns, so every backend's result states
them. Where the manifest cannot (a run directory written by another tool or by an older version,
or a cut-down iteration), the result leaves them out and says why in a warning: never a guess.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from astra_hetero.errors import RunDirError
from astra_hetero.results.model import RunResult

NO_THROUGHPUT = "no throughput figures (tokens/s, TFLOP/s per GPU, MFU): "
_MISSING = "manifest.json does not record the model's FLOPs (written by another tool or an older version)"


def with_throughput(result: RunResult, manifest: dict[str, Any], where: str = "manifest.json") -> RunResult:
    """`result` with its `throughput` figures, or with a warning saying why there are none."""
    record = manifest.get("throughput")
    if record is None:
        return _without(result, _MISSING)
    if not isinstance(record, dict):
        raise RunDirError(f"{where}: throughput must be an object")
    if "unavailable" in record:
        return _without(result, str(record["unavailable"]))
    figures = throughput_figures(_checked(record, where), result.iteration_time_us)
    if figures is None:
        return _without(result, "the iteration took no time")
    return dataclasses.replace(result, throughput=figures)


def throughput_figures(record: dict[str, Any], iteration_time_us: float) -> dict[str, Any] | None:
    if iteration_time_us <= 0:
        return None
    seconds = iteration_time_us / 1e6
    gpus = record["gpus"].values()
    num_gpus = sum(int(g["count"]) for g in gpus)
    peak_tflops = sum(int(g["count"]) * float(g["peak_tflops"]) for g in gpus)
    flops = float(record["model_flops_per_iteration"])
    return {
        "tokens_per_s": record["tokens_per_iteration"] / seconds,
        "model_tflops_per_gpu": flops / seconds / num_gpus / 1e12,
        "mfu": flops / seconds / (peak_tflops * 1e12),
        "model_flops_per_iteration": flops,
        "tokens_per_iteration": record["tokens_per_iteration"],
        "num_gpus": num_gpus,
        "peak_tflops": peak_tflops,
        "compute_precision": record.get("compute_precision", "bf16"),
        "formula": record.get("formula", ""),
    }


def _checked(record: dict[str, Any], where: str) -> dict[str, Any]:
    def positive(value: Any, field: str) -> None:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        if not ok or not math.isfinite(value) or value <= 0:
            raise RunDirError(f"{where}: throughput.{field} must be a positive number, got {value!r}")

    for text in ("formula", "compute_precision"):  # copied into the result and printed as they are
        if not isinstance(record.get(text, ""), str):
            raise RunDirError(f"{where}: throughput.{text} must be text, got {record[text]!r}")
    positive(record.get("model_flops_per_iteration"), "model_flops_per_iteration")
    positive(record.get("tokens_per_iteration"), "tokens_per_iteration")
    gpus = record.get("gpus")
    if not isinstance(gpus, dict) or not gpus:
        raise RunDirError(f"{where}: throughput.gpus must map each GPU label to its count and peak")
    for label, entry in gpus.items():
        if not isinstance(entry, dict):
            raise RunDirError(f"{where}: throughput.gpus.{label} must be an object")
        positive(entry.get("count"), f"gpus.{label}.count")
        positive(entry.get("peak_tflops"), f"gpus.{label}.peak_tflops")
    return record


def _without(result: RunResult, reason: str) -> RunResult:
    return dataclasses.replace(result, warnings=(*result.warnings, NO_THROUGHPUT + reason))


SHOWN = ("tokens_per_s", "model_tflops_per_gpu", "mfu")  # what reports print of a result's figures


def figures_problem(figures: Any) -> str:
    """What is wrong with a result.json's `throughput` as read back (None: no figures), or ''."""
    if figures is None:
        return ""
    if not isinstance(figures, dict):  # the result schema reads it as an object already
        return "throughput must be an object or null"
    for name in SHOWN:
        value = figures.get(name)
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if not number or not math.isfinite(value) or value < 0:
            return f"throughput.{name} must be a finite number >= 0, got {value!r}"
    if not isinstance(figures.get("compute_precision"), str):
        return "throughput.compute_precision must be a string"
    return ""


def throughput_line(result: RunResult) -> str:
    """One line for a run summary, or '' when the result has no figures."""
    t = result.throughput
    if not t:
        return ""
    return (
        f"throughput: {t['tokens_per_s']:,.0f} tokens/s, {t['model_tflops_per_gpu']:.1f} model TFLOP/s "
        f"per GPU, MFU {100 * t['mfu']:.1f} % of the dense {t['compute_precision'].upper()} peak"
    )
