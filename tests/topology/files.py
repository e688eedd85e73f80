"""Readers for the rendered network files, written from the formats' descriptions (not our renderer)."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from astra_hetero.units import parse_delay_to_ns, parse_rate_to_gbps
from tests.conftest import TINY_MODEL


@dataclass(frozen=True)
class Ns3Topology:
    header: tuple[int, int, int]  # total nodes, switch count, link count
    switches: list[int]
    links: list[tuple[int, int, float, float, float]]  # src, dst, Gbit/s, ns, error rate


def read_topology(path: Path) -> Ns3Topology:
    lines = path.read_text().splitlines()
    total, num_switches, num_links = (int(x) for x in lines[0].split())
    links = []
    for line in lines[2:]:
        src, dst, rate, delay, error = line.split()
        links.append((int(src), int(dst), parse_rate_to_gbps(rate), parse_delay_to_ns(delay), float(error)))
    return Ns3Topology((total, num_switches, num_links), [int(x) for x in lines[1].split()], links)


def read_config(path: Path) -> dict[str, list[str]]:
    config = {}
    for line in path.read_text().splitlines():
        if line.strip():
            key, *values = line.split()
            config[key] = values
    return config


def read_map(values: list[str]) -> dict[int, float]:
    """`KMIN_MAP n rate value rate value ...` -> {rate_bps: value}; checks the count."""
    count = int(values[0])
    pairs = values[1:]
    assert len(pairs) == 2 * count, f"map announces {count} entries but holds {len(pairs) / 2}"
    return {int(pairs[i]): float(pairs[i + 1]) for i in range(0, len(pairs), 2)}


def with_workload(cluster_and_network: dict[str, Any]) -> dict[str, Any]:
    """A full spec around a cluster (and network) section: the tiny model, pure data parallelism."""
    groups = cluster_and_network["cluster"]["node_groups"]
    num_gpus = sum(g["count"] * g["gpus_per_node"] for g in groups)
    return {
        **copy.deepcopy(cluster_and_network),
        "model": copy.deepcopy(TINY_MODEL),
        "parallelism": {"tp": 1, "pp": 1, "dp": num_gpus, "global_batch_size": num_gpus},
    }
