"""Cluster topology: the spec as a graph, rendered for ns-3 and for ASTRA-sim's analytical backend."""

from __future__ import annotations

import json
from pathlib import Path

import networkx as nx

from astra_hetero import rundir
from astra_hetero.spec.schema import Spec
from astra_hetero.topology.analytical import write_analytical
from astra_hetero.topology.approximation import approximation_notes
from astra_hetero.topology.cluster import build_cluster_graph
from astra_hetero.topology.figures import Figures, check_connected, figures
from astra_hetero.topology.ns3 import write_ns3

__all__ = ["Figures", "build_cluster_graph", "checked_graph", "figures", "write_topology"]


def checked_graph(spec: Spec) -> nx.Graph:
    """The cluster graph, after checking that every GPU can reach every other one."""
    graph = build_cluster_graph(spec)
    check_connected(graph)
    return graph


def write_topology(spec: Spec, staging: Path, graph: nx.Graph | None = None) -> None:
    """Write `ns3/` and `analytical/` into `staging`; the caller publishes it (`outputs.publish`).

    `analytical/approximations.json` says, per network file, what ASTRA-sim could not be told about
    this cluster (empty for a homogeneous one): the ASTRA-sim backends copy it into their results.
    """
    graph = checked_graph(spec) if graph is None else graph
    write_ns3(graph, spec.network, Path(staging))
    network_dims = write_analytical(spec, graph, Path(staging))
    notes = approximation_notes(spec, graph, network_dims)
    (Path(staging) / rundir.APPROXIMATIONS).write_text(json.dumps(notes, indent=2) + "\n")
