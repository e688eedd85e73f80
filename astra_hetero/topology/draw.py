"""Render a cluster schematic (schematic.py) as a PNG; matplotlib is imported only here, when drawing.

GPUs are coloured by type; links are coloured by kind, thicker the faster they are, with each kind and
rate named in the legend and once beside the links; bottleneck links carry a red halo and the caption
says why. Like results/plots.py, each figure has its own Agg canvas (no pyplot state, no GUI backend).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import networkx as nx

from astra_hetero.topology.figures import Figures, figures
from astra_hetero.topology.schematic import Y_NODE_BOTTOM, LinkKind, Mark, Schematic, Segment, schematic

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

KIND_COLOURS = {
    "nvlink": "#2ca02c",
    "pcie": "#ff7f0e",
    "xgmi": "#bcbd22",
    "fabric": "#8c564b",
    "nic": "#1f77b4",
    "uplink": "#9467bd",
}
# GPU types in colours that no link kind uses (after Paul Tol's palettes).
GPU_COLOURS = ("#332288", "#ddcc77", "#cc6677", "#88ccee", "#882255", "#44aa99", "#bbbbbb", "#000000")
SWITCH_STYLE = {  # role -> (face colour, marker, size)
    "intra": ("#d9d9d9", "s", 70),
    "nic": ("#1f77b4", "s", 22),
    "leaf": ("#bdbdbd", "s", 150),
    "rail": ("#bdbdbd", "s", 150),
    "core": ("#bdbdbd", "s", 200),
    "spine": ("#7f7f7f", "s", 170),
}
BOTTLENECK = "#d62728"
DPI = 120


def draw_cluster(graph: nx.Graph, path: Path) -> Path:
    """Write the schematic of a cluster graph (topology/cluster.py) to `path`, in the format its name
    ends in (png, svg, pdf); returns `path`."""
    from astra_hetero.results.plots import save_figure

    return save_figure(cluster_figure(graph), path, dpi=DPI)


def cluster_figure(graph: nx.Graph) -> Figure:
    """The schematic of a cluster graph (see the module docstring)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    drawing = schematic(graph)
    fig = Figure(figsize=(min(max(drawing.width * 0.42 + 2.5, 9.0), 32.0), 8.5), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    gpu_colours = {gpu: GPU_COLOURS[i % len(GPU_COLOURS)] for i, gpu in enumerate(drawing.gpu_types)}
    link_colours = link_palette(drawing.link_kinds)
    _frames(ax, drawing)
    _segments(ax, drawing.segments, link_colours)
    _marks(ax, drawing.marks, gpu_colours)
    _legend(fig, ax, drawing, gpu_colours, link_colours)
    ax.set_title(_title(graph, drawing, figures(graph)), fontsize="medium")
    ax.set_xlim(-1.0, drawing.width + 1.0)
    ax.set_ylim(-4.6, 10.6)
    ax.set_axis_off()
    return fig


def _title(graph: nx.Graph, drawing: Schematic, cluster: Figures) -> str:
    plural = {"leaf": "leaves", "rail": "rails", "core": "core switches", "spine": "spines"}
    switches = ", ".join(
        f"{n} {role if n == 1 else plural[role]}"
        for role, n in cluster.switches_by_role.items()
        if role in plural
    )
    name = graph.graph.get("name") or "cluster"
    return (
        f"{name}: {cluster.num_gpus} GPUs in {drawing.num_nodes} nodes\n"
        f"{graph.graph.get('topology', '')} network ({switches}); "
        f"bisection {cluster.bisection_gbps:g} Gbit/s one way"
    )


def _width(rate_gbps: float) -> float:
    """Line width grows with the logarithm of the rate: 100 Gbit/s ~1 pt, 3600 Gbit/s (NVLink 4) ~3 pt."""
    return 0.6 + 0.7 * math.log10(max(rate_gbps, 10.0) / 25.0)


def _frames(ax: Axes, drawing: Schematic) -> None:
    from matplotlib.patches import FancyBboxPatch

    for frame in drawing.frames:
        style = {
            "group": dict(facecolor="#f4f4f4", edgecolor="#9e9e9e", linestyle="-", zorder=0),
            "node": dict(facecolor="white", edgecolor="#9e9e9e", linestyle="-", zorder=1),
            "collapsed": dict(facecolor="white", edgecolor="#616161", linestyle="--", zorder=1),
        }
        ax.add_patch(
            FancyBboxPatch(
                (frame.x0, frame.y0),
                frame.x1 - frame.x0,
                frame.y1 - frame.y0,
                boxstyle="round,pad=0.05,rounding_size=0.25",
                linewidth=0.8,
                **style[frame.style],
            )
        )
        if frame.style == "group":
            ax.text(frame.x0 + 0.2, frame.y0 + 0.35, frame.label, fontsize="small", va="bottom", ha="left")
        elif frame.style == "collapsed":
            ax.text(
                (frame.x0 + frame.x1) / 2,
                (frame.y0 + frame.y1) / 2 - 0.3,
                frame.label,
                fontsize="small",
                ha="center",
                va="center",
                zorder=5,
            )


def link_palette(kinds: tuple[LinkKind, ...]) -> dict[tuple[str, float], str]:
    """A colour per (kind, rate): the kind's hue, its fastest rate at full strength and each slower
    one lighter, so that two rates of one kind never share a colour (width alone is hard to tell)."""
    palette: dict[tuple[str, float], str] = {}
    for kind in dict.fromkeys(k.kind for k in kinds):
        rates = sorted({k.rate_gbps for k in kinds if k.kind == kind}, reverse=True)
        base = KIND_COLOURS.get(kind, "#7f7f7f")
        for step, rate in enumerate(rates):
            palette[(kind, rate)] = _lighter(base, 0.5 * step / max(1, len(rates) - 1))
    return palette


def _lighter(colour: str, towards_white: float) -> str:
    from matplotlib.colors import to_hex, to_rgb

    return to_hex(tuple(c + (1.0 - c) * towards_white for c in to_rgb(colour)))


def _segments(ax: Axes, segments: tuple[Segment, ...], colours: dict[tuple[str, float], str]) -> None:
    labelled: set[tuple[str, float]] = set()
    box = dict(boxstyle="round,pad=0.1", facecolor="white", edgecolor="none", alpha=0.85)
    for seg in segments:
        xs, ys = (seg.start[0], seg.end[0]), (seg.start[1], seg.end[1])
        width = _width(seg.rate_gbps)
        colour = colours.get((seg.kind, seg.rate_gbps), KIND_COLOURS.get(seg.kind, "#7f7f7f"))
        if seg.bottleneck:
            ax.plot(
                xs, ys, color=BOTTLENECK, linewidth=width + 3.0, alpha=0.35, solid_capstyle="round", zorder=2
            )
        ax.plot(xs, ys, color=colour, linewidth=width, zorder=3)
        if seg.count > 1:
            ax.text(
                *_along(seg, 0.3),
                f"×{seg.count}",
                fontsize="x-small",
                ha="center",
                va="center",
                zorder=6,
                bbox=box,
            )
        elif (seg.kind, seg.rate_gbps) not in labelled and abs(ys[1] - ys[0]) > 2:
            # One rate label per kind and rate, on a long link where it has room.
            labelled.add((seg.kind, seg.rate_gbps))
            ax.text(
                *_along(seg, 0.55),
                _rate(seg),
                fontsize="x-small",
                ha="center",
                va="center",
                zorder=6,
                color=colour,
                bbox=box,
            )


def _along(seg: Segment, t: float) -> tuple[float, float]:
    """The point a fraction `t` of the way down from the segment's upper end, where lines that meet
    below have drawn apart."""
    (x0, y0), (x1, y1) = (seg.start, seg.end) if seg.start[1] >= seg.end[1] else (seg.end, seg.start)
    return x0 + t * (x1 - x0), y0 + t * (y1 - y0)


def _rate(seg: Segment) -> str:
    return f"{seg.rate_gbps:g}G" if seg.kind in ("nic", "uplink") else f"{seg.rate_gbps / 8:g} GB/s"


def _marks(ax: Axes, marks: tuple[Mark, ...], gpu_colours: dict[str, str]) -> None:
    gpus = [m for m in marks if m.role == "gpu"]
    ax.scatter(
        [m.x for m in gpus],
        [m.y for m in gpus],
        s=90,
        c=[gpu_colours[m.gpu_type] for m in gpus],
        edgecolors="black",
        linewidths=0.6,
        zorder=4,
    )
    for role, (colour, marker, size) in SWITCH_STYLE.items():
        chosen = [m for m in marks if m.role == role]
        ax.scatter(
            [m.x for m in chosen],
            [m.y for m in chosen],
            s=size,
            c=colour,
            marker=marker,
            edgecolors="black",
            linewidths=0.6,
            zorder=4,
        )
        for mark in chosen:
            if mark.label:  # a node's switch is labelled at the foot of its box, where no link runs
                y = Y_NODE_BOTTOM + 0.15 if role == "intra" else mark.y + 0.55
                ax.text(mark.x, y, mark.label, fontsize="x-small", ha="center", va="bottom", zorder=6)


def _legend(
    fig, ax: Axes, drawing: Schematic, gpu_colours: dict[str, str], link_colours: dict[tuple[str, float], str]
) -> None:
    from matplotlib.lines import Line2D

    handles = [
        Line2D(
            [],
            [],
            marker="o",
            linestyle="",
            markersize=8,
            markerfacecolor=gpu_colours[gpu],
            markeredgecolor="black",
            label=f"{gpu} ({n} GPUs)",
        )
        for gpu, n in drawing.gpu_types.items()
    ]
    handles += [
        Line2D(
            [],
            [],
            color=link_colours[(k.kind, k.rate_gbps)],
            linewidth=_width(k.rate_gbps),
            label=f"{k.label} ({k.count} links)",
        )
        for k in drawing.link_kinds
    ]
    handles += [
        Line2D(
            [],
            [],
            marker="s",
            linestyle="",
            markersize=6,
            markerfacecolor=SWITCH_STYLE[r][0],
            markeredgecolor="black",
            label=name,
        )
        for r, name in (
            ("intra", "NVSwitch / PCIe switch"),
            ("nic", "NIC"),
            ("leaf", "leaf / rail / core switch"),
            ("spine", "spine"),
        )
        if any(m.role == r or (r == "leaf" and m.role in ("rail", "core")) for m in drawing.marks)
    ]
    bottlenecks = (
        "; ".join(drawing.bottlenecks)
        if drawing.bottlenecks
        else "none: every tier is uniform and no leaf is oversubscribed"
    )
    handles.append(Line2D([], [], color=BOTTLENECK, linewidth=5, alpha=0.35, label="bottleneck link"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small", frameon=False)
    fig.text(
        0.01,
        0.01,
        f"bottlenecks: {bottlenecks}. Line width grows with the link rate; ×N: N links drawn as one.",
        fontsize="small",
        ha="left",
        va="bottom",
        wrap=True,
    )
