"""What publishing a run directory as one step costs, next to the work it publishes.

`run RUN_DIR` assembles the new state beside the old one (inputs hard-linked, result written) and
exchanges the two directories; `build` writes everything anew. This prints, for a run directory of
SPEC (default: GPT-3 175B on 1024 GPUs, 1024 trace files), the time of one publication that carries
every input over unchanged, the time of building the directory, and their ratio.

Run: python benchmarks/publish.py [SPEC]   (timings on a shared machine are noisy; the ratio less so)
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from astra_hetero.outputs import RUN_PARTS, publish_output
from astra_hetero.pipeline import build_run_dir
from astra_hetero.spec import load_spec

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SPEC = ROOT / "examples" / "gpt3_175b_1024gpu.yaml"
REPEATS = 5


def republish(run_dir: Path) -> float:
    """One publication that keeps every input: what `run RUN_DIR` adds around the simulation."""
    started = time.perf_counter()
    with publish_output(run_dir, RUN_PARTS) as run:
        run.keep("workload")
        run.keep("topology")
    return time.perf_counter() - started


def main() -> None:
    spec_path = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_SPEC
    spec = load_spec(spec_path)
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        started = time.perf_counter()
        build_run_dir(spec, run_dir)
        build_s = time.perf_counter() - started
        files = sum(1 for p in run_dir.rglob("*") if p.is_file())
        size = sum(p.stat().st_size for p in run_dir.rglob("*") if p.is_file())
        publish_s = min(republish(run_dir) for _ in range(REPEATS))
    print(f"{spec_path.name}: {files} files, {size / 2**20:.0f} MiB")
    print(f"build (generate + topology, published): {build_s:.2f} s")
    print(f"republish keeping every input (best of {REPEATS}): {publish_s * 1000:.1f} ms")
    print(f"ratio publish / build: {publish_s / build_s:.4f}")


if __name__ == "__main__":
    main()
