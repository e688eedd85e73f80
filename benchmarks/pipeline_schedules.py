"""Iteration time of one plan under each pipeline schedule and framework-overlap setting, embedded engine.

Default: GPT-3 175B on 128 H100s (TP8·PP8·DP2, 16 micro-batches per replica). For each variant it
prints the iteration time, the ratio to plain 1F1B, and the pipeline-bubble share of the ideal that
the closed form (p − 1)/(v·m) predicts for a uniform pipeline with free communication.

Run: python benchmarks/pipeline_schedules.py [SPEC]
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from astra_hetero.pipeline import build_run_dir, execute
from astra_hetero.spec import load_spec

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SPEC = ROOT / "examples" / "gpt3_175b_128gpu_h100.yaml"

VARIANTS: list[tuple[str, dict[str, Any]]] = [
    ("1f1b", {}),
    ("gpipe", {"schedule": "gpipe"}),
    ("interleaved v=2", {"virtual_stages": 2}),
    ("interleaved v=3", {"virtual_stages": 3}),
    ("1f1b, grad reduce after backward", {"overlap_grad_reduce": False}),
    ("interleaved v=2, param gather overlapped", {"virtual_stages": 2, "overlap_param_gather": True}),
]


def main() -> None:
    base = load_spec(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_SPEC)
    par = base.parallelism
    num_micro_batches = par.global_batch_size // par.micro_batch_size // par.dp
    print(f"{base.name}: pp={par.pp}, {num_micro_batches} micro-batches per replica")
    print(f"{'variant':<42} {'iteration':>12} {'vs 1f1b':>8} {'(p-1)/(v·m)':>12} {'sim s':>6}")
    reference = None
    for name, changes in VARIANTS:
        if changes.get("overlap_param_gather") and not par.distributed_optimizer:
            continue
        spec = base.model_copy(update={"parallelism": par.model_copy(update=changes)})
        v = spec.parallelism.virtual_stages
        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            run_dir = build_run_dir(spec, Path(tmp) / "run")
            iteration_us = execute(run_dir.root, "embedded", timeline="none").iteration_time_us
            elapsed = time.perf_counter() - start
        reference = reference or iteration_us
        closed_form = (par.pp - 1) / (v * num_micro_batches)
        print(
            f"{name:<42} {iteration_us / 1000:>9.2f} ms {iteration_us / reference:>8.3f} "
            f"{closed_form:>12.3f} {elapsed:>6.1f}"
        )


if __name__ == "__main__":
    main()
