"""What ns-3 writes beside ASTRA-sim's log, read into figures of packet-level effects.

- `ns3/fct.txt`, one line per flow (a message between two NPUs) as it completes:
  `sip dip sport dport size_bytes start_ns fct_ns standalone_fct_ns`, where the standalone time is the
  base RTT plus the flow's bytes with headers at the path's bottleneck rate. Their ratio (the slowdown)
  is what sharing, queueing and congestion control cost that flow.
- `ns3/pfc.txt`, one line per PFC frame a device received: `time_ns node node_type if_index type`,
  type 1 a pause, 0 a resume; node_type 0 a host NIC, 1 a switch.
(Formats: astra-sim's ns-3 frontend `qp_finish_print_log`, ns-3 `common.h` `get_pfc`.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from astra_hetero.errors import RunDirError
from astra_hetero.topology.ns3 import NS3_OUTPUTS

FCT_FILE = NS3_OUTPUTS["fct_output"]
PFC_FILE = NS3_OUTPUTS["pfc_output"]


@dataclass(frozen=True)
class Ns3FlowStats:
    num_flows: int
    total_bytes: int
    mean_slowdown: float  # flow completion time over its standalone time, byte-weighted mean
    p99_slowdown: float
    pfc_pauses: int  # pause frames received by any device

    def as_columns(self) -> dict[str, float]:
        return {
            "ns3_flows": self.num_flows,
            "ns3_fct_slowdown_mean": self.mean_slowdown,
            "ns3_fct_slowdown_p99": self.p99_slowdown,
            "ns3_pfc_pauses": self.pfc_pauses,
        }


def read_ns3_outputs(run_dir: Path) -> Ns3FlowStats | None:
    """The run's flow and PFC figures; None when ns-3 wrote no flow file (another backend ran)."""
    fct = Path(run_dir) / FCT_FILE
    if not fct.is_file():
        return None
    flows = _flows(fct)
    pfc = Path(run_dir) / PFC_FILE
    pauses = _pauses(pfc) if pfc.is_file() else 0
    total = sum(size for size, _ in flows)
    slowdowns = sorted(slowdown for _, slowdown in flows)
    mean = sum(size * slowdown for size, slowdown in flows) / total if total else math.nan
    p99 = slowdowns[min(len(slowdowns) - 1, math.ceil(0.99 * len(slowdowns)) - 1)] if slowdowns else math.nan
    return Ns3FlowStats(len(flows), total, mean, p99, pauses)


def _flows(path: Path) -> list[tuple[int, float]]:
    """(bytes, slowdown) per flow."""
    flows = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        fields = line.split()
        if not fields:
            continue
        try:
            size, fct_ns, standalone_ns = int(fields[4]), int(fields[6]), int(fields[7])
        except (IndexError, ValueError):
            raise RunDirError(
                f"{path}:{number}: expected 'sip dip sport dport size start fct standalone'"
            ) from None
        flows.append((size, fct_ns / standalone_ns if standalone_ns > 0 else math.nan))
    return flows


def _pauses(path: Path) -> int:
    count = 0
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 5 or fields[4] not in ("0", "1"):
            raise RunDirError(f"{path}:{number}: expected 'time node node_type if_index type(0|1)'")
        count += fields[4] == "1"
    return count
