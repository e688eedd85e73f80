"""`homogenize`: what a homogeneous simulator would be given for the same cluster and plan."""

from __future__ import annotations

import pytest

from astra_hetero import pipeline
from astra_hetero.spec import parse_spec
from astra_hetero.studies.schema import HomogenizeTransform
from astra_hetero.studies.transforms import homogenize
from astra_hetero.workload.generate import plan_workload
from tests.conftest import make_spec_data, node_group

MOST_COMMON = HomogenizeTransform(kind="homogenize", device="most_common")
AVERAGE = HomogenizeTransform(kind="homogenize", device="average")


def three_types():
    """12 GPUs of three kinds: 4 H100 (one node), 4 A100 over 2 nodes with 200G NICs, 4 PCIe L40S
    sharing one 100G NIC; TP2 · PP3 · DP2 with an `auto` layer split."""
    return parse_spec(
        make_spec_data(
            cluster={
                "node_groups": [
                    node_group("h100", "h100-sxm"),
                    node_group("a100", "a100-80", count=2, gpus_per_node=2, fabric="nvlink3", nic=200),
                    node_group("l40s", "l40s", fabric="pcie4", nic={"gbps": 100, "count": 1}),
                ]
            },
            model={"preset": "gpt3-6.7b", "seq_len": 1024, "num_layers": 12},
            parallelism={"tp": 2, "pp": 3, "dp": 2, "micro_batch_size": 1, "global_batch_size": 8},
            mapping={"stages": ["h100", "a100", "l40s"]},
            partition={"layers": "auto"},
        )
    )


def test_most_common_device_replaces_every_node_and_keeps_the_cluster_shape():
    spec = three_types()
    # a tie between three 4-GPU types goes to the first in cluster order
    twin = homogenize(spec, MOST_COMMON)
    for original, group in zip(spec.cluster.node_groups, twin.cluster.node_groups, strict=True):
        assert (group.name, group.count, group.gpus_per_node) == (
            original.name,
            original.count,
            original.gpus_per_node,
        )
        assert group.gpu == spec.cluster.node_groups[0].gpu
        assert group.intra_node_fabric == spec.cluster.node_groups[0].intra_node_fabric
        assert group.nic == spec.cluster.node_groups[0].nic
    assert twin.mapping == spec.mapping


def test_most_common_counts_gpus_not_nodes_and_takes_the_largest_group_holding_it():
    data = three_types().model_dump()
    data["cluster"]["node_groups"][1]["count"] = 3  # six A100s now outnumber the rest
    data["cluster"]["node_groups"].append(
        node_group("a100b", "a100-80", count=1, gpus_per_node=2, fabric="nvlink2", nic=400)
    )
    data["parallelism"] = {**data["parallelism"], "dp": 2, "tp": 2, "pp": 4}
    data["mapping"] = {}  # cluster order
    spec = parse_spec(data)
    twin = homogenize(spec, MOST_COMMON)
    assert {g.gpu.preset for g in twin.cluster.node_groups} == {"a100-80"}
    assert {g.intra_node_fabric.preset for g in twin.cluster.node_groups} == {"nvlink3"}  # 6 GPUs beat 2
    assert {g.nic.gbps for g in twin.cluster.node_groups} == {200}


def test_average_device_has_the_mean_effective_throughputs_and_per_gpu_nic_bandwidth():
    spec = three_types()
    groups = spec.cluster.node_groups
    twin = homogenize(spec, AVERAGE)
    gpu = twin.cluster.node_groups[0].gpu
    weights = [g.num_gpus for g in groups]
    mean_flops = sum(g.gpu.effective_flops_per_ns * w for g, w in zip(groups, weights, strict=True)) / 12
    mean_bytes = sum(g.gpu.effective_bytes_per_ns * w for g, w in zip(groups, weights, strict=True)) / 12
    assert gpu.effective_flops_per_ns == pytest.approx(mean_flops)
    assert gpu.effective_bytes_per_ns == pytest.approx(mean_bytes)
    assert 0 < gpu.compute_efficiency <= 1 and 0 < gpu.memory_efficiency <= 1
    assert gpu.memory_gib == pytest.approx((80 + 80 + 48) / 3)
    nic = twin.cluster.node_groups[2].nic
    # per GPU: 400, 200 and 100/4 Gbit/s, four GPUs each
    assert (nic.gbps, nic.count) == (pytest.approx((400 + 200 + 25) / 3), None)
    fabric = twin.cluster.node_groups[1].intra_node_fabric
    assert fabric.gbytes_per_s == pytest.approx((450 + 300 + 32) / 3)
    assert all(g.gpu == gpu for g in twin.cluster.node_groups)


def test_the_split_is_pinned_to_what_the_original_plan_resolves_to():
    spec = three_types().model_copy(update={"scope": None})
    resolved = plan_workload(spec).partition
    assert len(set(resolved.layers_per_stage)) > 1  # auto gave the H100 stage more layers
    for transform in (MOST_COMMON, AVERAGE):
        twin = homogenize(spec, transform)
        assert twin.partition.layers == list(resolved.layers_per_stage)
        assert twin.partition.micro_batches == list(resolved.micro_batches_per_replica)


def test_a_homogeneous_cluster_predicts_the_same_time_either_way(tmp_path):
    spec = parse_spec(make_spec_data(cluster={"node_groups": [node_group("h100", "h100-sxm", count=4)]}))
    times = set()
    for name, variant in (
        ("as-is", spec),
        ("most", homogenize(spec, MOST_COMMON)),
        ("average", homogenize(spec, AVERAGE)),
    ):
        run_dir = pipeline.build_run_dir(variant, tmp_path / name).root
        times.add(pipeline.execute(run_dir, timeline="none").iteration_time_us)
    assert len(times) == 1
