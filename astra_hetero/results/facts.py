"""What was simulated, as a run directory's manifest records it: the model, the GPUs, the parallel plan,
a cut-down iteration, and the generator's memory estimate per GPU type — the lines a run summary
starts with, beside the result's own figures (time, throughput).

The manifest of a directory written by another tool may lack any of these; a fact it does not record
(or records in a form this version does not know) is left out, never guessed.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from astra_hetero.rundir import MANIFEST, read_json_object

SCHEDULE_NAMES = {"1f1b": "1F1B", "gpipe": "GPipe", "interleaved": "interleaved 1F1B"}


@dataclass(frozen=True)
class MemoryUse:
    gpu: str
    peak_gib: float  # the generator's estimate for the fullest device of this type
    capacity_gib: float
    stage: int | None = None
    replica: int | None = None

    @property
    def share(self) -> float:
        return self.peak_gib / self.capacity_gib


@dataclass(frozen=True)
class RunFacts:
    model: str = ""  # "gpt3-13b (40 layers, hidden size 5120)"
    gpus: str = ""  # "16 GPUs: 8 a100-80, 8 h100-sxm, 4 left idle by the plan"
    plan: str = ""  # "TP 8 · PP 2 · DP 1, 16 micro-batches of 1 per replica, 1F1B"
    scope: str = ""  # a cut-down iteration, said plainly; "" for the whole iteration
    memory: tuple[MemoryUse, ...] = ()
    framework: str = ""  # "megatron-core: 5 us CPU per kernel launch, 200 us per micro-batch, ..."

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model or None,
            "gpus": self.gpus or None,
            "plan": self.plan or None,
            "scope": self.scope or None,
            "framework": self.framework or None,
            "memory": {
                m.gpu: {"peak_gib": m.peak_gib, "capacity_gib": m.capacity_gib, "stage": m.stage}
                for m in self.memory
            },
        }


def read_facts(run_dir: Path) -> RunFacts:
    """The facts of a run directory's manifest.json; none for a directory without one."""
    path = Path(run_dir) / MANIFEST
    return run_facts(read_json_object(path, "")) if path.is_file() else RunFacts()


def run_facts(manifest: dict[str, Any]) -> RunFacts:
    return RunFacts(
        model=_model(manifest.get("model")),
        gpus=_gpus(manifest.get("ranks")),
        plan=_plan(manifest),
        scope=_scope(manifest.get("scope")),
        memory=_memory(manifest.get("memory")),
        framework=_framework(manifest.get("framework")),
    )


def fact_lines(facts: RunFacts) -> list[str]:
    """The summary's opening lines (each may wrap)."""
    lines = []
    if facts.model or facts.gpus:
        lines.append("simulated: " + " on ".join(p for p in (facts.model, facts.gpus) if p))
    if facts.plan:
        lines.append(f"plan: {facts.plan}")
    if facts.scope:
        lines.append(facts.scope)
    if facts.framework:
        lines.append(f"framework (host costs): {facts.framework}")
    if facts.memory:
        parts = [f"{m.gpu} {m.peak_gib:.1f} of {m.capacity_gib:g} GiB ({m.share:.0%})" for m in facts.memory]
        lines.append("memory (generator's estimate, fullest GPU of each type): " + ", ".join(parts))
    return lines


def _model(model: Any) -> str:
    if not isinstance(model, dict):
        return ""
    name = model.get("preset") or model.get("name") or "a model"
    layers, hidden = model.get("num_layers"), model.get("hidden_size")
    size = ", ".join(
        text
        for value, text in ((layers, f"{layers} layers"), (hidden, f"hidden size {hidden}"))
        if isinstance(value, int)
    )
    return f"{name} ({size})" if size else str(name)


def _gpus(ranks: Any) -> str:
    if not isinstance(ranks, list) or not all(isinstance(r, dict) for r in ranks) or not ranks:
        return ""
    counts = Counter(str(r.get("gpu", "?")) for r in ranks)
    idle = sum(bool(r.get("idle")) for r in ranks)
    kinds = ", ".join(f"{n} {gpu}" for gpu, n in sorted(counts.items()))
    return f"{len(ranks)} GPUs: {kinds}" + (f", {idle} left idle by the plan" if idle else "")


def _plan(manifest: dict[str, Any]) -> str:
    par = manifest.get("parallelism")
    if not isinstance(par, dict) or not all(isinstance(par.get(k), int) for k in ("tp", "pp", "dp")):
        return ""
    parts = [f"TP {par['tp']} · PP {par['pp']} · DP {par['dp']}"]
    micro = manifest.get("micro_batches_per_replica")
    if isinstance(micro, list) and micro and all(isinstance(m, int) for m in micro):
        counts = str(micro[0]) if len(set(micro)) == 1 else "/".join(map(str, micro))
        size = par.get("micro_batch_size")
        of = f" of {size}" if isinstance(size, int) else ""
        parts.append(f"{counts} micro-batches{of} per replica")
    layers = manifest.get("layers_per_stage")
    if isinstance(layers, list) and len(set(map(str, layers))) > 1:
        parts.append(f"layers per stage {'/'.join(map(str, layers))}")
    schedule = par.get("schedule")
    if isinstance(schedule, str):
        name = SCHEDULE_NAMES.get(schedule, schedule)
        chunks = manifest.get("virtual_stages")
        parts.append(f"{name}, {chunks} virtual stages" if isinstance(chunks, int) and chunks > 1 else name)
    return ", ".join(parts)


def _framework(framework: Any) -> str:
    if not isinstance(framework, dict) or not isinstance(framework.get("name"), str):
        return ""
    costs = [
        f"{framework[key]:g} us {what}"
        for key, what in (
            ("launch_us", "CPU per kernel launch"),
            ("micro_batch_us", "per micro-batch"),
            ("step_us", "per iteration"),
        )
        if isinstance(framework.get(key), int | float)
    ]
    return f"{framework['name']}: " + ", ".join(costs) if costs else framework["name"]


def _scope(scope: Any) -> str:
    if not isinstance(scope, dict) or not scope:
        return ""
    kept = ", ".join(f"{key.replace('_', ' ')} {value}" for key, value in scope.items() if value is not None)
    return (
        f"a cut-down iteration ({kept}): times, throughput and idle are of that part, not of a whole "
        "iteration"
    )


def _memory(memory: Any) -> tuple[MemoryUse, ...]:
    if not isinstance(memory, dict):
        return ()
    uses = []
    for gpu, entry in sorted(memory.items()):
        if not isinstance(entry, dict):
            continue
        peak, capacity = entry.get("peak_gib"), entry.get("capacity_gib")
        if not all(_positive(v) for v in (peak, capacity)):
            continue
        stage, replica = entry.get("stage"), entry.get("replica")
        uses.append(
            MemoryUse(
                str(gpu),
                float(peak),
                float(capacity),
                stage if isinstance(stage, int) else None,
                replica if isinstance(replica, int) else None,
            )
        )
    return tuple(uses)


def _positive(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 < value < float("inf")
