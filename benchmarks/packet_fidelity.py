"""The embedded flow model against ns-3 (DCQCN) on the packet-fidelity study's clusters.

Target (issue 13): the embedded engine within 5 % of ns-3 on every point, each ns-3 run within 15 min
on 2 cores. Runs `examples/studies/packet_fidelity.yaml` (resumable: points complete in OUT are not
run again) with ns-3 from --bin-dir / $ASTRA_SIM_BIN_DIR, then prints per cluster the ns-3 time, the
embedded engine's time with ideal links and with ns-3's packet overheads (`link_efficiency:
ns3_packets`), their ratios to ns-3, ns-3's wall time and what its flow and PFC files say.

    python benchmarks/packet_fidelity.py --bin-dir /work/astra-sim/bin -o runs/packet-fidelity --jobs 2
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STUDY = ROOT / "examples/studies/packet_fidelity.yaml"
TARGET = 0.05
NS3_LIMIT_S = 15 * 60


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin-dir", default=os.environ.get("ASTRA_SIM_BIN_DIR"))
    parser.add_argument("-o", "--output", type=Path, default=ROOT / "runs/packet-fidelity")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--reduced", action="store_true")
    args = parser.parse_args()
    if not args.bin_dir:
        parser.error("give --bin-dir or set ASTRA_SIM_BIN_DIR (the ns-3 binary is needed)")

    from astra_hetero.studies import build_table, load_study, run_study, write_report

    study = load_study(STUDY, reduced=args.reduced)
    outcomes = run_study(
        study,
        args.output,
        "ns3",
        {"bin_dir": args.bin_dir, "timeout_s": study.file.timeout_s},
        jobs=args.jobs,
    )
    table = build_table(study, outcomes)
    write_report(table, args.output, STUDY)
    rows = {(r.levels["cluster"], r.levels["simulator"]): r for r in table.rows}
    print(
        f"{'cluster':18} {'ns-3 (ms)':>10} {'ideal/ns-3':>11} {'packets/ns-3':>13} {'ns-3 wall (s)':>14} "
        f"{'FCT slowdown':>13} {'PFC pauses':>11}"
    )
    worst = {"flow-ideal": 0.0, "flow-packets": 0.0}
    for cluster in study.axis("cluster").labels:
        ns3 = rows[(cluster, "packet-level")]
        if not ns3.ok:
            print(f"{cluster:18} failed: {ns3.error}")
            continue
        reference = ns3.values["iteration_time_us"]
        ratios = {}
        for simulator in worst:
            row = rows[(cluster, simulator)]
            ratios[simulator] = row.values["iteration_time_us"] / reference if row.ok else float("nan")
            worst[simulator] = max(worst[simulator], abs(ratios[simulator] - 1))
        wall, slowdown, pauses = (ns3.values.get(key, float("nan")) for key in (
            "wall_time_s", "ns3_fct_slowdown_mean", "ns3_pfc_pauses"))
        print(f"{cluster:18} {reference / 1e3:10.3f} {ratios['flow-ideal']:11.4f} "
              f"{ratios['flow-packets']:13.4f} {wall:14.1f} {slowdown:13.3f} {pauses:11.0f}")
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
