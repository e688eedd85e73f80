"""Embedded-backend wall time and peak memory for GPT-3-175B on 128 and 1024 GPUs, and their ratio.

Target (issue 4): 1024 GPUs in ≤ 20 s and ≤ 4 GiB on 2 cores, cost no worse than linear in
ranks × trace nodes. Run directories come from the workload generator (examples/*.yaml through
`astra_hetero.pipeline.build_run_dir`), or with --synthetic from `synthetic_llm.py` (same trace shape:
TP8 all-reduces, PP send/recv, DP bucket all-reduces). Pass --run-dir DIR to time existing directories.
Each simulation runs in a fresh process, so peak RSS (its own plus its trace-decoding workers') is its alone.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SPECS = {128: ROOT / "examples/gpt3_175b_128gpu_h100.yaml", 1024: ROOT / "examples/gpt3_175b_1024gpu.yaml"}

CHILD = r"""
import json, resource, sys, time
from astra_hetero.backends.embedded.backend import EmbeddedBackend
start = time.perf_counter()
result = EmbeddedBackend(timeline=sys.argv[2] == "1").run(sys.argv[1]).result
elapsed = time.perf_counter() - start
usage = [resource.getrusage(who).ru_maxrss for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
peak = max(usage)
print(json.dumps({"seconds": elapsed, "peak_bytes": peak * 1024, "ranks": result.num_ranks,
                  "nodes": result.meta["num_nodes"], "iteration_us": result.iteration_time_us}))
"""


def build(num_gpus: int, out: Path, synthetic: bool) -> Path:
    if synthetic:
        sys.path.insert(0, str(Path(__file__).parent))
        from synthetic_llm import Shape, write_run_dir

        return write_run_dir(Shape(dp=num_gpus // 128), out)
    from astra_hetero.pipeline import build_run_dir
    from astra_hetero.spec import load_spec

    build_run_dir(load_spec(SPECS[num_gpus]), out)
    return out


def measure(run_dir: Path, timeline: bool) -> dict[str, float]:
    done = subprocess.run([sys.executable, "-c", CHILD, str(run_dir), "1" if timeline else "0"], check=True,
                          capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def astra_sim_seconds(run_dir: Path, timeout_s: float) -> float | None:
    """Wall time of ASTRA-sim's congestion-unaware analytical binary on a copy of `run_dir`, if configured."""
    import os
    import shutil
    import time

    from astra_hetero.errors import AstraHeteroError
    from astra_hetero.pipeline import execute

    if not os.environ.get("ASTRA_SIM_BIN_DIR"):
        return None
    with tempfile.TemporaryDirectory() as tmp:
        copy = shutil.copytree(run_dir, Path(tmp) / "run")
        start = time.perf_counter()
        try:
            execute(copy, "analytical-unaware", timeout_s=timeout_s)
        except AstraHeteroError as exc:
            print(f"  ASTRA-sim analytical-unaware failed: {exc}".splitlines()[0])
            return None
        return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--synthetic", action="store_true", help="use synthetic traces, not the generator")
    parser.add_argument("--run-dir", nargs=2, type=Path, metavar=("DIR128", "DIR1024"))
    parser.add_argument("--timeline", action="store_true", help="also build per-node spans (trace.json)")
    parser.add_argument("--astra-sim", choices=("none", "128", "both"), default="128",
                        help="also time ASTRA-sim analytical (needs ASTRA_SIM_BIN_DIR; 1024 takes ~10 min)")
    args = parser.parse_args()
    figures = {}
    with tempfile.TemporaryDirectory() as tmp:
        for index, num_gpus in enumerate((128, 1024)):
            run_dir = args.run_dir[index] if args.run_dir else build(num_gpus, Path(tmp) / str(num_gpus),
                                                                     args.synthetic)
            figures[num_gpus] = f = measure(run_dir, args.timeline)
            print(f"{num_gpus:5d} GPUs: {f['nodes']:>9,} nodes  {f['seconds']:6.2f} s  "
                  f"{f['peak_bytes'] / 1024**3:5.2f} GiB peak  iteration {f['iteration_us'] / 1e3:.1f} ms")
            if args.astra_sim == "both" or (args.astra_sim == "128" and num_gpus == 128):
                theirs = astra_sim_seconds(run_dir, timeout_s=3600)
                if theirs is not None:
                    print(f"           ASTRA-sim analytical-unaware: {theirs:7.2f} s wall, "
                          f"{theirs / f['seconds']:.1f}x the embedded engine's (aim: >= 10x)")
    small, large = figures[128], figures[1024]
    work_ratio = large["nodes"] / small["nodes"]
    time_ratio = large["seconds"] / small["seconds"]
    print(f"128 -> 1024: time x{time_ratio:.2f} for x{work_ratio:.2f} trace nodes "
          f"(per-node cost x{time_ratio / work_ratio:.2f}; <= 1 is linear or better)")
    print(f"target 1024 GPUs: <= 20 s ({large['seconds'] / 20:.2f} of it), <= 4 GiB "
          f"({large['peak_bytes'] / 4 / 1024**3:.2f} of it)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
