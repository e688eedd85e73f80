"""The cluster graph of an analytical network, written as an ns-3 topology file (`ns3/topology.txt`).

NPUs keep ASTRA-sim's numbering (node i is NPU i). Each dimension joins the NPUs that differ only in
its coordinate (a *line*): a `Switch` line through one switch node, `FullyConnected` by a link between
every pair, a `Ring` by a link between neighbours (and the last back to the first). Every link runs at
the dimension's bandwidth — the file's figure read as ASTRA-sim reads it, GiB/s — with its latency,
scaled by an overlay's per-NPU factor (the slower of its two NPUs). The ASTRA-sim model of the
embedded engine prices messages on the dimensions themselves; this graph is what the flow-level
models (`--collective-model nccl`) and ns-3 see.
"""

from __future__ import annotations

from astra_hetero.astrasim_inputs.analytical import AnalyticalNetwork
from astra_hetero.units import format_delay_ns, format_rate_gbps

BITS_PER_GIB = (1 << 30) * 8 / 1e9  # Gbit/s per GiB/s


def link_kinds(network: AnalyticalNetwork) -> list[str]:
    """Each link line's kind, for the NCCL model: ASTRA-sim's dimension 0 of a multi-dimensional
    network is its scale-up fabric (NVLink), every other dimension the scale-out network (NIC). An
    assumption of the network files' convention, which a run with that model states."""
    kinds = []
    for d, dim in enumerate(network.dims):
        kind = "nvlink" if d == 0 and len(network.dims) > 1 else "nic"
        lines = network.num_npus // dim.npus
        per_line = {"Switch": dim.npus, "FullyConnected": dim.npus * (dim.npus - 1) // 2}.get(
            dim.block, dim.npus if dim.npus > 2 else 1
        )
        kinds += [kind] * (lines * per_line)
    return kinds


def topology_text(network: AnalyticalNetwork, scales: tuple[tuple[float, ...], ...] | None = None) -> str:
    n = network.num_npus
    switches: list[int] = []
    links: list[tuple[int, int, float, float]] = []  # src, dst, Gbit/s, delay ns
    next_node = n
    stride = 1
    for d, dim in enumerate(network.dims):
        gbps = dim.bandwidth * BITS_PER_GIB
        for base in range(n):
            if base // stride % dim.npus:
                continue
            line = [base + k * stride for k in range(dim.npus)]

            def rate(a: int, b: int, d: int = d, gbps: float = gbps) -> float:
                return gbps * (min(scales[a][d], scales[b][d]) if scales else 1.0)

            if dim.block == "Switch":
                switch, next_node = next_node, next_node + 1
                switches.append(switch)
                links += [(npu, switch, rate(npu, npu), dim.latency_ns) for npu in line]
            elif dim.block == "FullyConnected":
                links += [
                    (a, b, rate(a, b), dim.latency_ns) for i, a in enumerate(line) for b in line[i + 1 :]
                ]
            else:
                pairs = list(zip(line, line[1:] + line[:1], strict=True)) if dim.npus > 2 else [tuple(line)]
                links += [(a, b, rate(a, b), dim.latency_ns) for a, b in pairs]
        stride *= dim.npus
    header = f"{next_node} {len(switches)} {len(links)}\n{' '.join(map(str, switches))}\n"
    body = "".join(
        f"{a} {b} {format_rate_gbps(round(g, 6))} {format_delay_ns(delay)} 0\n" for a, b, g, delay in links
    )
    return header + body
