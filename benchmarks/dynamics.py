"""Cost of dynamics (issue 10): the embedded engine on one run directory, static against with events.

GPT-3 175B on 64 H100 + 64 A100 (examples/gpt3_175b_128gpu_mixed.yaml) is built once per variant; the
variants differ only in `dynamics.json`. Each figure is the best CPU time over `--repeat` rounds of
in-process runs of the embedded backend (no trace.json); a round runs every variant once, so that a
change in the shared machine's load hits all of them alike.

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


def cpu_run(run_dir: Path, fold: bool = True) -> tuple[float, float]:
    """CPU seconds of one run, and its mean iteration time (ms)."""
    started = time.process_time()
    result = EmbeddedBackend(timeline=False, fold=fold).run(run_dir).result
    return time.process_time() - started, result.iteration_time_us / 1000


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    base = load_spec(SPEC)
    with tempfile.TemporaryDirectory(prefix="dynamics-bench-") as work:
        runs: dict[str, tuple[Path, bool]] = {}
        for name, (events, iterations) in VARIANTS.items():
            spec = base.model_validate(
                {**base.model_dump(by_alias=True), "dynamics": events, "iterations": iterations}
            )
            run_dir = Path(work) / f"v{len(runs)}"
            build_run_dir(spec, run_dir)
            runs[name] = (run_dir, True)
        runs["static, rank by rank"] = (runs["static"][0], False)
        # rounds over every variant, so that a change in the machine's load hits them all alike
        best = dict.fromkeys(runs, float("inf"))
        ms: dict[str, float] = {}
        for _ in range(args.repeat):
            for name, (run_dir, fold) in runs.items():
                cpu, ms[name] = cpu_run(run_dir, fold)
                best[name] = min(best[name], cpu)
        static_cpu, plain_cpu = best["static"], best["static, rank by rank"]
        print(f"{SPEC.name}: best of {args.repeat} rounds, CPU seconds (shared machine: compare ratios)")
        print(f"  static, folded              {static_cpu:6.2f} s   iteration {ms['static']:9.1f} ms")
        print(f"  static, rank by rank        {plain_cpu:6.2f} s")
        for name in VARIANTS:
            if name == "static":
                continue
            cpu = best[name]
            folded = name.startswith(("device_slowdown", "3 iterations"))
            same_mode = (static_cpu if folded else plain_cpu) * (3 if name.startswith("3 iterations") else 1)
            print(
                f"  {name:52s} {cpu:6.2f} s   iteration {ms[name]:9.1f} ms   "
                f"{cpu / same_mode - 1:+6.1%} vs static in the same mode"
                + ("" if folded else f", {cpu / static_cpu:4.1f}x the folded static run")
                + (" (per iteration)" if name.startswith("3 iterations") else "")
            )


if __name__ == "__main__":
    main()
