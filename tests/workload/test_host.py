"""Host and framework costs (`compute.framework`): the CPU's launch cost per kernel starves the GPU on
short kernels; fixed costs per micro-batch and per iteration appear as their own compute nodes."""

from __future__ import annotations

import json

import pytest
from chakra.schema.protobuf import et_def_pb2 as pb

from astra_hetero.errors import SpecError
from astra_hetero.pipeline import build_run_dir
from astra_hetero.spec import parse_spec
from astra_hetero.spec.schema import GpuSpec
from astra_hetero.workload.blocks import fuse
from astra_hetero.workload.costs import layer_forward
from astra_hetero.workload.host import FRAMEWORKS, NO_HOST, HostCosts, host_costs
from astra_hetero.workload.ops import Shape
from astra_hetero.workload.timing import DeviceCostModel
from tests.conftest import make_spec_data
from tests.workload.traces import read_with_chakra

TINY = Shape(b=1, s=128, h=256, a=4, kv=4, f=1024, v=1024, t=1, sp=False, swiglu=True)
BIG = Shape(b=4, s=4096, h=8192, a=64, kv=8, f=28672, v=128256, t=1, sp=False, swiglu=True)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_every_framework_has_a_launch_cost_and_fixed_costs(framework):
    host = host_costs(framework)
    assert host.launch_ns > 0 and host.micro_batch_ns >= 0 and host.step_ns >= 0


def test_a_run_of_kernels_takes_the_longer_of_its_gpu_time_and_its_launches():
    host = HostCosts(launch_ns=10_000.0, micro_batch_ns=0.0, step_ns=0.0)
    assert host.segment_ns(5_000.0, 3) == 30_000.0  # three 10 us launches for 5 us of GPU work
    assert host.segment_ns(500_000.0, 3) == 500_000.0  # the CPU runs ahead of long kernels


def test_small_kernels_are_launch_bound_and_large_ones_are_not():
    cost = DeviceCostModel(GpuSpec.model_validate({"preset": "h100-sxm"}))
    host = host_costs("megatron-core")
    for shape, bound in ((TINY, True), (BIG, False)):
        plain = fuse(layer_forward(shape), "fwd", cost, shape)
        hosted = fuse(layer_forward(shape), "fwd", cost, shape, host)
        plain_ns = sum(s.time_ns for s in plain if hasattr(s, "time_ns"))
        hosted_ns = sum(s.time_ns for s in hosted if hasattr(s, "time_ns"))
        assert hosted_ns >= plain_ns
        assert (hosted_ns > plain_ns) is bound
        assert any("(launch-bound)" in getattr(s, "label", "") for s in hosted) is bound
    assert fuse(layer_forward(TINY), "fwd", cost, TINY, NO_HOST) == fuse(
        layer_forward(TINY), "fwd", cost, TINY
    )


def _framework_nodes(tmp_path, framework: str):
    data = make_spec_data(compute={"framework": framework})
    out = tmp_path / framework
    build_run_dir(parse_spec(data), out, topology=False, per_rank=True)
    manifest = json.loads((out / "manifest.json").read_text())
    nodes = read_with_chakra(out / "workload/workload.0.et")[1]
    framework_nodes = [n for n in nodes if n.type == pb.COMP_NODE and "framework." in n.name]
    return manifest, framework_nodes


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_each_micro_batch_and_the_iteration_pay_the_frameworks_fixed_costs(tmp_path, framework):
    manifest, nodes = _framework_nodes(tmp_path, framework)
    host = host_costs(framework)
    per_micro_batch = [n for n in nodes if n.name.endswith("framework.micro_batch")]
    step = [n for n in nodes if n.name == "framework.step"]
    assert len(per_micro_batch) == manifest["micro_batches_per_replica"][0]  # rank 0: one per micro-batch
    assert len(step) == 1
    assert all(n.duration_micros == round(host.micro_batch_ns / 1000) for n in per_micro_batch)
    assert step[0].duration_micros == round(host.step_ns / 1000)
    assert manifest["framework"] == {
        "name": framework,
        "launch_us": host.launch_ns / 1000,
        "micro_batch_us": host.micro_batch_ns / 1000,
        "step_us": host.step_ns / 1000,
    }


def test_an_unknown_framework_names_the_field():
    with pytest.raises(SpecError, match="compute.framework"):
        parse_spec(make_spec_data(compute={"framework": "jax"}))
