"""The cluster schematic: every link accounted for, repeated nodes collapsed, bottlenecks where they are."""

from __future__ import annotations

from collections import Counter

import pytest

from astra_hetero.spec import parse_spec
from astra_hetero.topology import checked_graph
from astra_hetero.topology.schematic import Schematic, bottleneck_links, group_figures, schematic
from tests.conftest import node_group
from tests.topology.files import with_workload

H100 = node_group("h100", "h100-sxm", count=2)
A100 = node_group("a100", "a100-80", count=2, fabric="nvlink3", nic=200)


def draw(groups, **network):
    network = {"topology": "spine_leaf", "nodes_per_leaf": 2, **network}
    spec = parse_spec(with_workload({"cluster": {"node_groups": groups}, "network": network}))
    graph = checked_graph(spec)
    return spec, graph, schematic(graph)


def represented_links(drawing: Schematic) -> int:
    return sum(segment.count for segment in drawing.segments)


def links_inside_collapsed_nodes(graph, spec, shown_per_group: int) -> int:
    per_node = Counter()
    for u, v in graph.edges:
        hosts = {
            graph.nodes[n].get("host") for n in (u, v) if graph.nodes[n]["role"] in ("gpu", "intra", "nic")
        }
        if len(hosts) == 1 and {graph.nodes[u]["role"], graph.nodes[v]["role"]} <= {"gpu", "intra", "nic"}:
            per_node[hosts.pop()] += 1
    hidden = []
    first = 0
    for group in spec.cluster.node_groups:
        members = list(range(first, first + group.count))
        shown = members if len(members) <= shown_per_group + 1 else members[:shown_per_group]
        hidden += members[len(shown) :]
        first += group.count
    return sum(per_node[h] for h in hidden)


@pytest.mark.parametrize(
    "groups,network",
    [
        ([H100, A100], {}),
        ([node_group("h100", "h100-sxm", count=16, gpus_per_node=8)], {"nodes_per_leaf": 4}),
        ([node_group("h100", "h100-sxm", count=16, gpus_per_node=8)], {"topology": "rail_optimized"}),
        (
            [
                H100,
                node_group(
                    "l40s", "l40s", count=5, gpus_per_node=8, fabric="pcie4", nic={"gbps": 200, "count": 2}
                ),
            ],
            {"oversubscription": 2.0},
        ),
        ([node_group("a", "a100-80", count=3, gpus_per_node=1)], {"topology": "single_switch"}),
    ],
)
def test_every_link_is_drawn_once_or_stands_inside_a_collapsed_node(groups, network):
    spec, graph, drawing = draw(groups, **network)
    inside = links_inside_collapsed_nodes(graph, spec, shown_per_group=2)
    assert represented_links(drawing) + inside == graph.number_of_edges()
    assert sum(k.count for k in drawing.link_kinds) == graph.number_of_edges()


def test_gpus_are_typed_and_counted_per_type():
    _, _, drawing = draw([H100, A100])
    assert drawing.gpu_types == {"h100-sxm": 8, "a100-80": 8}
    drawn = Counter(m.gpu_type for m in drawing.marks if m.role == "gpu")
    assert drawn == {"h100-sxm": 8, "a100-80": 8}  # two nodes per group: nothing collapsed


def test_a_large_group_collapses_to_two_nodes_and_one_box():
    spec, _, drawing = draw([node_group("h100", "h100-sxm", count=128, gpus_per_node=8)], nodes_per_leaf=16)
    assert sum(m.role == "gpu" for m in drawing.marks) == 16
    (box,) = [f for f in drawing.frames if f.style == "collapsed"]
    assert box.label.startswith("×126 identical") and "1008 GPUs" in box.label
    assert drawing.gpu_types == {"h100-sxm": 1024}
    leaves = [m for m in drawing.marks if m.role == "leaf"]
    assert sum(m.count for m in leaves) == 8 and len(leaves) == 2  # leaf 0 and "×7 leaves"
    assert len([m for m in drawing.marks if m.role == "spine"]) <= 4


def test_link_kinds_name_their_rates_with_units():
    _, _, drawing = draw([H100, A100])
    labels = {k.label for k in drawing.link_kinds}
    assert {
        "nvlink 450 GB/s per GPU",
        "nvlink 300 GB/s per GPU",
        "nic 400 Gbit/s",
        "nic 200 Gbit/s",
    } <= labels


def test_mixed_groups_mark_the_slower_groups_links_as_bottlenecks():
    spec, graph, drawing = draw([H100, A100])
    marked, notes = bottleneck_links(graph, group_figures(graph))
    groups_marked = {
        graph.nodes[n]["group"] for link in marked for n in link if graph.nodes[n]["role"] in ("gpu", "nic")
    }
    assert groups_marked == {"a100"}
    assert any(n.startswith("scale-up: a100 at 300 GB/s per GPU (h100 450)") for n in notes)
    assert any(n.startswith("scale-out: a100 at 25 GB/s per GPU (h100 50)") for n in notes)
    slow = {(s.kind, s.rate_gbps) for s in drawing.segments if s.bottleneck}
    assert slow == {("nvlink", 2400.0), ("nic", 200.0)}


def test_oversubscribed_leaves_mark_their_uplinks():
    spec, graph, drawing = draw([node_group("h100", "h100-sxm", count=4)], oversubscription=2.0)
    assert {s.kind for s in drawing.segments if s.bottleneck} == {"uplink"}
    assert drawing.bottlenecks == ("uplinks: 2 switches serving h100 oversubscribed 2:1",)


def test_a_uniform_non_blocking_cluster_has_no_bottleneck():
    _, _, drawing = draw([node_group("h100", "h100-sxm", count=4)])
    assert drawing.bottlenecks == () and not any(s.bottleneck for s in drawing.segments)


def test_segments_join_drawn_marks_or_collapsed_boxes():
    _, _, drawing = draw([H100, node_group("a100", "a100-80", count=9, fabric="nvlink3", nic=200)])
    points = {(m.x, m.y) for m in drawing.marks}
    points |= {((f.x0 + f.x1) / 2, f.y1) for f in drawing.frames if f.style == "collapsed"}
    for segment in drawing.segments:
        assert segment.start in points and segment.end in points


def test_the_drawing_is_a_png_with_the_clusters_figures(tmp_path):
    from matplotlib.image import imread

    from astra_hetero.topology.draw import draw_cluster

    spec, graph, _ = draw([H100, A100])
    path = draw_cluster(graph, tmp_path / "topology.png")
    height, width, _ = imread(path).shape
    assert width > height > 400


def test_node_group_frames_say_what_each_node_holds():
    l40s = node_group("l40s", "l40s", count=5, gpus_per_node=8, fabric="pcie4", nic={"gbps": 200, "count": 2})
    _, _, drawing = draw([H100, l40s])
    labels = [f.label for f in drawing.frames if f.style == "group"]
    assert labels == [
        "h100: 2 × (4 h100-sxm, nvlink4, 4×400G NIC)",
        "l40s: 5 × (8 l40s, pcie4, 2×200G NIC shared)",
    ]
    intra = {m.label for m in drawing.marks if m.role == "intra"}
    assert intra == {"nvlink4 450 GB/s per GPU", "pcie4 32 GB/s per GPU"}


def test_each_link_rate_of_a_kind_has_a_colour_of_its_own_in_drawing_and_legend(tmp_path):
    from matplotlib.colors import to_hex

    from astra_hetero.spec import parse_spec
    from astra_hetero.topology import build_cluster_graph
    from astra_hetero.topology.draw import KIND_COLOURS, link_palette
    from astra_hetero.topology.schematic import LinkKind
    from tests.conftest import make_spec_data

    kinds = (LinkKind("nic", 400.0, 8), LinkKind("nic", 200.0, 8), LinkKind("nvlink", 3600.0, 8))
    palette = link_palette(kinds)
    assert palette[("nic", 400.0)] == to_hex(KIND_COLOURS["nic"])  # the fastest at full strength
    assert palette[("nic", 200.0)] != palette[("nic", 400.0)]
    assert len(set(palette.values())) == len(palette)
    # the drawing of a cluster with 400G and 200G NICs (make_spec_data's two groups): the legend
    # gives each its own colour, and the links are drawn in them
    from astra_hetero.topology.draw import cluster_figure

    figure = cluster_figure(build_cluster_graph(parse_spec(make_spec_data())))
    legend = figure.axes[0].get_legend()
    colours = {
        t.get_text(): to_hex(h.get_color())
        for t, h in zip(legend.get_texts(), legend.legend_handles, strict=True)
        if t.get_text().startswith("nic ")
    }
    assert set(colours) == {"nic 400 Gbit/s (16 links)", "nic 200 Gbit/s (16 links)"}
    assert len(set(colours.values())) == 2
    drawn = {to_hex(line.get_color()) for line in figure.axes[0].lines}
    assert set(colours.values()) <= drawn
