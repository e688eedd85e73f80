"""A picture of the cluster graph, links coloured by kind (matplotlib is imported only when drawing)."""

from __future__ import annotations

from pathlib import Path

import networkx as nx

# Drawing tiers, bottom to top: GPUs, then what sits inside a node, then the network.
LAYERS = {"gpu": 0, "intra": 1, "nic": 2, "leaf": 3, "rail": 3, "core": 3, "spine": 4}
KIND_COLOURS = {
    "nvlink": "tab:green",
    "pcie": "tab:orange",
    "xgmi": "tab:olive",
    "fabric": "tab:brown",
    "nic": "tab:blue",
    "uplink": "tab:red",
}


def draw_cluster(graph: nx.Graph, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    layered = nx.Graph()
    layered.add_nodes_from((n, {"layer": LAYERS[role]}) for n, role in graph.nodes(data="role"))
    positions = nx.multipartite_layout(layered, subset_key="layer", align="horizontal")
    kinds = sorted({k for _, _, k in graph.edges(data="kind")})
    width = min(40.0, max(8.0, graph.number_of_nodes() / 12))
    figure, axes = plt.subplots(figsize=(width, 6))
    for kind in kinds:
        edges = [(u, v) for u, v, k in graph.edges(data="kind") if k == kind]
        nx.draw_networkx_edges(
            graph,
            positions,
            edgelist=edges,
            ax=axes,
            width=0.8,
            edge_color=KIND_COLOURS.get(kind, "tab:gray"),
        )
    gpus = [n for n, role in graph.nodes(data="role") if role == "gpu"]
    switches = [n for n, role in graph.nodes(data="role") if role != "gpu"]
    nx.draw_networkx_nodes(graph, positions, nodelist=gpus, node_size=30, node_color="black", ax=axes)
    nx.draw_networkx_nodes(
        graph,
        positions,
        nodelist=switches,
        node_size=30,
        node_color="lightgray",
        edgecolors="black",
        node_shape="s",
        ax=axes,
    )
    handles = [Line2D([], [], color=KIND_COLOURS.get(k, "tab:gray"), label=k) for k in kinds]
    axes.legend(handles=handles, loc="upper right", title="link kind")
    axes.set_title(f"{len(gpus)} GPUs, {len(switches)} switches ({graph.graph.get('topology', '')})")
    axes.set_axis_off()
    figure.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(figure)
