"""Cost of dynamics (issue 10): the embedded engine on one run directory, static against with events.

GPT-3 175B on 64 H100 + 64 A100 (examples/gpt3_175b_128gpu_mixed.yaml) is built once per variant; the
variants differ only in `dynamics.json`. Each figure is the best CPU time over `--repeat` rounds of
in-process runs of the embedded backend (no trace.json); a round runs every variant once, so that a
change in the shared machine's load hits all of them alike.

Two prices are printed per event. An event that touches some GPUs or links makes them differ from
their peers, so folding keeps them apart (a device slowdown splits the ranks it touches, a link
event or background flow the links it changes and whoever loads them; jitter, a draw per rank and
kernel, simulates rank by rank): more rank classes to simulate, which the same directory without the
event would not need. That price is the asymmetry's. The dynamic engine's own price (timed events,
re-solving rates, stretching kernels, iterations) is measured against the static engine run on the
*same classes* (the folding the event asks for, with no event). Target: ≤ 10 % extra over that.

    python benchmarks/dynamics.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import gc
import tempfile
import time
from pathlib import Path

from astra_hetero.backends.embedded.backend import EmbeddedBackend
from astra_hetero.backends.embedded.dynamic_run import fold_for_events
from astra_hetero.backends.embedded.engine.simulated import setup
from astra_hetero.backends.embedded.engine.static import Engine
from astra_hetero.backends.embedded.output import run_output
from astra_hetero.backends.embedded.rundir.dynamics import read_dynamics
from astra_hetero.backends.embedded.rundir.reader import read_run_dir
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


def cpu_run(run_dir: Path) -> tuple[float, float]:
    """CPU seconds of one run, and its mean iteration time (ms)."""
    started = time.process_time()
    result = EmbeddedBackend(timeline=False).run(run_dir).result
    return time.process_time() - started, result.iteration_time_us / 1000


def cpu_same_classes(run_dir: Path) -> float:
    """CPU seconds of the static engine on the classes the directory's events ask for, no event run."""
    started = time.process_time()
    gc.disable()  # as the backend's own run does
    sim = read_run_dir(run_dir)
    dynamics = read_dynamics(run_dir, sim.num_ranks, sim.topology.num_links // 2)
    folding = fold_for_events(sim, dynamics) if not dynamics.of_kind("jitter") else None
    workload, comm, simulated = setup(sim, folding)
    outcome = Engine(workload, comm, sim.max_comm_in_flight).run()
    run_output(sim, simulated, outcome, 0.0, timeline=False)
    gc.enable()
    return time.process_time() - started


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
        # rounds over every variant, so that a change in the machine's load hits them all alike
        best = dict.fromkeys(runs, float("inf"))
        same = dict.fromkeys(runs, float("inf"))
        ms: dict[str, float] = {}
        for _ in range(args.repeat):
            for name, (run_dir, _fold) in runs.items():
                cpu, ms[name] = cpu_run(run_dir)
                best[name] = min(best[name], cpu)
                same[name] = min(same[name], cpu_same_classes(run_dir))
        static_cpu = best["static"]
        print(f"{SPEC.name}: best of {args.repeat} rounds, CPU seconds (shared machine: compare ratios)")
        print(f"  static, folded {static_cpu:6.2f} s   iteration {ms['static']:9.1f} ms")
        print(f"  {'event':52s} {'dynamic':>8s} {'classes':>8s} {'engine':>8s} {'all':>7s}   iteration")
        for name, (_events, iterations) in VARIANTS.items():
            if name == "static":
                continue
            cpu, classes = best[name], same[name] * iterations
            print(
                f"  {name:52s} {cpu:7.2f}s {classes:7.2f}s {cpu / classes - 1:+8.1%} "
                f"{cpu / (static_cpu * iterations):6.2f}x   {ms[name]:9.1f} ms"
            )
        print(
            "  dynamic: CPU of the run with its events; classes: the static engine on the same rank "
            "classes (x iterations);\n  engine: the dynamic engine's own extra over that (target <= 10 %); "
            "all: against the folded static run (x iterations)"
        )


if __name__ == "__main__":
    main()
