"""One line per ASTRA-sim input that had to flatten a heterogeneous cluster, for results and reports.

ASTRA-sim describes the network of its analytical backends with one bandwidth and one latency per
dimension for every NPU, and its system file (which prices the reductions inside collectives by the
local memory bandwidth) is one for all NPUs of every backend. Where node groups differ we write the
bottleneck figures (see analytical.py); the lines written here say so, with the figures used and the
per-group figures they replace, so that a result is never read as a per-link simulation when it is not.

The lines are stored in the run directory (`rundir.APPROXIMATIONS`), keyed by the network file each
binary reads, and the ASTRA-sim backends copy the line of the file they ran into the result's warnings.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import networkx as nx

from astra_hetero import rundir
from astra_hetero.spec.schema import Spec
from astra_hetero.topology.analytical import oversubscription
from astra_hetero.units import gbps_to_gbytes_per_s


@dataclass(frozen=True)
class GroupFigures:
    """What one node group would need the simulator to use, per GPU."""

    name: str
    fabric_gbytes_per_s: float
    scale_out_gbytes_per_s: float  # NIC share per GPU, divided by the worst leaf oversubscription
    scale_out_same_rail_gbytes_per_s: float  # the same without the spines (rail_optimized dimension 1)
    hbm_tbps: float


def group_figures(spec: Spec, graph: nx.Graph) -> list[GroupFigures]:
    ratios = oversubscription(graph)
    figures = []
    for group, name in zip(spec.cluster.node_groups, spec.cluster.group_names, strict=True):
        per_gpu = gbps_to_gbytes_per_s(group.nic.gbps * group.nics_per_node / group.gpus_per_node)
        figures.append(
            GroupFigures(
                name=name,
                fabric_gbytes_per_s=group.intra_node_fabric.gbytes_per_s,
                scale_out_gbytes_per_s=per_gpu / ratios.get(name, 1.0),
                scale_out_same_rail_gbytes_per_s=per_gpu,
                hbm_tbps=group.gpu.hbm_tbps * group.gpu.compute_multiplier,
            )
        )
    return figures


def approximation_notes(spec: Spec, graph: nx.Graph, network_dims: int) -> dict[str, str]:
    """{network file: one line} for every ASTRA-sim input that flattens a difference between NPUs.

    `network_dims` is the number of dimensions written to `analytical/network.yml` (2 when the
    cluster splits into intra- and inter-node dimensions, else 1).
    """
    groups = group_figures(spec, graph)
    multi_node = spec.cluster.num_scale_up_domains > 1  # a domain's nodes share one fabric
    memory = _spread("HBM for reductions", groups, lambda g: g.hbm_tbps, "TB/s")
    fabric = _spread("intra-node", groups, lambda g: g.fabric_gbytes_per_s, "GB/s per GPU")
    # Dimension 1 joins GPUs of one local index: on rails that crosses no spine.
    same_rail = spec.network.topology == "rail_optimized"
    inter = _spread(
        "scale-out",
        groups,
        lambda g: g.scale_out_same_rail_gbytes_per_s if same_rail else g.scale_out_gbytes_per_s,
        "GB/s per GPU",
    )
    flat_inter = _spread("scale-out", groups, lambda g: g.scale_out_gbytes_per_s, "GB/s per GPU")
    flat = None
    if multi_node and any(group.scale_up_gpus > 1 for group in spec.cluster.node_groups):
        slowest = min(g.scale_out_gbytes_per_s for g in groups)
        flat = (
            f"one network dimension, so intra-node traffic ran at {slowest:g} GB/s per GPU "
            f"(fabric: {_by_group(groups, lambda g: g.fabric_gbytes_per_s)} GB/s)"
        )
    if not multi_node:
        multi, one_dim = [fabric], [fabric]
    else:
        multi = [fabric, inter] if network_dims == 2 else [flat, flat_inter]
        one_dim = [flat, flat_inter]
    notes = {
        rundir.ANALYTICAL_NETWORK: _line(multi, memory),
        rundir.ANALYTICAL_NETWORK_1D: _line(one_dim, memory),
        rundir.NS3_CONFIG: _line([], memory),
    }
    return {key: value for key, value in notes.items() if value}


def _line(network: list[str | None], memory: str | None) -> str | None:
    """'ASTRA-sim simplified this cluster: <flattening>; one figure for every NPU, ...' or None."""
    flattening = [part for part in network if part and part.startswith("one network dimension")]
    spreads = [part for part in [*network, memory] if part and part not in flattening]
    clauses = flattening + (
        ["one figure for every NPU, the bottleneck: " + ", ".join(spreads)] if spreads else []
    )
    if not clauses:
        return None
    return (
        "ASTRA-sim simplified this cluster: "
        + "; ".join(clauses)
        + ". The embedded backend models each link and GPU."
    )


def _spread(
    label: str, groups: list[GroupFigures], value: Callable[[GroupFigures], float], unit: str
) -> str | None:
    """'label <minimum> unit (group figures)' when the node groups differ, else None."""
    if len({round(value(g), 6) for g in groups}) < 2:
        return None
    return f"{label} {min(value(g) for g in groups):g} {unit} ({_by_group(groups, value)})"


def _by_group(groups: list[GroupFigures], value: Callable[[GroupFigures], float]) -> str:
    return ", ".join(f"{g.name} {value(g):g}" for g in groups)
