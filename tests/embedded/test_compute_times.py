"""How compute nodes are timed: roofline from the system file, durations otherwise, never a silent 0."""

from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path

import pytest

from astra_hetero.astrasim_inputs.system import Roofline, read_system
from astra_hetero.backends.embedded.backend import EmbeddedBackend
from astra_hetero.backends.embedded.trace.decode import read_rank_trace
from astra_hetero.chakra_io import pb
from astra_hetero.errors import RunDirError
from tests.embedded.rundirs import coll, comp, single_switch, write_run_dir

DATA = Path(__file__).parents[1] / "data"
STG = DATA / "astrasim_studies" / "stg_gpt3_16npu_4layers.tar.xz"
ROOFLINE = Roofline(peak_flops_per_s=900e12, mem_bytes_per_s=3000e9)


def roofline_node(node_id: int, num_ops: int, tensor_size: int, deps=(), cpu: bool = False) -> pb.Node:
    node = pb.Node(id=node_id, name=f"op{node_id}", type=pb.COMP_NODE)
    node.data_deps.extend(deps)
    node.attr.add(name="num_ops", int64_val=num_ops)
    node.attr.add(name="tensor_size", uint64_val=tensor_size)
    node.attr.add(name="is_cpu_op", int32_val=int(cpu))  # STG writes an int32, the converter a bool
    return node


def system(root: Path, roofline: bool) -> None:
    (root / "analytical").mkdir(exist_ok=True)
    data = {"roofline-enabled": int(roofline), "peak-perf": 900, "local-mem-bw": 3000}
    (root / "analytical/system.json").write_text(json.dumps(data))


@pytest.mark.parametrize(
    ("num_ops", "tensor_size", "expected_ns"),
    [
        (9_000_000_000, 1_000_000, 10_000),  # compute bound: 9e9 / 900e12 s
        (3_000_000, 3_000_000, 1_000),  # memory bound: intensity 1 -> 3000 GB/s x 1
        (1_000, 3_000, 1),  # intensity 1/3 -> 1e12 FLOP/s: 1000 / 1e12 s = 1 ns
        (1_000, 7_000, 2),  # 1000 / (3e12 / 7) s = 2.33 ns, truncated
        (5, 0, 0),  # tensor_size 0: ASTRA-sim skips the node
    ],
)
def test_roofline_time_is_astrasims_formula(num_ops, tensor_size, expected_ns):
    assert ROOFLINE.time_ns(num_ops, tensor_size) == expected_ns


def test_roofline_traces_take_num_ops_over_attainable_perf(tmp_path):
    nodes = [roofline_node(0, 9_000_000_000, 1_000_000), roofline_node(1, 3_000_000, 3_000_000, (0,))]
    cpu = roofline_node(2, 10**15, 1, (1,), cpu=True)
    cpu.duration_micros = 7  # a CPU op replays its duration even in roofline mode
    write_run_dir(tmp_path, {0: [*nodes, cpu]}, single_switch(1))
    trace = read_rank_trace(tmp_path / "workload/workload.0.et", 1, ROOFLINE)
    assert trace.durations_ns.tolist() == [10_000, 1_000, 7_000]


def test_zero_durations_among_timed_nodes_take_one_ns(tmp_path):
    write_run_dir(tmp_path, {0: [comp(0, 5), comp(1, 0, (0,))]}, single_switch(1))
    trace = read_rank_trace(tmp_path / "workload/workload.0.et", 1)
    assert trace.durations_ns.tolist() == [5_000, 1]  # Workload::issue_replay: 0 µs runs 1 ns


def test_roofline_run_directory_times_compute_from_the_system_file(tmp_path):
    traces = {
        r: [roofline_node(0, 9_000_000_000, 1_000_000), coll(1, "all_reduce", 1 << 20, deps=(0,))]
        for r in range(2)
    }
    write_run_dir(tmp_path, traces, single_switch(2))
    system(tmp_path, roofline=True)
    for fold in (True, False):
        result = EmbeddedBackend(fold=fold, timeline=False).run(tmp_path).result
        assert [r.compute_us for r in result.ranks] == [10.0, 10.0]


def test_roofline_traces_without_roofline_system_name_the_system_file(tmp_path):
    write_run_dir(tmp_path, {0: [roofline_node(0, 10, 10)]}, single_switch(1))
    system(tmp_path, roofline=False)
    with pytest.raises(RunDirError, match=r"analytical/system\.json: does not enable roofline.*op0"):
        EmbeddedBackend().run(tmp_path)
    (tmp_path / "analytical/system.json").unlink()
    with pytest.raises(RunDirError, match=r"workload\.0\.et: node 0 .*no ASTRA-sim system file.*import"):
        EmbeddedBackend().run(tmp_path)


def test_untimed_compute_node_is_an_error_naming_the_node(tmp_path):
    write_run_dir(tmp_path, {0: [comp(0, 0, name="gemm")], 1: [comp(0, 3)]}, single_switch(2))
    for fold in (True, False):
        with pytest.raises(RunDirError, match=r"workload\.0\.et: node 0 \('gemm'\) takes no time"):
            EmbeddedBackend(fold=fold).run(tmp_path)


def test_idle_rank_may_hold_one_empty_compute_node(tmp_path):
    # what the generator writes for a GPU that serves no stage (see workload/generate.py)
    ranks = [{"rank": 0, "node": 0, "gpu": "h100"}, {"rank": 1, "node": 0, "gpu": "h100", "idle": True}]
    write_run_dir(tmp_path, {0: [comp(0, 3)], 1: [comp(0, 0)]}, single_switch(2), manifest={"ranks": ranks})
    result = EmbeddedBackend(timeline=False).run(tmp_path).result
    assert [r.compute_us for r in result.ranks] == [3.0, 0.0]


def test_roofline_mode_needs_num_ops_on_gpu_nodes(tmp_path):
    write_run_dir(tmp_path, {0: [comp(0, 3, name="timed")]}, single_switch(1))
    system(tmp_path, roofline=True)
    with pytest.raises(RunDirError, match=r"node 0 \('timed'\) lacks num_ops or tensor_size.*system\.json"):
        EmbeddedBackend().run(tmp_path)


def test_roofline_needs_peak_perf_and_local_mem_bw(tmp_path):
    path = tmp_path / "system.json"
    path.write_text(json.dumps({"roofline-enabled": 1, "peak-perf": 900}))
    with pytest.raises(RunDirError, match=r"system\.json: roofline-enabled is set, so local-mem-bw"):
        read_system(path)


def test_stg_traces_give_real_astrasims_gpu_time(tmp_path):
    """ASTRA-sim's own LLM traces (roofline nodes, duration 0): real ASTRA-sim reports rank 0's and
    rank 14's GPU time as 4 423 333 and 4 425 429 cycles (astrasim_outputs/stg_gpt3_16npu_...)."""
    with tarfile.open(STG) as archive:
        archive.extractall(tmp_path, filter="data")
    (tmp_path / "ns3").mkdir()
    (tmp_path / "ns3/topology.txt").write_text(single_switch(16))
    (tmp_path / "analytical").mkdir()
    shutil.copy(tmp_path / "system_2d_roofline.json", tmp_path / "analytical/system.json")
    result = EmbeddedBackend(timeline=False).run(tmp_path).result
    assert result.ranks[0].compute_us == pytest.approx(4423.333, abs=1e-9)
    assert result.ranks[14].compute_us == pytest.approx(4425.429, abs=1e-9)
