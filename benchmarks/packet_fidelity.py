"""The embedded flow model against ns-3 (DCQCN) on the packet-fidelity study's clusters, and the
calibration of its step-down efficiency from one short ns-3 run.

Target (issue 13): the embedded engine within 5 % of ns-3 on every point, each ns-3 run within 15 min
on 2 cores. Runs `examples/studies/packet_fidelity.yaml` (resumable: points complete in OUT are not
run again) with ns-3 from --bin-dir / $ASTRA_SIM_BIN_DIR, then prints per cluster the ns-3 time, the
embedded engine's time with ideal links and with ns-3's packet overheads (`link_model:
ns3_packets`), their ratios to ns-3, ns-3's wall time and what its flow and PFC files say.

    python benchmarks/packet_fidelity.py --bin-dir /work/astra-sim/bin -o runs/packet-fidelity --jobs 2
    python benchmarks/packet_fidelity.py --embedded-only -o runs/packet-fidelity-embedded

Issue 20 adds the DCQCN fluid model (`link_model: dcqcn`) beside them, and its CPU time over the flow
model's (`ns3_packets`) on each cluster, best of three runs (target: at most 10x).

--calibrate instead runs one short ns-3 case that none of the study's clusters is: two single-GPU
nodes, an H100 at 400 Gbit/s and an A100 at 100 Gbit/s on different leaves of a 2:1 spine-leaf, the
study's model cut to one layer and one micro-batch, data parallel only, so the iteration is their
gradient all-reduce: one flow each way, the 400 Gbit/s sender's stepping down onto the 100 Gbit/s NIC.
It prints the `network.step_down_efficiency` for which the embedded engine (with `link_model:
ns3_packets`) matches ns-3 there, found by bisection.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STUDY = ROOT / "examples/studies/packet_fidelity.yaml"
TARGET = 0.05
NS3_LIMIT_S = 15 * 60


def calibration_spec() -> dict:
    import yaml

    base = yaml.safe_load(STUDY.read_text())["base"]
    return {
        **base,
        "name": "step-down-calibration",
        "cluster": {
            "node_groups": [
                {
                    "name": "h100",
                    "count": 1,
                    "gpus_per_node": 1,
                    "gpu": "h100-sxm",
                    "intra_node_fabric": "nvlink4",
                    "nic": 400,
                },
                {
                    "name": "a100",
                    "count": 1,
                    "gpus_per_node": 1,
                    "gpu": "a100-80",
                    "intra_node_fabric": "nvlink3",
                    "nic": 100,
                },
            ]
        },
        "parallelism": {"tp": 1, "pp": 1, "dp": 2, "micro_batch_size": 1, "global_batch_size": 2},
        "mapping": {},
        "network": {**base["network"], "link_model": "ns3_packets"},
        "scope": {"layers_per_stage": 1, "micro_batches_per_replica": 1},
    }


def calibrate(bin_dir: str, out: Path) -> None:
    import json
    import shutil
    import time

    from astra_hetero.backends.embedded.backend import EmbeddedBackend
    from astra_hetero.pipeline import build_run_dir, execute
    from astra_hetero.spec import parse_spec

    root = build_run_dir(parse_spec(calibration_spec()), out / "embedded").root
    ns3_dir = out / "ns3"
    shutil.rmtree(ns3_dir, ignore_errors=True)
    shutil.copytree(root, ns3_dir)
    started = time.perf_counter()
    ns3 = execute(ns3_dir, "ns3", timeline="none", bin_dir=bin_dir).iteration_time_us
    wall = time.perf_counter() - started
    manifest = json.loads((root / "manifest.json").read_text())

    def embedded(efficiency: float) -> float:
        (root / "manifest.json").write_text(json.dumps({**manifest, "step_down_efficiency": efficiency}))
        return EmbeddedBackend(timeline=False).run(root).result.iteration_time_us

    low, high = 0.05, 1.0
    if embedded(high) >= ns3:
        print(
            f"ns-3 {ns3:.1f} us is no slower than the embedded engine at efficiency 1 "
            f"({embedded(high):.1f} us): nothing to calibrate"
        )
        return
    for _ in range(30):
        middle = (low + high) / 2
        low, high = (middle, high) if embedded(middle) > ns3 else (low, middle)
    print(
        f"calibration case: ns-3 {ns3 / 1e3:.3f} ms ({wall:.0f} s wall); embedded with ideal step-downs "
        f"{embedded(1.0) / 1e3:.3f} ms; step_down_efficiency = {(low + high) / 2:.3f}"
    )


def cpu_seconds(run_dir: Path, repeats: int = 3) -> float:
    """The embedded engine's CPU time on a built run directory, best of `repeats` (load noise)."""
    import time

    from astra_hetero.backends.embedded.backend import EmbeddedBackend

    best = float("inf")
    for _ in range(repeats):
        started = time.process_time()
        EmbeddedBackend(timeline=False, workers=1).run(run_dir)
        best = min(best, time.process_time() - started)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin-dir", default=os.environ.get("ASTRA_SIM_BIN_DIR"))
    parser.add_argument("--docker", help="run ns-3 in this image (astra-hetero's Docker image)")
    parser.add_argument("-o", "--output", type=Path, default=ROOT / "runs/packet-fidelity")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--reduced", action="store_true")
    parser.add_argument("--calibrate", action="store_true", help="only calibrate step_down_efficiency")
    parser.add_argument(
        "--embedded-only", action="store_true", help="no ns-3: the embedded models and their CPU cost only"
    )
    args = parser.parse_args()
    if not (args.bin_dir or args.docker or args.embedded_only):
        parser.error("give --bin-dir, --docker or set ASTRA_SIM_BIN_DIR (ns-3 is needed), or --embedded-only")
    if args.calibrate:
        calibrate(args.bin_dir, args.output / "calibration")
        return 0

    import dataclasses

    from astra_hetero.studies import build_table, load_study, run_study, write_report

    study = load_study(STUDY, reduced=args.reduced)
    if args.embedded_only:
        study = dataclasses.replace(study, points=tuple(p for p in study.points if p.backend == "embedded"))
    options = {"bin_dir": args.bin_dir, "docker_image": args.docker, "timeout_s": study.file.timeout_s}
    outcomes = run_study(study, args.output, "ns3", options, jobs=args.jobs)
    table = build_table(study, outcomes)
    if not args.embedded_only:
        write_report(table, args.output, STUDY)
    rows = {(r.levels["cluster"], r.levels["simulator"]): r for r in table.rows}
    by_point = {(o.point.levels["cluster"], o.point.levels["simulator"]): o.run_dir for o in outcomes}
    models = ["flow-ideal", "flow-packets", "flow-calibrated", "flow-dcqcn"]
    print(
        f"{'cluster':18} {'ns-3 (ms)':>10} "
        + " ".join(f"{m + '/ns-3':>20}" for m in models)
        + f" {'dcqcn (ms)':>11} {'CPU dcqcn/flow':>15} {'ns-3 wall (s)':>14} {'PFC pauses':>11}"
    )
    worst: dict[str, float] = {}
    cpu_ratios = []
    for cluster in study.axis("cluster").labels:
        ns3 = rows.get((cluster, "packet-level"))
        reference = ns3.values["iteration_time_us"] if ns3 is not None and ns3.ok else float("nan")
        ratios = {}
        for simulator in models:
            row = rows[(cluster, simulator)]
            ratios[simulator] = row.values["iteration_time_us"] / reference if row.ok else float("nan")
            if ratios[simulator] == ratios[simulator]:
                worst[simulator] = max(worst.get(simulator, 0.0), abs(ratios[simulator] - 1))
        flow_cpu = cpu_seconds(by_point[(cluster, "flow-packets")])
        dcqcn_cpu = cpu_seconds(by_point[(cluster, "flow-dcqcn")])
        cpu_ratios.append(dcqcn_cpu / flow_cpu)
        wall, pauses = (
            ns3.values.get(key, float("nan")) if ns3 is not None and ns3.ok else float("nan")
            for key in ("wall_time_s", "ns3_pfc_pauses")
        )
        dcqcn_ms = rows[(cluster, "flow-dcqcn")].values.get("iteration_time_us", float("nan")) / 1e3
        print(
            f"{cluster:18} {reference / 1e3:10.3f} "
            + " ".join(f"{ratios[m]:20.4f}" for m in models)
            + f" {dcqcn_ms:11.3f} {cpu_ratios[-1]:15.2f} {wall:14.1f} {pauses:11.0f}"
        )
    low, high = min(cpu_ratios), max(cpu_ratios)
    print(f"DCQCN fluid model CPU over the flow model: {low:.2f}-{high:.2f}x (target <= 10x)")
    if args.embedded_only:
        return 0
    if not worst:
        print("no ns-3 run succeeded: nothing compared")
    for simulator, gap in worst.items():
        verdict = "met" if gap <= TARGET else "missed"
        print(f"{simulator}: largest gap to ns-3 {gap:.2%} (target {TARGET:.0%}): {verdict}")
    slowest = max(
        (r.values.get("wall_time_s", 0.0) for r in table.rows if r.backend == "ns3" and r.ok), default=0.0
    )
    verdict = "met" if slowest <= NS3_LIMIT_S else "missed"
    print(f"slowest ns-3 run: {slowest:.0f} s (bound {NS3_LIMIT_S} s): {verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
