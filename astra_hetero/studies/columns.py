"""The columns of a study's results table: what each metric is, in which unit, and how it is read
from a point's result."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from astra_hetero.results.model import RunResult
from astra_hetero.results.report import time_unit
from astra_hetero.sweep.run import result_metrics as sweep_metrics

# Units: "us" (microseconds, shown in µs/ms/s as the values need), "s", "%", "x" (a ratio), "" (count).
UNIT_SUFFIX = {"s": " (s)", "%": " (%)", "x": " (×)", "": ""}


@dataclass(frozen=True)
class Column:
    name: str
    label: str  # what it is, in words, for axis labels and table headers
    unit: str
    sign: str = ""  # for a difference, what its sign says ("+ = longer, − = shorter")


METRICS: tuple[Column, ...] = (
    Column("iteration_time_us", "iteration time", "us"),
    Column("mean_compute_us", "compute, mean per rank", "us"),
    Column("max_compute_us", "compute, busiest rank", "us"),
    Column("mean_exposed_comm_us", "exposed communication, mean per rank", "us"),
    Column("max_exposed_comm_us", "exposed communication, most of any rank", "us"),
    Column("mean_idle_us", "idle (bubbles, waiting), mean per rank", "us"),
    Column("max_idle_us", "idle (bubbles, waiting), most of any rank", "us"),
    Column("num_ranks", "ranks", ""),
    Column("num_layers_simulated", "transformer layers simulated", ""),
    # the plan the point ran (its manifest): what a `plan` transform chose, for one
    Column("plan_tp", "tensor-parallel degree", ""),
    Column("plan_pp", "pipeline stages", ""),
    Column("plan_dp", "data-parallel replicas", ""),
    Column("plan_micro_batch_size", "sequences per micro-batch", ""),
    Column("plan_virtual_stages", "virtual stages per pipeline rank (interleaving)", ""),
    Column("gpus_used", "GPUs that run the plan", ""),
    Column("tokens_per_s", "training throughput", "tokens/s"),
    Column("wall_time_s", "simulator wall time", "s"),
    # ns-3 points only (backends/astrasim/ns3_outputs.py)
    Column("ns3_flows", "ns-3 flows (messages)", ""),
    Column("ns3_fct_slowdown_mean", "ns-3 flow completion over standalone time, byte-weighted mean", "x"),
    Column("ns3_fct_slowdown_p99", "ns-3 flow completion over standalone time, 99th percentile", "x"),
    Column("ns3_pfc_pauses", "ns-3 PFC pause frames", ""),
    # points stopped at their budget (status "partial"; backends/astrasim/partial.py)
    Column("partial_ranks_finished", "ranks finished before the budget ran out", ""),
    Column(
        "partial_simulated_us", "simulated time reached before the budget ran out (last ns-3 flow done)", "us"
    ),
)
METRIC_NAMES = tuple(c.name for c in METRICS)


def job_columns(names: Sequence[str]) -> tuple[Column, ...]:
    """Per job of a shared cluster (`jobs:`): its own iteration time beside the others and alone, the
    slowdown, and the plan it ran — columns `job_<name>_...`."""
    columns = []
    for name in names:
        columns += [
            Column(f"job_{name}_iteration_time_us", f"job {name}: iteration time beside the others", "us"),
            Column(f"job_{name}_alone_us", f"job {name}: iteration time alone on the same GPUs", "us"),
            Column(f"job_{name}_slowdown", f"job {name}: slowdown beside the others", "x"),
            Column(f"job_{name}_tp", f"job {name}: tensor-parallel degree", ""),
            Column(f"job_{name}_pp", f"job {name}: pipeline stages", ""),
            Column(f"job_{name}_dp", f"job {name}: data-parallel replicas", ""),
        ]
    return tuple(columns)


def job_metrics(result: RunResult, manifest: dict[str, Any]) -> dict[str, float]:
    """The `job_<name>_...` values of a run of several jobs (none for a run of one)."""
    metrics: dict[str, float] = {}
    for job in result.jobs:
        name = job["name"]
        metrics[f"job_{name}_iteration_time_us"] = job["iteration_time_us"]
        if job.get("solo_iteration_time_us") is not None:
            metrics[f"job_{name}_alone_us"] = job["solo_iteration_time_us"]
        if job.get("slowdown") is not None:
            metrics[f"job_{name}_slowdown"] = job["slowdown"]
    for entry in manifest.get("jobs", []) if isinstance(manifest.get("jobs"), list) else []:
        parallelism = entry.get("parallelism") if isinstance(entry, dict) else None
        if isinstance(parallelism, dict):
            for key in ("tp", "pp", "dp"):
                if isinstance(parallelism.get(key), int):
                    metrics[f"job_{entry['name']}_{key}"] = parallelism[key]
    return metrics


def result_metrics(result: RunResult, manifest: dict[str, Any] | None = None) -> dict[str, float]:
    """The sweep's metrics of a result plus the busiest rank's figures, the simulator's wall time and,
    from the run directory's manifest, the plan that ran (and its throughput, for a whole iteration)."""
    metrics = {
        **sweep_metrics(result),
        "max_compute_us": max(r.compute_us for r in result.ranks),
        "max_exposed_comm_us": max(r.exposed_comm_us for r in result.ranks),
    }
    metrics.update(plan_metrics(manifest or {}, result.iteration_time_us))
    metrics.update(job_metrics(result, manifest or {}))
    if result.wall_time_s is not None:
        metrics["wall_time_s"] = result.wall_time_s
    return metrics


def plan_metrics(manifest: dict[str, Any], iteration_time_us: float) -> dict[str, float]:
    metrics: dict[str, float] = {}
    layers = manifest.get("layers_per_stage")
    if isinstance(layers, list):
        metrics["num_layers_simulated"] = sum(layers)
    parallelism = manifest.get("parallelism")
    if not isinstance(parallelism, dict):
        return metrics
    for key in ("tp", "pp", "dp", "micro_batch_size", "virtual_stages"):
        if isinstance(parallelism.get(key), int):
            metrics[f"plan_{key}"] = parallelism[key]
    idle = manifest.get("idle_ranks")
    if isinstance(manifest.get("num_ranks"), int):
        metrics["gpus_used"] = manifest["num_ranks"] - (len(idle) if isinstance(idle, list) else 0)
    model, batch = manifest.get("model"), parallelism.get("global_batch_size")
    seq_len = model.get("seq_len") if isinstance(model, dict) else None
    if (
        manifest.get("scope") is None
        and isinstance(batch, int)
        and isinstance(seq_len, int)
        and iteration_time_us > 0
    ):
        metrics["tokens_per_s"] = batch * seq_len / (iteration_time_us * 1e-6)
    return metrics


def display_unit(unit: str, largest: float) -> tuple[float, str]:
    """(divisor, suffix) to show values of `unit`: times in the unit their largest value reads best."""
    if unit == "us":
        scale, name = time_unit(largest)
        return scale, f" ({name})"
    return 1.0, UNIT_SUFFIX.get(unit, f" ({unit})")
