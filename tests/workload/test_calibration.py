"""Calibration tables: exact rows win, other shapes interpolate log-log on the operator's work and
follow the model outside the measured range; derived GPUs inherit their preset's rows as a
correction; every malformed file is a clean error naming the file and line (exit 2)."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from astra_hetero.cli.main import main
from astra_hetero.errors import SpecError
from astra_hetero.spec.schema import GpuSpec
from astra_hetero.workload.calibration import load_calibration
from astra_hetero.workload.costs import operators
from astra_hetero.workload.ops import Shape
from astra_hetero.workload.timing import DeviceCostModel, OperatorModel
from tests.conftest import make_spec_data

X = Shape(b=1, s=2048, h=4096, a=32, kv=32, f=16384, v=50304, t=2, sp=False, swiglu=False)
H100 = GpuSpec.model_validate({"preset": "h100-sxm"})


def table(tmp_path: Path, text: str):
    path = tmp_path / "calibration.csv"
    path.write_text(text)
    return load_calibration(path)


def op(name: str, phase: str = "fwd", x: Shape = X):
    return operators(x)[phase][name]


def test_a_row_for_the_exact_shape_replaces_the_model(tmp_path):
    cost = DeviceCostModel(
        H100, table(tmp_path, "gpu,op,time_us,tp,seq_len\nh100-sxm,qkv_proj.fwd,123,2,2048\n")
    )
    assert cost.time_ns(op("qkv_proj"), "fwd", X) == pytest.approx(123e3)
    assert cost.time_ns(op("mlp_up"), "fwd", X) == OperatorModel(H100).time_ns(op("mlp_up"))


def test_the_most_specific_exact_row_wins(tmp_path):
    text = (
        "gpu,op,time_us,tp,micro_batch_size,seq_len\n"
        "h100-sxm,qkv_proj.fwd,50,,,\nh100-sxm,qkv_proj.fwd,70,2,1,2048\n"
    )
    assert DeviceCostModel(H100, table(tmp_path, text)).time_ns(op("qkv_proj"), "fwd", X) == pytest.approx(
        70e3
    )


def test_between_measured_shapes_time_is_interpolated_log_log_on_work(tmp_path):
    text = "gpu,op,time_us,seq_len\nh100-sxm,qkv_proj.fwd,100,1024\nh100-sxm,qkv_proj.fwd,900,4096\n"
    cost = DeviceCostModel(H100, table(tmp_path, text))
    # A GEMM's work is linear in tokens, so 2048 sits halfway between 1024 and 4096 in log(work).
    assert cost.time_ns(op("qkv_proj"), "fwd", X) == pytest.approx(math.sqrt(100e3 * 900e3))
    at_3000 = replace(X, s=3000)
    fraction = math.log(3000 / 1024) / math.log(4)
    expected = math.exp(math.log(100e3) + fraction * math.log(9))
    assert cost.time_ns(op("qkv_proj", x=at_3000), "fwd", at_3000) == pytest.approx(expected)


def test_micro_batch_and_tp_columns_place_rows_on_the_same_work_axis(tmp_path):
    text = "gpu,op,time_us,tp,micro_batch_size\nh100-sxm,mlp_up.fwd,100,2,1\nh100-sxm,mlp_up.fwd,400,1,2\n"
    cost = DeviceCostModel(H100, table(tmp_path, text))
    between = replace(X, b=2, t=2)  # work is 2× the first row's and half the second's
    assert cost.time_ns(op("mlp_up", x=between), "fwd", between) == pytest.approx(200e3)


def test_outside_the_measured_range_time_follows_the_model(tmp_path):
    cost = DeviceCostModel(H100, table(tmp_path, "gpu,op,time_us,seq_len\nh100-sxm,attention.fwd,300,1024\n"))
    model = OperatorModel(H100)
    short = replace(X, s=1024)
    expected = 300e3 * model.time_ns(op("attention")) / model.time_ns(op("attention", x=short))
    assert cost.time_ns(op("attention"), "fwd", X) == pytest.approx(expected)


def test_a_derived_gpu_inherits_preset_rows_as_a_correction_of_the_model(tmp_path):
    rows = table(tmp_path, "gpu,op,time_us\nh100-sxm,mlp_up.fwd,500\n")
    slow = GpuSpec.model_validate({"preset": "h100-sxm", "name": "slow-h100", "compute_multiplier": 0.5})
    ratio = OperatorModel(slow).time_ns(op("mlp_up")) / OperatorModel(H100).time_ns(op("mlp_up"))
    assert 1.9 < ratio <= 2.0
    assert DeviceCostModel(slow, rows).time_ns(op("mlp_up"), "fwd", X) == pytest.approx(500e3 * ratio)
    own = table(tmp_path, "gpu,op,time_us\nh100-sxm,mlp_up.fwd,500\nslow-h100,mlp_up.fwd,640\n")
    assert DeviceCostModel(slow, own).time_ns(op("mlp_up"), "fwd", X) == pytest.approx(640e3)


def test_step_rows_are_per_million_parameters(tmp_path):
    from astra_hetero.workload.blocks import optimizer_cost

    rows = table(tmp_path, "gpu,op,time_us\nh100-sxm,optimizer_step.step,20\nh100-sxm,grad_norm.step,3\n")
    cost = optimizer_cost(DeviceCostModel(H100, rows), X)
    kernel = OperatorModel(H100).rates.kernel_ns
    assert cost.ns_per_updated_param == pytest.approx((20e3 - kernel + 3e3 - kernel) / 1e6)


def spec_with_calibration(tmp_path: Path, csv_bytes: bytes) -> Path:
    (tmp_path / "cal.csv").write_bytes(csv_bytes)
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({**make_spec_data(), "calibration": "cal.csv"}))
    return spec


BAD_TABLES = {
    "short row": (b"gpu,op,time_us,tp\nh100-sxm,qkv_proj.fwd,100\n", ":2:", "expected 4 fields"),
    "long row": (b"gpu,op,time_us\nh100-sxm,qkv_proj.fwd,100,7\n", ":2:", "expected 3 fields"),
    "nan time": (b"gpu,op,time_us\nh100-sxm,qkv_proj.fwd,nan\n", ":2:", "finite"),
    "inf time": (b"gpu,op,time_us\nh100-sxm,qkv_proj.fwd,inf\n", ":2:", "finite"),
    "huge time": (b"gpu,op,time_us\nh100-sxm,qkv_proj.fwd,1e300\n", ":2:", "finite"),
    "negative time": (b"gpu,op,time_us\nh100-sxm,qkv_proj.fwd,-3\n", ":2:", "> 0"),
    "text time": (b"gpu,op,time_us\nh100-sxm,qkv_proj.fwd,fast\n", ":2:", "not a number"),
    "not utf-8": (b"gpu,op,time_us\nh100-sxm,qkv_proj.fwd,1\nh100-sxm,mlp_up.fwd,\xff\xfe\n", ":3:", "UTF-8"),
    "misspelled op": (b"gpu,op,time_us\nh100-sxm,qkv_prj.fwd,1\n", ":2:", "did you mean qkv_proj.fwd"),
    "unknown pass": (b"gpu,op,time_us\nh100-sxm,qkv_proj.forward,1\n", ":2:", "fwd/bwd/step"),
    "unknown gpu": (b"gpu,op,time_us\nh100-sxn,qkv_proj.fwd,1\n", ":2:", "unknown GPU 'h100-sxn'"),
    "fractional tp": (b"gpu,op,time_us,tp\nh100-sxm,qkv_proj.fwd,1,2.5\n", ":2:", "whole number"),
    "missing column": (b"gpu,time_us\nh100-sxm,1\n", ":1:", "missing column(s) op"),
    "misspelled column": (
        b"gpu,op,time_us,seqlen\nh100-sxm,qkv_proj.fwd,1,2048\n",
        ":1:",
        "unknown column(s) seqlen",
    ),
    "repeated row": (b"gpu,op,time_us\nh100-sxm,qkv_proj.fwd,1\nH100_SXM,qkv_proj.fwd,2\n", ":3:", "line 2"),
    "nul byte": (b"gpu,op,time_us\nh100-sxm,qkv_proj.fwd,1\x00\n", "cal.csv", "cal.csv"),
}


@pytest.mark.parametrize("name", sorted(BAD_TABLES))
def test_a_malformed_table_is_one_clean_error_naming_file_and_line(tmp_path, capsys, name):
    content, where, reason = BAD_TABLES[name]
    spec = spec_with_calibration(tmp_path, content)
    assert main(["generate", str(spec), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: calibration:") and "cal.csv" in err and where in err and reason in err
    assert "Traceback" not in err and not (tmp_path / "out").exists()


def test_rows_for_other_known_gpus_are_allowed(tmp_path):
    spec = spec_with_calibration(tmp_path, b"gpu,op,time_us,note\nmi300x,qkv_proj.fwd,1,other cluster\n")
    assert main(["generate", str(spec), "-o", str(tmp_path / "out"), "--quiet"]) == 0


def test_an_unreadable_table_is_an_error(tmp_path):
    with pytest.raises(SpecError, match="cannot read"):
        load_calibration(tmp_path)


SECRET = "S3CR3T-token-never-shown"
PRIVATE_TABLES = {
    "operator": (f"gpu,op,time_us\nh100-sxm,{SECRET}.fwd,1\n", ":2:", "unknown operator; known:"),
    "pass": (f"gpu,op,time_us\nh100-sxm,qkv_proj.{SECRET}\n", ":2:", "expected 3 fields"),
    "op form": (f"gpu,op,time_us\nh100-sxm,{SECRET},1\n", ":2:", "op must be <operator>.<pass>"),
    "time": (f"gpu,op,time_us\nh100-sxm,qkv_proj.fwd,{SECRET}\n", ":2:", "time_us is not a number"),
    "tp": (f"gpu,op,time_us,tp\nh100-sxm,qkv_proj.fwd,1,{SECRET}\n", ":2:", "tp must be a whole number"),
    "column": (
        f"gpu,op,time_us,{SECRET}\nh100-sxm,qkv_proj.fwd,1,2\n",
        ":1:",
        "unknown column(s) at position(s) 4",
    ),
    "gpu": (f"gpu,op,time_us\n{SECRET},qkv_proj.fwd,1\n", ":2:", "unknown GPU; known:"),
}


@pytest.mark.parametrize("name", sorted(PRIVATE_TABLES))
def test_a_table_outside_the_specs_directory_is_never_quoted(tmp_path, capsys, name):
    content, where, reason = PRIVATE_TABLES[name]
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere/secret.csv").write_text(content)
    (tmp_path / "specs").mkdir()
    spec = tmp_path / "specs/spec.yaml"
    spec.write_text(yaml.safe_dump({**make_spec_data(), "calibration": "../elsewhere/secret.csv"}))
    assert main(["generate", str(spec), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert SECRET.lower() not in err.lower()
    assert "secret.csv" + where in err and reason in err, err


def test_a_table_beside_the_spec_is_quoted_to_help_fix_it(tmp_path, capsys):
    spec = spec_with_calibration(tmp_path, f"gpu,op,time_us\nh100-sxm,{SECRET}.fwd,1\n".encode())
    assert main(["generate", str(spec), "-o", str(tmp_path / "out")]) == 2
    assert f"unknown operator '{SECRET}.fwd'" in capsys.readouterr().err
