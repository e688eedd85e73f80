"""Cost of dynamics (issue 10): the embedded engine on one run directory, static against with events.

GPT-3 175B on 64 H100 + 64 A100 (examples/gpt3_175b_128gpu_mixed.yaml) is built once per variant; the
variants differ only in `dynamics.json`. Each figure is the best CPU time of `--repeat` in-process runs
of the embedded backend (no trace.json), so that start-up and the shared machine's load count least.

The comparison that measures the dynamic engine is against the static run *in the same simulation
mode*: a device slowdown keeps folding (it splits the classes it touches), while events on links,
background traffic and jitter simulate rank by rank, so they are compared with the static `--no-fold`
run too (that price is folding's, not the events'). Target: ≤ 10 % extra in the same mode.

    python benchmarks/dynamics.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from astra_hetero.backends.embedded.backend import EmbeddedBackend
from astra_hetero.pipeline import build_run_dir
from astra_hetero.spec import load_spec

SPEC = Path(__file__).resolve().parents[1] / "examples" / "gpt3_175b_128gpu_mixed.yaml"
VARIANTS: dict[str, tuple[list[dict], int]] = {
    "static": ([], 1),
    "device_slowdown (one H100 node, from 100 ms)": (
        [{"event": "device_slowdown", "node_group": "h100", "node": 0, "factor": 0.5, "start_ms": 100}],
        1,
    ),
    "link_rate (one A100 node's NICs at 1/4, 0-200 ms)": (
        [
            {
                "event": "link_rate",
                "node_group": "a100",
                "node": 0,
                "kind": "nic",
                "factor": 0.25,
                "end_ms": 200,
            }
        ],
        1,
    ),
    "background_traffic (100 Gbit/s across the spines)": (
        [
            {
                "event": "background_traffic",
                "from": {"node_group": "h100", "node": 0},
                "to": {"node_group": "a100", "node": 7},
                "gbps": 100,
            }
        ],
        1,
    ),
    "jitter (lognormal, sigma 0.05)": ([{"event": "jitter", "sigma": 0.05, "seed": 7}], 1),
    "3 iterations, no event": ([], 3),
}


def best_cpu(run_dir: Path, repeat: int, fold: bool = True) -> tuple[float, float]:
    """Best CPU seconds over `repeat` runs, and the run's mean iteration time (ms)."""
    best, ms = float("inf"), 0.0
    for _ in range(repeat):
        started = time.process_time()
        result = EmbeddedBackend(timeline=False, fold=fold).run(run_dir).result
        best = min(best, time.process_time() - started)
        ms = result.iteration_time_us / 1000
    return best, ms


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    base = load_spec(SPEC)
    with tempfile.TemporaryDirectory(prefix="dynamics-bench-") as work:
        results = {}
        for name, (events, iterations) in VARIANTS.items():
            spec = base.model_validate(
                {**base.model_dump(by_alias=True), "dynamics": events, "iterations": iterations}
            )
            run_dir = Path(work) / f"v{len(results)}"
            build_run_dir(spec, run_dir)
            results[name] = (run_dir, *best_cpu(run_dir, args.repeat))
        static_dir, static_cpu, static_ms = results["static"]
        plain_cpu, _ = best_cpu(static_dir, args.repeat, fold=False)
        print(f"{SPEC.name}: best of {args.repeat} CPU times (shared machine: compare ratios)")
        print(f"  static, folded            {static_cpu:6.2f} s   iteration {static_ms:9.1f} ms")
        print(f"  static, rank by rank      {plain_cpu:6.2f} s")
        for name, (_, cpu, ms) in list(results.items())[1:]:
            folded = name.startswith("device_slowdown") or name.startswith("3 iterations")
            same_mode = static_cpu if folded else plain_cpu
            if name.startswith("3 iterations"):
                same_mode *= 3
            print(
                f"  {name:52s} {cpu:6.2f} s   iteration {ms:9.1f} ms   "
                f"{cpu / same_mode - 1:+6.1%} vs static in the same mode"
                + ("" if folded else f", {cpu / static_cpu:4.1f}x the folded static run")
                + (" (per iteration)" if name.startswith("3 iterations") else "")
            )


if __name__ == "__main__":
    main()
