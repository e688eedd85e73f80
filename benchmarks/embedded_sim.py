"""Embedded engine at cluster scale (issue 9): figures and ratios, end to end through the CLI.

Every figure is one `astra-hetero` command in a fresh process, timed from outside: wall seconds, CPU
seconds (user + system of the command and the worker processes it waits for) and the peak resident
memory of its largest process. Wall time on a shared machine depends on what else runs; CPU time
much less so — both are printed, and ratios are taken within one run of this script.

Cases (`--cases`, default all but `plain`):
  1024      GPT-3 175B, 1,024 GPUs, TP8·PP16·DP8, 1F1B, 16 micro-batches: `run RUN_DIR`   (≤ 5 s)
  8192      the same on 8,192 GPUs (DP64): `run SPEC -o RUN_DIR`, generation included  (≤ 60 s, ≤ 4 GiB)
  1t        a 1T-parameter GPT on 512 GPUs, TP8·PP64, 512 micro-batches: `run RUN_DIR` (≤ 60 s)
  astra     GPT-3 175B on 128 H100s with ASTRA-sim's one-op rule: embedded vs ASTRA-sim's
            congestion-unaware analytical binary on identical copies (needs ASTRA_SIM_BIN_DIR; ≥ 20×)
  hetero    GPT-3 175B on 64 H100 + 64 A100: `run SPEC -o RUN_DIR` and `run RUN_DIR`  (≤ 2 s)
  scaling   cost against GPUs (128…2048) and micro-batches (16…128): it follows classes, not ranks
  plain     the 1024-GPU directory rank by rank (`--no-fold`), for the folding speed-up
  frontier  GPT-3 175B TP8·PP16, 16 micro-batches per replica, `run SPEC -o RUN_DIR` with default limits
            on 32,768, 65,536 and 131,072 H100s, and 65,536 and 131,072 GPUs half H100, half B200
            (issue 22: 131,072 GPUs ≤ 60 s, ≤ 4 GiB, run directory ≤ 1 GB); wall, CPU, memory, disk
  classes   the 8192-GPU spec with traces by class and with per-rank traces (`--per-rank`): the same
            iteration time, and what each costs in time and disk
Run directories are built under a temporary directory (or `--keep DIR`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
SPECS = ROOT / "benchmarks" / "specs"
EXAMPLES = ROOT / "examples"
CLI = [sys.executable, "-m", "astra_hetero.cli.main"]
GIB = 1024**3
# The 8192-GPU, 1T and 128-micro-batch directories hold 15-17 M trace nodes, past the default work
# limit (5 M, `astra-hetero build --help`); these cases raise it.
LARGE = ()  # the default work limits admit every case here


@dataclass(frozen=True)
class Measure:
    wall_s: float
    cpu_s: float
    peak_bytes: int

    def __str__(self) -> str:
        return f"{self.wall_s:7.2f} s wall {self.cpu_s:7.2f} s CPU {self.peak_bytes / GIB:5.2f} GiB peak"


# A wrapper process runs the command, so that the peak RSS it reports is this command's alone.
WRAPPER = r"""
import json, resource, subprocess, sys, time
start = time.perf_counter()
code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
wall = time.perf_counter() - start
use = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"wall": wall, "cpu": use.ru_utime + use.ru_stime, "peak": use.ru_maxrss * 1024,
                  "code": code.returncode, "stderr": code.stderr[-2000:]}))
"""


def cli(*args: str, env: dict[str, str] | None = None) -> Measure:
    """Run one astra-hetero command; its wall and CPU time (with the workers it waits for) and peak RSS."""
    done = subprocess.run(
        [sys.executable, "-c", WRAPPER, *CLI, *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    )
    report = json.loads(done.stdout.strip().splitlines()[-1])
    if report["code"] != 0:
        raise SystemExit(f"astra-hetero {' '.join(args)} failed:\n{report['stderr']}")
    return Measure(report["wall"], report["cpu"], report["peak"])


def result(run_dir: Path) -> dict:
    return json.loads((run_dir / "result.json").read_text())


def folding(run_dir: Path) -> str:
    meta = result(run_dir)["meta"]
    fold = meta.get("folding")
    if not fold:
        return f"{meta['num_nodes']:,} trace nodes simulated (no folding)"
    return f"{fold['rank_classes']} rank classes, {fold['simulated_nodes']:,} trace nodes simulated"


def spec_variant(base: Path, out: Path, **changes: object) -> Path:
    """`base` with dotted-path overrides (`parallelism.dp=2`, `cluster.node_groups.0.count=32`)."""
    data = yaml.safe_load(base.read_text())
    for dotted, value in changes.items():
        *path, last = dotted.split(".")
        node = data
        for part in path:
            node = node[int(part)] if isinstance(node, list) else node[part]
        node[last] = value
    out.write_text(yaml.safe_dump(data, sort_keys=False))
    return out


def case_1024(work: Path) -> None:
    run_dir = work / "gpt3-1024"
    cli("build", str(EXAMPLES / "gpt3_175b_1024gpu.yaml"), "-o", str(run_dir), "--quiet")
    m = cli("run", str(run_dir), "--timeline", "none", "--quiet")
    print(f"1024 GPUs  run RUN_DIR        {m}  [{folding(run_dir)}]")
    print(f"           target ≤ 5 s: CPU {m.cpu_s / 5:.2f} of it, wall {m.wall_s / 5:.2f} of it")
    t = cli("run", str(run_dir), "--quiet")
    print(f"           with trace.json   {t}")


def case_plain(work: Path) -> None:
    run_dir = work / "gpt3-1024"
    if not (run_dir / "manifest.json").is_file():
        cli("build", str(EXAMPLES / "gpt3_175b_1024gpu.yaml"), "-o", str(run_dir), "--quiet")
    folded = cli("run", str(run_dir), "--timeline", "none", "--quiet")
    folded_us = result(run_dir)["iteration_time_us"]
    plain = cli("run", str(run_dir), "--timeline", "none", "--quiet", "--no-fold")
    plain_us = result(run_dir)["iteration_time_us"]
    print(f"1024 GPUs  folded             {folded}")
    print(f"           rank by rank       {plain}")
    speed_up = f"{plain.cpu_s / folded.cpu_s:.1f}x CPU, {plain.wall_s / folded.wall_s:.1f}x wall"
    print(
        f"           folding speed-up: {speed_up}; iteration {folded_us / 1e3:.3f} ms folded vs "
        f"{plain_us / 1e3:.3f} ms plain"
    )


def case_8192(work: Path) -> None:
    run_dir = work / "gpt3-8192"
    spec = str(SPECS / "gpt3_175b_8192gpu.yaml")
    m = cli("run", spec, "-o", str(run_dir), "--timeline", "none", "--quiet", *LARGE)
    print(f"8192 GPUs  run SPEC -o DIR    {m}  [{folding(run_dir)}]")
    print(
        f"           target ≤ 60 s, ≤ 4 GiB: CPU {m.cpu_s / 60:.2f}, wall {m.wall_s / 60:.2f}, "
        f"memory {m.peak_bytes / GIB / 4:.2f} of it"
    )
    s = cli("run", str(run_dir), "--timeline", "none", "--quiet")
    print(f"           run RUN_DIR alone {s}")


def case_1t(work: Path) -> None:
    run_dir = work / "gpt-1t"
    g = cli("build", str(SPECS / "gpt_1t_512gpu.yaml"), "-o", str(run_dir), "--quiet", *LARGE)
    m = cli("run", str(run_dir), "--timeline", "none", "--quiet")
    print(f"1T, 512 GPUs, 512 micro-batches: build {g}")
    print(f"           run RUN_DIR        {m}  [{folding(run_dir)}]")
    print(
        f"           target ≤ 60 s: CPU {m.cpu_s / 60:.2f}, wall {m.wall_s / 60:.2f} of it; "
        f"build + run {g.cpu_s + m.cpu_s:.1f} s CPU"
    )


def disk_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file() and not p.is_symlink())


def frontier_spec(work: Path, gpus: int, mixed: bool = False) -> Path:
    """GPT-3 175B, TP8·PP16, 16 micro-batches per replica on `gpus` H100s (or half H100, half B200)."""
    dp = gpus // 128
    changes: dict[str, object] = {
        "name": f"gpt3-175b-{gpus}gpu" + ("-h100-b200" if mixed else ""),
        "cluster.node_groups.0.count": gpus // 8 // (2 if mixed else 1),
        "parallelism.dp": dp,
        "parallelism.global_batch_size": 16 * dp,
    }
    spec = spec_variant(SPECS / "gpt3_175b_8192gpu.yaml", work / f"{changes['name']}.yaml", **changes)
    if mixed:
        data = yaml.safe_load(spec.read_text())
        h100 = data["cluster"]["node_groups"][0]
        b200 = {**h100, "name": "b200", "gpu": "b200", "intra_node_fabric": "nvlink5"}
        data["cluster"]["node_groups"].append(b200)
        spec.write_text(yaml.safe_dump(data, sort_keys=False))
    return spec


def case_frontier(work: Path) -> None:
    print("frontier scale, GPT-3 175B TP8·PP16, 16 micro-batches per replica, `run SPEC -o DIR`:")
    for gpus, mixed in ((32768, False), (65536, False), (131072, False), (65536, True), (131072, True)):
        spec = frontier_spec(work, gpus, mixed)
        run_dir = work / spec.stem
        m = cli("run", str(spec), "-o", str(run_dir), "--quiet")
        disk = disk_bytes(run_dir)
        kind = "H100+B200" if mixed else "H100     "
        print(
            f"  {gpus:7,d} {kind} {m}  {disk / 1e6:7.1f} MB on disk  "
            f"iteration {result(run_dir)['iteration_time_us'] / 1e3:.3f} ms  [{folding(run_dir)}]"
        )
        if gpus == 131072 and not mixed:
            print(
                f"           target ≤ 60 s, ≤ 4 GiB, ≤ 1 GB: wall {m.wall_s / 60:.2f}, memory "
                f"{m.peak_bytes / GIB / 4:.2f}, disk {disk / 1e9:.2f} of it"
            )
        shutil.rmtree(run_dir)


def case_classes(work: Path) -> None:
    spec = str(SPECS / "gpt3_175b_8192gpu.yaml")
    by_class, per_rank = work / "gpt3-8192-classes", work / "gpt3-8192-per-rank"
    a = cli("run", spec, "-o", str(by_class), "--timeline", "none", "--quiet")
    g = cli("build", spec, "-o", str(per_rank), "--quiet", "--per-rank")
    b = cli("run", str(per_rank), "--timeline", "none", "--quiet")
    mine, theirs = result(by_class)["iteration_time_us"], result(per_rank)["iteration_time_us"]
    print(f"8192 GPUs  by class: run SPEC {a}  {disk_bytes(by_class) / 1e6:8.1f} MB")
    print(f"           per rank: build {g}, run {b}  {disk_bytes(per_rank) / 1e6:8.1f} MB")
    print(
        f"           iteration {mine / 1e3:.6f} ms by class, {theirs / 1e3:.6f} ms per rank "
        f"(equal: {mine == theirs})"
    )


def case_astra(work: Path) -> None:
    bin_dir = os.environ.get("ASTRA_SIM_BIN_DIR")
    if not bin_dir and Path("/work/astra-sim/READY").is_file():
        bin_dir = "/work/astra-sim/bin"
    if not bin_dir:
        print("ASTRA-sim  skipped: set ASTRA_SIM_BIN_DIR to the directory of the analytical binaries")
        return
    ours, theirs = work / "one-op-embedded", work / "one-op-astrasim"
    cli("build", str(SPECS / "gpt3_175b_128gpu_h100_one_op.yaml"), "-o", str(ours), "--quiet")
    shutil.copytree(ours, theirs)
    quiet = ("--timeline", "none", "--quiet")
    a = cli("run", str(theirs), "--backend", "analytical-unaware", *quiet, env={"ASTRA_SIM_BIN_DIR": bin_dir})
    e = cli("run", str(ours), *quiet)
    mine, other = result(ours)["iteration_time_us"], result(theirs)["iteration_time_us"]
    lines = [
        "128 GPUs, one op in flight per rank, identical directories:",
        f"embedded           {e}  iteration {mine / 1e3:.3f} ms",
        f"ASTRA-sim unaware  {a}  iteration {other / 1e3:.3f} ms ({(mine / other - 1) * 100:+.3f} %)",
        f"embedded is {a.wall_s / e.wall_s:.1f}x faster in wall time, {a.cpu_s / e.cpu_s:.1f}x in CPU time "
        "(target ≥ 20x)",
    ]
    print("\n           ".join(lines))


def case_hetero(work: Path) -> None:
    run_dir = work / "hetero-128"
    spec = EXAMPLES / "gpt3_175b_128gpu_mixed.yaml"
    whole = cli("run", str(spec), "-o", str(run_dir), "--timeline", "none", "--quiet")
    alone = cli("run", str(run_dir), "--timeline", "none", "--quiet")
    print(f"128 GPUs, H100 + A100: run SPEC -o DIR {whole}")
    print(f"           run RUN_DIR        {alone}  [{folding(run_dir)}]")
    done = subprocess.run(
        [sys.executable, "-c", PER_PLAN, str(spec)], capture_output=True, text=True, check=True
    )
    per_plan = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"           per plan in one process (generation + simulation): {per_plan:.2f} s CPU")
    print(
        f"           target ≤ 2 s: simulation CPU {alone.cpu_s / 2:.2f}, per plan {per_plan / 2:.2f}, "
        f"spec to result through the CLI {whole.cpu_s / 2:.2f} of it"
    )


# A planner calls the pipeline as a library: per plan it pays generation and simulation, not start-up.
PER_PLAN = r"""
import json, sys, tempfile, time
from pathlib import Path
from astra_hetero.pipeline import build_run_dir, execute
from astra_hetero.spec import load_spec
spec, times = load_spec(sys.argv[1]), []
for _ in range(4):
    with tempfile.TemporaryDirectory() as tmp:
        start = time.process_time()
        build_run_dir(spec, Path(tmp) / "run")
        execute(Path(tmp) / "run", timeline="none")
        times.append(time.process_time() - start)
print(json.dumps(sorted(times[1:])[1]))  # the median of three, after one to warm up
"""


def case_scaling(work: Path) -> None:
    base = EXAMPLES / "gpt3_175b_1024gpu.yaml"
    print("scaling (GPT-3 175B, TP8·PP16, 16 micro-batches per replica): GPUs vs simulation cost")
    by_gpus = {
        f"{128 * dp:5d} GPUs": {
            "cluster.node_groups.0.count": 16 * dp,
            "parallelism.dp": dp,
            "parallelism.global_batch_size": 16 * dp,
        }
        for dp in (1, 2, 4, 8, 16)
    }
    _series(work, base, by_gpus, [1, 2, 4, 8, 16], "GPUs")
    print("scaling (1024 GPUs, TP8·PP16·DP8): micro-batches per replica vs simulation cost")
    by_mb = {f"{mb:5d} mb  ": {"parallelism.global_batch_size": 8 * mb} for mb in (16, 32, 64, 128)}
    _series(work, base, by_mb, [1, 2, 4, 8], "micro-batches")


def _series(work: Path, base: Path, variants: dict[str, dict], factors: list[int], what: str) -> None:
    first = None
    for (label, changes), factor in zip(variants.items(), factors, strict=True):
        name = label.strip().replace(" ", "-")
        run_dir = work / name
        spec = spec_variant(base, work / f"{name}.yaml", **changes)
        cli("build", str(spec), "-o", str(run_dir), "--quiet", *LARGE)
        m = cli("run", str(run_dir), "--timeline", "none", "--quiet")
        first = first or m
        print(
            f"  {label}  {m}  x{m.cpu_s / first.cpu_s:4.2f} CPU for x{factor:2d} {what}  [{folding(run_dir)}]"
        )


CASES = {
    "1024": case_1024,
    "8192": case_8192,
    "1t": case_1t,
    "astra": case_astra,
    "hetero": case_hetero,
    "scaling": case_scaling,
    "plain": case_plain,
    "frontier": case_frontier,
    "classes": case_classes,
}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--cases",
        default="1024,8192,1t,astra,hetero,scaling",
        help=f"comma-separated, from {', '.join(CASES)}",
    )
    parser.add_argument("--keep", type=Path, help="build run directories here and keep them")
    args = parser.parse_args()
    print(f"{os.cpu_count()} CPUs; load average {', '.join(f'{x:.1f}' for x in os.getloadavg())} at start")
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        for name in args.cases.split(","):
            CASES[name](work)
    print(f"load average {', '.join(f'{x:.1f}' for x in os.getloadavg())} at end")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
