"""NCCL's cost-model constants (`nccl.yaml`, every number with its source) as one frozen record."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import yaml

ALGORITHMS = ("ring", "tree", "nvls", "nvls_tree")
PROTOCOLS = ("ll", "ll128", "simple")
LATENCY_CLASSES = ("nvlink", "pci", "net")


@dataclass(frozen=True)
class LinkKind:
    latency_class: str  # one of LATENCY_CLASSES
    efficiency: float  # achievable fraction of the link's rate
    efficiency_by_architecture: dict[str, float]

    def efficiency_for(self, architecture: str | None) -> float:
        return self.efficiency_by_architecture.get(architecture or "", self.efficiency)


@dataclass(frozen=True)
class NcclConstants:
    compute_capability: dict[str, int]  # architecture -> compute capability
    link_kinds: dict[str, LinkKind]
    base_latency_us: dict[str, dict[str, float]]  # algorithm -> protocol -> us
    hop_latency_us: dict[str, dict[str, dict[str, float]]]  # latency class -> algorithm -> protocol -> us
    net_overhead_us: float
    net_overhead_simple_factor: float
    ring_plateau_factor: dict[str, float]
    ring_ll_factor: float
    ring_ll128_factor: float
    tree_allreduce_factor: float
    tree_ll_factor: float
    tree_ll128_factor_single_node: float
    tree_ll128_factor_multi_node: float
    ll_max_busbw_gbs: dict[str, Any]
    nvls_efficiency: dict[str, float]  # table row -> fraction
    tree_correction: dict[str, tuple[float, ...]]  # protocol -> factor per log2(bytes / 64)
    p2p_ll_threshold_bytes: int
    # measured corrections: architecture row -> latency class -> algorithm -> protocol -> us
    hop_latency_us_by_architecture: dict[str, dict[str, dict[str, dict[str, float]]]]
    latency_floor_us: dict[str, float]  # scope (intra_node, inter_node) -> the least a collective takes

    def hop_us(self, latency_class: str, algorithm: str, protocol: str, row: str | None = None) -> float:
        """NCCL's per-step latency, or the measured one of architecture row `row` where there is one."""
        measured = self.hop_latency_us_by_architecture.get(row or "", {})
        found = measured.get(latency_class, {}).get(algorithm, {}).get(protocol)
        if found is not None:
            return float(found)
        return self.hop_latency_us.get(latency_class, {}).get(algorithm, {}).get(protocol, 0.0)

    def floor_us(self, num_nodes: int) -> float:
        """The measured least time of a collective inside one node or across several."""
        return float(self.latency_floor_us["intra_node" if num_nodes == 1 else "inter_node"])

    def link_kind(self, name: str) -> LinkKind:
        try:
            return self.link_kinds[name]
        except KeyError:
            raise KeyError(f"unknown link kind {name!r}; known: {', '.join(self.link_kinds)}") from None


def table_row(compute_capability: int) -> str:
    """NCCL's architecture row for a (minimum) compute capability."""
    if compute_capability >= 100:
        return "blackwell"
    if compute_capability >= 90:
        return "hopper"
    return "ampere" if compute_capability >= 80 else "volta"


@cache
def nccl_constants(measured: bool = True) -> NcclConstants:
    """nccl.yaml's constants; `measured=False` leaves out the measured corrections (per-architecture
    step latencies, latency floors): NCCL's own tuning model, number for number."""
    data = yaml.safe_load(resources.files("astra_hetero.comm").joinpath("nccl.yaml").read_text())
    if not measured:
        data["hop_latency_us_by_architecture"] = {}
        data["latency_floor_us"] = {"intra_node": 0.0, "inter_node": 0.0}
    kinds = {
        name: LinkKind(
            k["latency_class"], float(k["efficiency"]), dict(k.get("efficiency_by_architecture", {}))
        )
        for name, k in data.pop("link_kinds").items()
    }
    bad = sorted(n for n, k in kinds.items() if k.latency_class not in LATENCY_CLASSES)
    if bad:
        raise ValueError(f"nccl.yaml: link kinds {bad} need a latency_class in {LATENCY_CLASSES}")
    architectures = {name: int(a["compute_capability"]) for name, a in data.pop("architectures").items()}
    correction = {p: tuple(float(x) for x in v) for p, v in data.pop("tree_correction").items()}
    return NcclConstants(
        compute_capability=architectures, link_kinds=kinds, tree_correction=correction, **data
    )


def known_architectures() -> tuple[str, ...]:
    return tuple(nccl_constants().compute_capability)
