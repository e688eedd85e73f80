"""Imported ASTRA-sim studies: the embedded engine (defaults) against real ASTRA-sim analytical.

Target (issue 16): `astra-hetero run RUN_DIR` on an imported study within 2 % of the real
congestion-unaware binary run on the study's *original* command line, for ASTRA-sim's own examples
and for STG trace sets, roofline sets included.

    python benchmarks/astrasim_import.py --bin-dir /work/astra/bin --astra-sim-src /work/astra/astra-sim-src \
        [--stg DIR ...] [--keep DIR]

Cases: every microbenchmark of ASTRA-sim's examples/ (all-reduce, all-gather, reduce-scatter,
all-to-all on 4, 8, 16 NPUs) on each analytical network of examples/ and inputs/ with as many NPUs,
under each system file of examples/ and inputs/ whose implementations fit the network (ASTRA-sim
refuses more); and each `--stg` directory (one STG output: `<name>.<rank>.et` and `<name>.json`)
on 1-D and 2-D networks under roofline system files. Prints per case the real and embedded
iteration times, their difference and the largest per-rank finish difference; exits 0 always.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from astra_hetero.astrasim_inputs.analytical import read_analytical_network
from astra_hetero.importer.pipeline import import_study
from astra_hetero.importer.study import StudyFiles
from astra_hetero.pipeline import execute

TARGET = 0.02
FINISHED = re.compile(r"sys\[(\d+)\] finished, (\d+) cycles")


@dataclass(frozen=True)
class Case:
    name: str
    workload: str
    system: Path
    network: Path
    comm_groups: Path | None = None


def example_cases(src: Path, work: Path) -> list[Case]:
    examples, inputs = src / "examples", src / "inputs"
    networks = sorted((examples / "network/analytical").glob("*.yml")) + sorted(
        (inputs / "network").glob("*.yml")
    )
    systems = sorted((examples / "system/native_collectives").glob("*.json"))
    systems += sorted((inputs / "system/analytical").glob("*.json"))
    cases = []
    for network_file in networks:
        try:
            network = read_analytical_network(network_file)
        except Exception:  # inputs/ holds a template with `tbd` bandwidths
            continue
        for system_file in systems:
            system = _runnable(system_file, work)
            implementations = json.loads(system.read_text())["all-reduce-implementation"]
            if len(implementations) > len(network.dims):
                continue
            for kind in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all"):
                prefix = examples / f"workload/microbenchmarks/{kind}/{network.num_npus}npus_1MB/{kind}"
                if Path(f"{prefix}.0.et").is_file():
                    name = f"{kind} {network.num_npus} NPUs · {network_file.stem} · {system_file.stem}"
                    cases.append(Case(name, str(prefix), system, network_file))
    return cases


def _runnable(system_file: Path, work: Path) -> Path:
    """inputs/'s H100 system files ask ASTRA-sim to track local memory into a folder that does not
    exist (the binary then fails): a copy without that setting."""
    data = json.loads(system_file.read_text())
    if not data.pop("track-local-mem", 0):
        return system_file
    copy = work / f"{system_file.stem}.json"
    copy.write_text(json.dumps(data))
    return copy


def stg_cases(directory: Path, work: Path) -> list[Case]:
    """An STG output directory on three networks, under roofline system files (STG's nodes are
    roofline nodes: num_ops and tensor_size, no duration)."""
    (trace,) = sorted(directory.glob("*.0.et"))
    name = trace.name[: -len(".0.et")]
    groups = directory / f"{name}.json"
    count = len(list(directory.glob(f"{name}.*.et")))
    networks = {"switch": _network(work, f"switch{count}", ["Switch"], [count], [200.0], [800.0])}
    if count >= 4 and count % 2 == 0:
        networks["switch_x_ring"] = _network(
            work, f"sxr{count}", ["Switch", "Ring"], [count // 2, 2], [400.0, 50.0], [500.0, 1500.0]
        )
        networks["ring_x_switch"] = _network(
            work, f"rxs{count}", ["Ring", "Switch"], [2, count // 2], [300.0, 25.0], [200.0, 2000.0]
        )
    cases = []
    for label, network in networks.items():
        dims = len(read_analytical_network(network).dims)
        for system in _stg_systems(work, dims):
            cases.append(
                Case(
                    f"STG {directory.name} · {label} · {system.stem}",
                    str(directory / name),
                    system,
                    network,
                    groups,
                )
            )
    return cases


def _network(
    work: Path, stem: str, blocks: list[str], npus: list[int], bw: list[float], lat: list[float]
) -> Path:
    path = work / f"{stem}.yml"
    path.write_text(
        f"topology: {blocks}\nnpus_count: {npus}\nbandwidth: {bw}\nlatency: {lat}\n".replace("'", "")
    )
    return path


def _stg_systems(work: Path, dims: int) -> list[Path]:
    base = {
        "scheduling-policy": "LIFO",
        "endpoint-delay": 10,
        "collective-optimization": "localBWAware",
        "local-mem-bw": 3000,
        "boost-mode": 0,
        "roofline-enabled": 1,
        "peak-perf": 900,
    }
    variants = {
        "ring_4x2": {"preferred-dataset-splits": 4, "active-chunks-per-dimension": 2, "impl": "ring"},
        "ring_1x1": {"preferred-dataset-splits": 1, "active-chunks-per-dimension": 1, "impl": "ring"},
        "hd_direct_8x1": {
            "preferred-dataset-splits": 8,
            "active-chunks-per-dimension": 1,
            "impl": "halvingDoubling",
        },
    }
    paths = []
    for label, variant in variants.items():
        data = dict(base)
        impl = variant["impl"]
        data["preferred-dataset-splits"] = variant["preferred-dataset-splits"]
        data["active-chunks-per-dimension"] = variant["active-chunks-per-dimension"]
        for key in ("all-reduce", "all-gather", "reduce-scatter"):
            data[f"{key}-implementation"] = [impl] * dims
        data["all-to-all-implementation"] = ["direct" if impl != "ring" else "ring"] * dims
        path = work / f"system_{label}_{dims}d.json"
        path.write_text(json.dumps(data, indent=1))
        paths.append(path)
    return paths


def real_finish(case: Case, binary: Path, work: Path) -> list[int] | str:
    """Per-rank finish (ns) of the real binary on the case's original files, or why it failed."""
    memory = work / "memory.json"
    memory.write_text('{"memory-type": "NO_MEMORY_EXPANSION"}')
    argv = [
        str(binary),
        f"--workload-configuration={case.workload}",
        f"--system-configuration={case.system}",
        f"--remote-memory-configuration={memory}",
        f"--network-configuration={case.network}",
        f"--comm-group-configuration={case.comm_groups or 'empty'}",
    ]
    with tempfile.TemporaryDirectory(dir=work) as cwd:
        done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=1800)
    found = {int(r): int(c) for r, c in FINISHED.findall(done.stdout)}
    if not found:
        return f"no finish lines (exit {done.returncode})"
    return [found[r] for r in sorted(found)]


def embedded_finish(case: Case, work: Path) -> tuple[list[int], str]:
    out = work / re.sub(r"[^A-Za-z0-9_.-]+", "_", case.name)
    files = StudyFiles(case.workload, case.system, case.network, comm_groups=case.comm_groups)
    import_study(files, out, force=True)
    result = execute(out, timeline="none")
    notes = "; ".join(w for w in result.warnings if w.startswith("approximation"))
    return [round(r.finish_us * 1000) for r in result.ranks], notes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bin-dir", type=Path, required=True)
    parser.add_argument("--astra-sim-src", type=Path, required=True)
    parser.add_argument("--stg", type=Path, nargs="*", default=[], help="STG output directories")
    parser.add_argument("--only", help="cases whose name contains this")
    parser.add_argument("--keep", type=Path, help="keep the run directories here")
    args = parser.parse_args()
    binary = args.bin_dir / "AstraSim_Analytical_Congestion_Unaware"
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        cases = example_cases(args.astra_sim_src, work)
        for directory in args.stg:
            cases += stg_cases(directory, work)
        worst, count = 0.0, 0
        print(f"{'case':78s} {'real (us)':>12s} {'embedded':>12s} {'diff':>8s} {'rank max':>9s}")
        for case in cases:
            if args.only and args.only not in case.name:
                continue
            real = real_finish(case, binary, work)
            if isinstance(real, str):
                print(f"{case.name:78s} real ASTRA-sim failed: {real}")
                continue
            ours, notes = embedded_finish(case, work)
            diff = (max(ours) - max(real)) / max(real)
            per_rank = max(abs(a - b) / max(b, 1) for a, b in zip(ours, real, strict=True))
            worst, count = max(worst, abs(diff)), count + 1
            flag = "" if abs(diff) <= TARGET else "  > 2 %"
            times = f"{max(real) / 1e3:12.3f} {max(ours) / 1e3:12.3f}"
            extra = f"  [{notes}]" if notes else ""
            print(f"{case.name:78s} {times} {diff:+8.3%} {per_rank:9.3%}{flag}{extra}")
        print(f"{count} cases; largest iteration-time difference {worst:.3%} (target {TARGET:.0%})")
        if math.isnan(worst):
            raise SystemExit(1)


if __name__ == "__main__":
    main()
