"""Interleaved traces (virtual stages), read back with Chakra's reader: chunks, roles, p2p across the
pipeline ring, and the manifest's chunk ranges."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

import networkx as nx
import pytest
from chakra.schema.protobuf import et_def_pb2 as pb

from astra_hetero.backends.embedded.backend import EmbeddedBackend
from astra_hetero.pipeline import build_run_dir
from astra_hetero.spec import parse_spec
from tests.conftest import make_spec_data
from tests.workload.traces import attrs, read_with_chakra

P, V = 4, 2


def interleaved_data(**partition) -> dict:
    """16 GPUs (H100 stages 0-1, A100 stages 2-3), TP2·PP4·DP2, 16 layers, 8 micro-batches per replica."""
    data = make_spec_data()
    data["model"] = {**data["model"], "num_layers": 16, "tied_embeddings": True}
    data["parallelism"] = {"tp": 2, "pp": P, "dp": 2, "global_batch_size": 16, "virtual_stages": V}
    if partition:
        data["partition"] = partition
    return data


def generate(root: Path, data: dict) -> tuple[Path, dict, dict[int, list]]:
    build_run_dir(parse_spec(data), root, topology=True, per_rank=True)
    manifest = json.loads((root / "manifest.json").read_text())
    traces = {
        r: read_with_chakra(root / f"workload/workload.{r}.et")[1] for r in range(manifest["num_ranks"])
    }
    return root, manifest, traces


@pytest.fixture(scope="module")
def uneven(tmp_path_factory):
    """Unequal chunks: virtual stages in model order hold 3,1,2,2 | 1,3,2,2 layers."""
    return generate(tmp_path_factory.mktemp("uneven"), interleaved_data(layers=[3, 1, 2, 2, 1, 3, 2, 2]))


def p2p_index(traces):
    """(src, dst, tag) -> (rank, node) for every send, and the same for every recv."""
    sends, recvs = {}, {}
    for rank, nodes in traces.items():
        for node in nodes:
            a = attrs(node)
            if node.type == pb.COMM_SEND_NODE:
                assert (a["comm_src"], a["comm_dst"], a["comm_tag"]) not in sends
                sends[(a["comm_src"], a["comm_dst"], a["comm_tag"])] = (rank, node)
            elif node.type == pb.COMM_RECV_NODE:
                assert (a["comm_src"], a["comm_dst"], a["comm_tag"]) not in recvs
                recvs[(a["comm_src"], a["comm_dst"], a["comm_tag"])] = (rank, node)
    return sends, recvs


def layers_of(node) -> list[int]:
    return [int(x) for x in re.findall(r"L(\d+)", node.name)]


def test_manifest_records_each_ranks_chunks_in_model_order(uneven):
    _, manifest, _ = uneven
    assert manifest["virtual_stages"] == V
    assert manifest["layers_per_virtual_stage"] == [3, 1, 2, 2, 1, 3, 2, 2]
    assert manifest["layers_per_stage"] == [4, 4, 4, 4]
    starts = [0, 3, 4, 6, 8, 9, 12, 14, 16]
    for info in manifest["ranks"]:
        stage = info["stage"]
        chunks = info["chunks"]
        assert [c["chunk"] for c in chunks] == list(range(V))
        for c in chunks:
            g = c["chunk"] * P + stage
            assert c["virtual_stage"] == g and c["layers"] == [starts[g], starts[g + 1]]


def test_every_rank_runs_exactly_its_chunks_layers_for_every_micro_batch(uneven):
    _, manifest, traces = uneven
    for info in manifest["ranks"]:
        expected = {layer for c in info["chunks"] for layer in range(*c["layers"])}
        per_mb = defaultdict(set)
        for node in traces[info["rank"]]:
            if node.type == pb.COMP_NODE and node.name.startswith("F."):
                per_mb[node.name.split(".")[1]] |= set(layers_of(node))
        assert len(per_mb) == info["num_micro_batches"]
        assert all(layers == expected for layers in per_mb.values())


def test_embedding_runs_in_the_first_virtual_stage_and_head_in_the_last(uneven):
    _, manifest, traces = uneven
    for info in manifest["ranks"]:
        names = [n.name for n in traces[info["rank"]] if n.type == pb.COMP_NODE]
        embeds = [n for n in names if ".embed" in n]
        heads = [n for n in names if ".head" in n]
        mbs = info["num_micro_batches"]
        # one forward and one backward per micro-batch (a pass may split around a TP collective)
        assert len({tuple(n.split(".")[:2]) for n in embeds}) == (2 * mbs if info["stage"] == 0 else 0)
        assert len({tuple(n.split(".")[:2]) for n in heads}) == (2 * mbs if info["stage"] == P - 1 else 0)
        # the embedding joins layer 0 (chunk 0), never a later chunk's first layer
        assert all(layers_of_name(n) <= {0, 1, 2} for n in embeds)


def layers_of_name(name: str) -> set[int]:
    return {int(x) for x in re.findall(r"L(\d+)", name)}


def test_every_send_has_one_recv_and_tags_stay_unique_between_two_ranks(uneven):
    _, _, traces = uneven
    sends, recvs = p2p_index(traces)
    assert sends.keys() == recvs.keys()
    for key, (_, send) in sends.items():
        assert attrs(send)["comm_size"] == attrs(recvs[key][1])["comm_size"]
        assert attrs(send)["comm_tag"] < 2**31


def test_activations_flow_through_virtual_stages_in_model_order(uneven):
    """A chunk's first forward compute waits on a recv whose send follows the previous virtual stage's
    last layer — including the last stage's chunk c feeding stage 0's chunk c + 1."""
    _, manifest, traces = uneven
    stage_of = {r["rank"]: r["stage"] for r in manifest["ranks"]}
    sends, recvs = p2p_index(traces)
    wraps = 0
    for key, (rank, recv) in recvs.items():
        sender_rank, send = sends[key]
        producer = traces[sender_rank][send.data_deps[0]]
        consumer = next(n for n in traces[rank] if recv.id in n.data_deps)
        backward = recv.name.split(".")[0] == "B"
        assert producer.name.split(".")[1] == consumer.name.split(".")[1]  # same micro-batch
        if backward:  # gradients go from the first layer of the later chunk to the last of the earlier
            assert min(layers_of(producer)) == max(layers_of(consumer)) + 1
        else:
            assert max(layers_of(producer)) + 1 == min(layers_of(consumer))
        if {stage_of[sender_rank], stage_of[rank]} == {0, P - 1}:
            wraps += 1
    # forward and backward between chunk 0 of the last stage and chunk 1 of stage 0, per micro-batch
    assert wraps == 2 * sum(r["num_micro_batches"] for r in manifest["ranks"] if r["stage"] == 0)


def test_traces_are_acyclic_and_comm_groups_issue_identical_collectives(uneven):
    root, _, traces = uneven
    groups = json.loads((root / "workload/comm_groups.json").read_text())
    issued = defaultdict(dict)
    for rank, nodes in traces.items():
        graph = nx.DiGraph()
        graph.add_nodes_from(n.id for n in nodes)
        graph.add_edges_from((d, n.id) for n in nodes for d in (*n.data_deps, *n.ctrl_deps))
        assert nx.is_directed_acyclic_graph(graph)
        for node in nodes:
            if node.type == pb.COMM_COLL_NODE:
                a = attrs(node)
                issued[a["pg_name"]].setdefault(rank, []).append((a["comm_type"], a["comm_size"]))
    for group, members in groups.items():
        assert all(issued[group][r] == issued[group][members[0]] for r in members), group


def test_interleaved_run_finishes_in_the_embedded_engine_faster_than_without(tmp_path, uneven):
    interleaved = EmbeddedBackend().run(uneven[0]).result
    plain_data = interleaved_data(layers=[4, 4, 4, 4])
    plain_data["parallelism"]["virtual_stages"] = 1
    plain, _, _ = generate(tmp_path / "plain", plain_data)
    assert interleaved.iteration_time_us < EmbeddedBackend().run(plain).result.iteration_time_us


def test_heterogeneous_stages_and_per_replica_micro_batches_keep_working(tmp_path):
    data = interleaved_data(layers="auto", micro_batches=[4, 12])
    data["model"]["num_layers"] = 24
    data["mapping"] = {"stages": ["h100", "a100", "h100", "a100"]}
    root, manifest, traces = generate(tmp_path, data)
    assert sorted({(r["replica"], r["num_micro_batches"]) for r in manifest["ranks"]}) == [(0, 4), (1, 12)]
    per_stage = manifest["layers_per_stage"]
    assert sum(per_stage) == 24 and min(per_stage[0], per_stage[2]) > max(per_stage[1], per_stage[3])
    for info in manifest["ranks"]:
        forwards = {n.name.split(".")[1] for n in traces[info["rank"]] if n.name.startswith("F.")}
        assert len(forwards) == info["num_micro_batches"]
    result = EmbeddedBackend().run(root).result
    assert result.iteration_time_us > 0 and len(result.ranks) == 16
