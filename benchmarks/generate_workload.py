"""Workload-generation time and peak memory for GPT-3 175B on 1024 GPUs (TP8·PP16·DP8, 1F1B, 16 mb).

Target (issue 2): ≤ 10 s and ≤ 2 GiB on 2 cores. Run: python benchmarks/generate_workload.py [SPEC]
Each measurement runs in a fresh process so that peak RSS belongs to that generation alone.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SPEC = ROOT / "examples" / "gpt3_175b_1024gpu.yaml"

CHILD = r"""
import json, resource, sys, time
from pathlib import Path
from astra_hetero.pipeline import build_run_dir
from astra_hetero.spec import load_spec
start = time.perf_counter()
spec = load_spec(sys.argv[1])
build_run_dir(spec, Path(sys.argv[2]), topology=False)
elapsed = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"seconds": elapsed, "peak_bytes": peak}))
"""


def measure(spec: Path) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        done = subprocess.run(
            [sys.executable, "-c", CHILD, str(spec), str(out)], check=True, capture_output=True, text=True
        )
        figures = json.loads(done.stdout.strip().splitlines()[-1])
        manifest = json.loads((out / "manifest.json").read_text())
        figures["ranks"] = manifest["num_ranks"]
        figures["trace_bytes"] = sum(p.stat().st_size for p in (out / "workload").glob("*.et"))
        return figures


def main() -> None:
    spec = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_SPEC
    figures = measure(spec)
    gib = 1024**3
    print(f"spec: {spec.name}  ranks: {figures['ranks']}  traces: {figures['trace_bytes'] / 1024**2:.0f} MiB")
    print(
        f"generation time: {figures['seconds']:.2f} s   (target ≤ 10 s, ratio {figures['seconds'] / 10:.2f})"
    )
    print(
        f"peak memory:     {figures['peak_bytes'] / gib:.3f} GiB (target ≤ 2 GiB, ratio "
        f"{figures['peak_bytes'] / gib / 2:.2f})"
    )


if __name__ == "__main__":
    main()
