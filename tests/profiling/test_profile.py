"""`profile`: times every operator the spec's run emits, writes exactly the table the generator reads
(under the GPU's label), and fails at once without PyTorch or a GPU."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field

import pytest
import yaml

from astra_hetero.cli.main import main
from astra_hetero.errors import SpecError
from astra_hetero.pipeline import build_run_dir
from astra_hetero.profiling.plan import profile_points
from astra_hetero.profiling.run import gpu_label, profile, write_calibration
from astra_hetero.spec import parse_spec
from astra_hetero.spec.schema import GpuSpec
from astra_hetero.workload.calibration import load_calibration
from astra_hetero.workload.generate import plan_workload
from astra_hetero.workload.ops import Op, Shape
from astra_hetero.workload.timing import OperatorModel
from tests.conftest import make_spec_data, node_group
from tests.workload.traces import pb, read_with_chakra

HAS_TORCH = importlib.util.find_spec("torch") is not None


@dataclass
class ScaledModelTimer:
    """Stand-in for a GPU: the analytical model of a known GPU, `factor` times slower."""

    gpu: GpuSpec
    factor: float
    calls: list[tuple[str, str, Shape]] = field(default_factory=list)

    @property
    def device_name(self) -> str:
        return "stand-in"

    def time_ns(self, op: Op, phase: str, x: Shape) -> float:
        self.calls.append((op.name, phase, x))
        return self.factor * OperatorModel(self.gpu).time_ns(op)


def h100_spec_data(**parallelism) -> dict:
    data = make_spec_data()
    data["cluster"]["node_groups"] = [node_group("h100", "h100-sxm", count=4)]
    data["parallelism"] = {**data["parallelism"], **parallelism}
    return data


LAUNCH_BOUND = " (launch-bound)"


def gpu_times_us(run_root, rank: int) -> dict[str, tuple[int, bool]]:
    """The rank's compute nodes by name: (duration, launch-bound), the framework's host costs
    (`framework.*`, which a calibration table does not time) left out."""
    _, nodes = read_with_chakra(run_root / f"workload/workload.{rank}.et")
    return {
        n.name.replace(LAUNCH_BOUND, ""): (n.duration_micros, LAUNCH_BOUND in n.name)
        for n in nodes
        if n.type == pb.COMP_NODE and "framework." not in n.name
    }


@pytest.mark.parametrize("variant", [{}, {"recompute": "selective", "sequence_parallel": True}])
def test_profiled_table_replays_the_measured_times_in_the_generator(tmp_path, variant):
    spec = parse_spec(h100_spec_data(**variant))
    timer = ScaledModelTimer(spec.cluster.node_groups[0].gpu, 1.25)
    rows = profile(spec, timer, gpu_label(spec, None))
    table = tmp_path / "h100.csv"
    write_calibration(table, rows)
    loaded = load_calibration(table)  # the generator's own reader accepts every row
    assert len(loaded.rows) == len(rows) and {r.gpu for r in loaded.rows} == {"h100-sxm"}
    plain = build_run_dir(spec, tmp_path / "plain", topology=False, per_rank=True)
    calibrated_spec = parse_spec({**h100_spec_data(**variant), "calibration": str(table)})
    calibrated = build_run_dir(calibrated_spec, tmp_path / "calibrated", topology=False, per_rank=True)
    for rank in range(spec.cluster.num_gpus):  # every timed operator is 25 % slower, nothing else moves
        before, after = gpu_times_us(plain.root, rank), gpu_times_us(calibrated.root, rank)
        assert before.keys() == after.keys()
        # segments the host's kernel launches bound take their launches' time in either run
        timed = [name for name in before if not before[name][1] and not after[name][1]]
        assert len(timed) > len(before) / 2
        ratio = sum(after[n][0] for n in timed) / sum(before[n][0] for n in timed)
        assert ratio == pytest.approx(1.25, rel=0.01)


def test_every_operator_of_the_run_is_timed_once_per_shape():
    spec = parse_spec(h100_spec_data())
    points = profile_points(spec, seq_lens=(512, 1024), micro_batch_sizes=(1, 2))
    per_shape = {(p.shape.s, p.shape.b) for p in points if p.phase != "step"}
    assert per_shape == {(512, 1), (512, 2), (1024, 1), (1024, 2)}
    names = [(p.op.name, p.phase, p.shape) for p in points]
    assert len(names) == len(set(names))
    assert {p.op.name for p in points if p.phase == "step"} == {"optimizer_step", "grad_norm", "zero_grad"}
    one_shape = {(p.op.name, p.phase) for p in points if (p.shape.s, p.shape.b) == (512, 1)}
    assert {("attention", "fwd"), ("attention", "bwd"), ("qkv_proj", "bwd"), ("lm_head", "fwd")} <= one_shape


def test_rows_carry_the_gpu_label_the_spec_uses():
    data = make_spec_data()
    data["cluster"]["node_groups"][1]["gpu"] = {"preset": "a100-80", "name": "A100 lab"}
    spec = parse_spec(data)
    with pytest.raises(SpecError, match="several GPU types"):
        gpu_label(spec, None)
    assert gpu_label(spec, "A100 lab") == "a100-lab"
    with pytest.raises(SpecError, match="unknown GPU"):
        gpu_label(spec, "tpu")


def test_profile_fails_at_once_without_pytorch_or_gpu(tmp_path, capsys):
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(h100_spec_data()))
    assert main(["profile", str(spec), "-o", str(tmp_path / "cal.csv")]) == 1
    err = capsys.readouterr().err
    assert ("PyTorch" in err and "pip install 'astra-hetero[profile]'" in err) or "CUDA GPU" in err
    assert not (tmp_path / "cal.csv").exists()


@pytest.mark.skipif(not HAS_TORCH, reason="PyTorch is not installed (optional extra 'profile')")
def test_torch_timer_times_every_operator_on_the_cpu(tmp_path):
    from astra_hetero.profiling.torch_timer import TorchTimer

    data = h100_spec_data(recompute="selective", tp=2, pp=1, dp=8, global_batch_size=8)
    data["model"] = {
        **data["model"],
        "hidden_size": 256,
        "num_heads": 4,
        "num_kv_heads": 2,
        "ffn_size": 512,
        "vocab_size": 512,
        "seq_len": 128,
        "activation": "swiglu",
        "norm": "rmsnorm",
    }
    # A GPT-style model too: Megatron's own (unfused) layer has bias and layout-copy kernels.
    gpt = {**data, "model": {**data["model"], "activation": "gelu", "norm": "layernorm"}}
    cases = (("fused", data), ("unfused", data), ("unfused", gpt))
    for number, (attention, case) in enumerate(cases):
        spec = parse_spec({**case, "compute": {"attention": attention}})
        timer = TorchTimer(spec.model, device="cpu", warmup=1, repeats=2, allow_cpu=True)
        rows = profile(spec, timer, gpu_label(spec, None))
        table = tmp_path / f"case{number}.csv"
        write_calibration(table, rows)
        assert all(r.time_us > 0 for r in rows)
        assert plan_workload(
            parse_spec({**case, "compute": {"attention": attention}, "calibration": str(table)})
        )
