"""Precision: every tensor class has the width its recipe says, in memory, in operators and in traces;
GEMM time follows the format's rate where compute-bound and the bytes where memory-bound."""

from __future__ import annotations

from dataclasses import replace

import pytest

from astra_hetero.errors import SpecError
from astra_hetero.spec import parse_spec
from astra_hetero.spec.schema import GpuSpec
from astra_hetero.workload.costs import layer_forward, operators
from astra_hetero.workload.gemm import gemm_time_ns
from astra_hetero.workload.ops import Gemm, Op, Shape
from astra_hetero.workload.precision import Dtypes, adam_step_bytes
from astra_hetero.workload.timing import OperatorModel
from tests.conftest import make_spec_data


def spec_with(precision=None, gpu="h100-sxm", **parallelism):
    data = make_spec_data()
    for group in data["cluster"]["node_groups"]:
        group["gpu"] = gpu
        group["intra_node_fabric"] = "nvlink4"
    data["parallelism"] = {**data["parallelism"], **parallelism}
    if precision is not None:
        data["precision"] = precision
    return parse_spec(data)


@pytest.mark.parametrize(
    ("precision", "widths"),
    [
        # (activation, GEMM input, params, grads, optimizer bytes per parameter)
        ({}, (2, 2, 2, 4, 12)),  # Megatron's mixed precision: FP32 master + moments
        ({"compute": "fp8"}, (2, 1, 2, 4, 12)),
        ({"compute": "fp16"}, (2, 2, 2, 4, 12)),
        ({"optimizer_states": "bf16", "grads": "bf16"}, (2, 2, 2, 2, 6)),  # NeMo distributed Adam
        ({"compute": "tf32"}, (4, 4, 4, 4, 8)),  # FP32 weights are their own master copy
        ({"compute": "fp32"}, (4, 4, 4, 4, 8)),
        ({"compute": "bf16", "params": "fp32"}, (2, 2, 4, 4, 8)),  # AMP over FP32 weights
    ],
)
def test_widths_follow_the_recipe(precision, widths):
    dt = Dtypes.from_spec(spec_with(precision))
    assert (
        dt.activation_bytes,
        dt.gemm_input_bytes,
        dt.param_bytes,
        dt.grad_bytes,
        dt.optimizer_bytes,
    ) == widths


def test_adam_step_moves_its_states_once_each_way():
    # read grad 4, master 4, m 4, v 4; write master, m, v and the BF16 weight 2
    assert adam_step_bytes(Dtypes()) == 30
    # FP32 weights of record: read grad, weights, m, v; write weights, m, v
    assert adam_step_bytes(Dtypes(compute="fp32", params="fp32")) == 28
    # BF16 state: read grad 2, master 2, m 2, v 2; write those three and the weight
    assert adam_step_bytes(Dtypes(grads="bf16", optimizer_states="bf16")) == 16


def test_grads_unset_follow_grad_reduce_in_fp32():
    assert Dtypes.from_spec(spec_with(grad_reduce_in_fp32=False)).grads == "bf16"
    assert Dtypes.from_spec(spec_with({"grads": "bf16"})).grads == "bf16"


def test_contradicting_gradient_widths_are_refused():
    with pytest.raises(SpecError, match="precision.grads"):
        spec_with({"grads": "bf16"}, grad_reduce_in_fp32=True)


def test_fp8_on_a_gpu_without_fp8_tensor_cores_is_refused():
    with pytest.raises(SpecError, match=r"fp8_tflops.*A100"):
        spec_with({"compute": "fp8"}, gpu="a100-80")


@pytest.mark.parametrize("bad", [{"compute": "tf32", "params": "bf16"}, {"fp8_recipe": "delayed"}])
def test_inconsistent_recipes_are_refused(bad):
    with pytest.raises(SpecError, match="precision"):
        spec_with(bad)


H100 = GpuSpec.model_validate({"preset": "h100-sxm"})
BIG = Gemm(16384, 16384, 16384)  # compute-bound in any format
SKINNY = Gemm(16384, 16384, 16)  # K = 16: operands and output dominate, memory-bound


def _as(g: Gemm, dt: Dtypes) -> Gemm:
    return replace(g, fmt=dt.matmul, operand_bytes=dt.gemm_input_bytes, c_bytes=dt.activation_bytes)


def test_fp8_halves_gemm_time_where_compute_bound():
    """At equal achievable fractions FP8's doubled peak halves a large GEMM's time; with the catalog's
    measured fractions (MAMF: FP8 reaches less of its peak than BF16) the gain is that much smaller."""
    even = GpuSpec.model_validate({"preset": "h100-sxm", "fp8_efficiency": H100.compute_efficiency})
    for gpu, expected in (
        (even, 0.5),
        (H100, 0.5 * H100.compute_efficiency / H100.matmul_efficiency("fp8")),
    ):
        model = OperatorModel(gpu)
        bf16 = gemm_time_ns(_as(BIG, Dtypes()), model.rates_for("bf16"))
        fp8 = gemm_time_ns(_as(BIG, Dtypes(compute="fp8")), model.rates_for("fp8"))
        assert fp8 / bf16 == pytest.approx(expected, rel=0.01)
    assert H100.fp8_tflops == pytest.approx(2 * H100.bf16_tflops, rel=1e-4)


def test_fp8_does_not_halve_gemm_time_where_memory_bound():
    model = OperatorModel(H100)
    bf16 = _as(SKINNY, Dtypes())
    fp8 = _as(SKINNY, Dtypes(compute="fp8"))
    t_bf16 = gemm_time_ns(bf16, model.rates_for("bf16"))
    t_fp8 = gemm_time_ns(fp8, model.rates_for("fp8"))
    # the output stays BF16: time follows the bytes moved, not the FP8 rate
    assert t_fp8 / t_bf16 == pytest.approx(fp8.bytes / bf16.bytes, rel=0.05)
    assert t_fp8 / t_bf16 > 0.9


def test_tf32_gemms_run_at_the_tf32_rate_on_fp32_tensors():
    model = OperatorModel(H100)
    g = _as(BIG, Dtypes(compute="tf32", params="fp32"))
    assert g.operand_bytes == 4
    bf16 = gemm_time_ns(_as(BIG, Dtypes()), model.rates_for("bf16"))
    tf32 = gemm_time_ns(g, model.rates_for("tf32"))
    ratio = H100.effective_matmul_flops_per_ns("bf16") / H100.effective_matmul_flops_per_ns("tf32")
    assert tf32 / bf16 == pytest.approx(ratio, rel=0.01)


X = Shape(b=1, s=4096, h=8192, a=64, kv=8, f=28672, v=128256, t=4, sp=True, swiglu=True)


def test_layer_gemms_of_an_fp8_recipe_read_one_byte_operands_and_keep_the_lm_head_bf16():
    fp8 = replace(X, dtypes=Dtypes(compute="fp8", fp8_recipe="delayed"))
    ops = operators(fp8)
    for name in ("qkv_proj", "attn_out_proj", "mlp_gate_up", "mlp_down"):
        assert {g.fmt for g in ops["fwd"][name].gemms} == {"fp8"}
        assert {g.operand_bytes for g in ops["bwd"][name].gemms} == {1}
    assert {g.fmt for g in ops["fwd"]["lm_head"].gemms} == {"bf16"}
    assert ops["fwd"]["attention"].fmt == "bf16"


def test_fp8_collectives_gather_fp8_inputs_and_reduce_bf16_outputs():
    """Sequence parallelism under FP8: TE all-gathers the FP8 norm output; reduce-scatters stay BF16."""
    steps = layer_forward(replace(X, dtypes=Dtypes(compute="fp8", fp8_recipe="delayed")))
    kinds = [(s.kind, s.bytes) for s in steps if not isinstance(s, Op)]
    full = X.tokens * X.h
    assert kinds == [
        ("all_gather", full),
        ("reduce_scatter", 2 * full),
        ("all_gather", full),
        ("reduce_scatter", 2 * full),
    ]


def test_fp32_activations_double_every_activation_message():
    steps = layer_forward(replace(X, dtypes=Dtypes(compute="fp32", params="fp32")))
    assert {s.bytes for s in steps if not isinstance(s, Op)} == {4 * X.tokens * X.h}


def test_current_scaling_adds_an_amax_pass_and_a_tp_amax_reduction_per_norm_fed_layer():
    delayed = layer_forward(replace(X, dtypes=Dtypes(compute="fp8", fp8_recipe="delayed")))
    current = layer_forward(replace(X, dtypes=Dtypes(compute="fp8", fp8_recipe="current")))
    tiny = [s for s in current if not isinstance(s, Op) and s.bytes == 4]
    assert [s.kind for s in tiny] == ["all_reduce", "all_reduce"]
    extra = sum(s.bytes for s in current if isinstance(s, Op)) - sum(
        s.bytes for s in delayed if isinstance(s, Op)
    )
    norm_out = X.elementwise_tokens * X.h
    # per norm-fed layer: +1 B norm write, +2 B amax read, +3 B cast; per plain input +2 B amax
    plain = X.tokens * (X.h // X.t + X.f // X.t)
    assert extra == pytest.approx(2 * norm_out * (1 + 2 + 3) + 2 * plain)


def nemotron_340b(precision: dict) -> object:
    """NVIDIA's Nemotron-4 340B on 128 H100s (dgxc-benchmarking nemotron/README_340b.md, NeMo 24.11:
    TP 8, PP 8, VP 12, MBS 1, GBS 32, sequence parallel, selective recompute; its NeMo config,
    nemotron4-340b-synth.yaml, trains with distributed_fused_adam, dtype bf16, grad_sync_dtype bf16)."""
    data = {
        "model": "nemotron-4-340b",
        "cluster": {
            "node_groups": [
                {
                    "count": 16,
                    "gpus_per_node": 8,
                    "gpu": "h100-sxm",
                    "intra_node_fabric": "nvlink4",
                    "nic": 400,
                }
            ]
        },
        "parallelism": {
            "tp": 8,
            "pp": 8,
            "dp": 2,
            "virtual_stages": 12,
            "micro_batch_size": 1,
            "global_batch_size": 32,
            "sequence_parallel": True,
            "recompute": "selective",
            "distributed_optimizer": True,
        },
        "precision": precision,
    }
    return parse_spec(data)


def test_the_published_nemotron_340b_run_fits_80_gb_with_nemos_bf16_optimizer_state():
    from astra_hetero.workload.memory import estimate

    gib = 2**30
    nemo = estimate(nemotron_340b({"grads": "bf16", "optimizer_states": "bf16"}), 0, 12, 16, [1] * 12)
    fp32_state = estimate(nemotron_340b({}), 0, 12, 16, [1] * 12)
    params = nemo.weights / 2  # parameters on one GPU of the first stage
    # BF16 weights 2 B, BF16 gradient buffer 2 B, BF16 parameter copy and two moments 6 B over dp = 2
    assert (nemo.weights, nemo.gradients, nemo.optimizer) == pytest.approx(
        (2 * params, 2 * params, 3 * params)
    )
    assert (fp32_state.gradients, fp32_state.optimizer) == pytest.approx((4 * params, 6 * params))
    assert nemo.total < 80 * gib < fp32_state.total
    assert nemo.activations == fp32_state.activations


def _trace_messages(precision: dict) -> dict[str, int]:
    """Message bytes by kind over the first rank class's program: pipeline sends, TP and DP collectives
    (DP buckets are sized in bytes, so their count follows the width: compare totals)."""
    from astra_hetero.workload.generate import class_graph, plan_workload

    spec = spec_with(precision, tp=2, pp=2, dp=4, distributed_optimizer=True)
    plan = plan_workload(spec)
    graph = class_graph(plan, plan.contexts[0])
    totals: dict[str, int] = {}
    for node in graph.nodes:
        if node.kind in ("send", "coll"):
            key = "p2p" if node.kind == "send" else f"{node.group}.{node.comm_type}"
            totals[key] = totals.get(key, 0) + node.bytes
    return totals


def test_trace_messages_follow_the_precision():
    bf16 = _trace_messages({})
    fp32 = _trace_messages({"compute": "fp32"})
    nemo = _trace_messages({"grads": "bf16"})
    # activations: pipeline sends and TP all-reduces double from BF16 to FP32
    assert fp32["p2p"] == 2 * bf16["p2p"] and fp32["tp.all_reduce"] == 2 * bf16["tp.all_reduce"]
    # DP gradient reduce-scatters follow the gradient width (FP32 by default, BF16 as NeMo runs)
    assert nemo["dp.reduce_scatter"] == pytest.approx(bf16["dp.reduce_scatter"] / 2, rel=1e-6)
    assert fp32["dp.reduce_scatter"] == bf16["dp.reduce_scatter"]
    # the distributed optimizer's parameter all-gathers move the weights: BF16, or FP32 ones
    assert fp32["dp.all_gather"] == pytest.approx(2 * bf16["dp.all_gather"], rel=1e-6)
    assert nemo["dp.all_gather"] == pytest.approx(bf16["dp.all_gather"], rel=1e-6)
