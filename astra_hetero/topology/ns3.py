"""Render the cluster graph as the input files of ASTRA-sim's ns-3 backend (RDMA, qbb, DCQCN).

Every path written into `ns3/config.txt` is relative to the run directory: the ASTRA-sim driver runs
ns-3 with the run directory as its working directory (the config format has no comments to say so),
so the directory can move into a container or to another machine. ns-3 opens its output files
without creating directories, so they go into `ns3/`, which exists once the topology is published.

Choices that keep the simulator healthy and DCQCN meaningful:
- CC_MODE 1 (DCQCN) with the spec's parameters; with DCQCN disabled, mode 12, a value the RDMA stack
  has no congestion-control handler for (flows then run at line rate under PFC only), which is what
  ASTRA-sim's own sample config does.
- HAS_WIN 0: RoCE NICs run DCQCN without a sending window; with a one-BDP window, queues rarely build
  and DCQCN almost never acts (the reference measurements saw it change results only without one).
- One KMIN/KMAX/PMAX entry for every link rate in the topology (ns-3 aborts on a missing rate).
- Error rate 0 unless the spec says otherwise (a non-zero rate is known to hang the backend).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import jinja2
import networkx as nx

from astra_hetero import rundir
from astra_hetero.errors import SpecError
from astra_hetero.spec.schema import NetworkSpec
from astra_hetero.topology.cluster import gpu_ids, switch_ids
from astra_hetero.units import format_delay_ns, format_rate_gbps

NS3_FLOW = "ns3/flow.txt"
NS3_TRACE = "ns3/trace.txt"
# What ns-3 writes as it runs (results, not inputs: a rerun never carries them over).
NS3_OUTPUTS = dict(
    zip(("trace_output", "fct_output", "pfc_output", "qlen_output"), rundir.NS3_RUN_OUTPUTS, strict=True)
)
CC_MODE_DCQCN = 1
CC_MODE_NONE = 12

# ECN defaults: the DCQCN reference setup marks from 100 KB to 400 KB at 25 Gbit/s; thresholds grow
# with the rate (4 KB per Gbit/s for KMIN, KMAX = 4 x KMIN) until KMAX reaches a tenth of the switch
# buffer, so marking starts well before PFC. At 32 MB this gives ASTRA-sim's sample 800/3200 KB at
# 400 Gbit/s and above.
KMIN_KB_PER_GBPS = 4.0
KMAX_OVER_KMIN = 4.0
KMAX_BUFFER_FRACTION = 0.1
DEFAULT_PMAX = 0.2


@dataclass(frozen=True)
class EcnEntry:
    rate_bps: int
    kmin_kb: float
    kmax_kb: float
    pmax: float


@cache
def _templates() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("astra_hetero.topology", "templates"),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )


def render(template: str, **context: object) -> str:
    return _templates().get_template(template).render(**context)


def rate_bps(rate_gbps: float) -> int:
    """The bit rate ns-3 reads back from `format_rate_gbps`; ECN maps are keyed by it."""
    return round(rate_gbps * 1e9)


def _number(value: float) -> str:
    if not math.isfinite(value):  # a bug guard: the spec's types admit only finite numbers
        raise ValueError(f"refusing to write the non-finite number {value!r} into an ns-3 input")
    return f"{value:.10g}"


def ecn_entries(rates_gbps: set[float], network: NetworkSpec) -> list[EcnEntry]:
    """One entry per link rate: the spec's override if given, otherwise the scaled default."""
    known = {rate_bps(r) for r in rates_gbps}
    for rate in network.ns3.ecn:
        if rate_bps(rate) not in known:
            present = ", ".join(f"{r:g}" for r in sorted(rates_gbps))
            raise SpecError(
                f"network.ns3.ecn.{rate:g}", f"no link runs at {rate:g} Gbit/s; rates present: {present}"
            )
    overrides = {rate_bps(r): t for r, t in network.ns3.ecn.items()}
    cap_kb = KMAX_BUFFER_FRACTION * network.ns3.buffer_size_mb * 1000
    entries = []
    for rate in sorted(rates_gbps):
        key = rate_bps(rate)
        if key in overrides:
            t = overrides[key]
            entries.append(EcnEntry(key, t.kmin_kb, t.kmax_kb, t.pmax))
            continue
        kmin = KMIN_KB_PER_GBPS * rate
        scale = min(1.0, cap_kb / (KMAX_OVER_KMIN * kmin))
        entries.append(EcnEntry(key, round(kmin * scale), round(KMAX_OVER_KMIN * kmin * scale), DEFAULT_PMAX))
    return entries


def _ordered_edges(graph: nx.Graph) -> list[tuple[int, int, dict]]:
    """Edges in the order topology.txt lists them (by their lower, then higher, node id)."""
    edges = [(u, v, attrs) if u < v else (v, u, attrs) for u, v, attrs in graph.edges(data=True)]
    edges.sort(key=lambda e: (e[0], e[1]))
    return edges


def topology_text(graph: nx.Graph, network: NetworkSpec, edges: list | None = None) -> str:
    """ns-3's topology file: node, switch and link counts, the switch ids, then a line per link.
    Formatted directly (a template loop costs seconds for the 400,000 links of 131,072 GPUs); each
    distinct rate and delay is formatted once."""
    gpus = gpu_ids(graph)
    if gpus != list(range(len(gpus))):
        raise ValueError("GPU node ids must be 0..N-1 (they are ASTRA-sim's NPU ids)")
    error_rate = _number(network.ns3.link_error_rate)
    suffixes: dict[tuple[float, float], str] = {}
    lines = []
    for u, v, attrs in edges if edges is not None else _ordered_edges(graph):
        key = (attrs["rate_gbps"], attrs["latency_ns"])
        suffix = suffixes.get(key)
        if suffix is None:
            suffix = suffixes[key] = f"{format_rate_gbps(key[0])} {format_delay_ns(key[1])} {error_rate}\n"
        lines.append(f"{u} {v} {suffix}")
    switches = switch_ids(graph)
    head = f"{graph.number_of_nodes()} {len(switches)} {len(lines)}\n{' '.join(map(str, switches))}\n"
    return head + "".join(lines)


def config_text(graph: nx.Graph, network: NetworkSpec) -> str:
    dcqcn = network.dcqcn
    rates = {rate for _, _, rate in graph.edges(data="rate_gbps")}
    return render(
        "config.txt.j2",
        packet_payload_bytes=network.ns3.packet_payload_bytes,
        buffer_size_mb=network.ns3.buffer_size_mb,
        paths={"topology": rundir.NS3_TOPOLOGY, "flow": NS3_FLOW, "trace": NS3_TRACE, **NS3_OUTPUTS},
        cc_mode=CC_MODE_DCQCN if dcqcn.enabled else CC_MODE_NONE,
        dcqcn={
            "alpha_resume_interval_us": _number(dcqcn.alpha_resume_interval_us),
            "rate_decrease_interval_us": _number(dcqcn.rate_decrease_interval_us),
            "clamp_target_rate": int(dcqcn.clamp_target_rate),
            "rp_timer_us": _number(dcqcn.rp_timer_us),
            "ewma_gain": _number(dcqcn.ewma_gain),
            "fast_recovery_times": dcqcn.fast_recovery_times,
            "rate_ai_mbps": _number(dcqcn.rate_ai_mbps),
            "rate_hai_mbps": _number(dcqcn.rate_hai_mbps),
            "min_rate_mbps": _number(dcqcn.min_rate_mbps),
        },
        error_rate=_number(network.ns3.link_error_rate),
        has_window=0,
        enable_trace=int(network.ns3.enable_trace),
        ecn=[
            {
                "rate_bps": e.rate_bps,
                "kmin_kb": _number(e.kmin_kb),
                "kmax_kb": _number(e.kmax_kb),
                "pmax": _number(e.pmax),
            }
            for e in ecn_entries(rates, network)
        ],
    )


def link_kinds_text(graph: nx.Graph, edges: list | None = None) -> str:
    """The kind of every topology.txt link, line by line: the embedded engine's NCCL model prices a
    link by its kind (ns-3 reads rates and delays only). `edges`: `_ordered_edges(graph)` if known."""
    kinds = [attrs["kind"] for _, _, attrs in (edges if edges is not None else _ordered_edges(graph))]
    return json.dumps({"format": "astra-hetero/link-kinds@1", "kinds": kinds}) + "\n"


def trace_text(graph: nx.Graph, network: NetworkSpec) -> str:
    """Nodes whose packet events ns-3 records: all NPUs when tracing is on, none otherwise."""
    nodes = gpu_ids(graph) if network.ns3.enable_trace else []
    return f"{len(nodes)}\n" + (" ".join(map(str, nodes)) + "\n" if nodes else "")


def write_ns3(graph: nx.Graph, network: NetworkSpec, root: Path) -> None:
    """Write the ns-3 inputs under `root` (a staging run directory)."""
    (root / rundir.NS3_DIR).mkdir(parents=True, exist_ok=True)
    edges = _ordered_edges(graph)
    files = {
        rundir.NS3_TOPOLOGY: topology_text(graph, network, edges),
        rundir.NS3_CONFIG: config_text(graph, network),
        NS3_FLOW: "0\n",
        NS3_TRACE: trace_text(graph, network),
        rundir.NS3_LINK_KINDS: link_kinds_text(graph, edges),
        rundir.NS3_LOGICAL_TOPOLOGY: json.dumps({"logical-dims": [str(len(gpu_ids(graph)))]}, indent=4)
        + "\n",
    }
    for relative, text in files.items():
        (root / relative).write_text(text)
