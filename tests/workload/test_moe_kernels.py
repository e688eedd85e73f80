"""The MoE layer's kernels as Megatron-core runs them: grouped vs per-expert GEMMs, token permutation,
the router's load-balancing loss, FP8 casts per expert — against closed forms."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import pytest

from astra_hetero.spec import parse_spec
from astra_hetero.spec.schema import GpuSpec
from astra_hetero.workload.costs import Collective, layer_backward, layer_forward
from astra_hetero.workload.gemm import gemm_time_ns
from astra_hetero.workload.ops import Gemm, Op, shape_of
from astra_hetero.workload.precision import Dtypes
from astra_hetero.workload.timing import OperatorModel
from tests.workload.test_moe import E, H, K, S, moe_spec

H100 = GpuSpec.model_validate({"preset": "h100-sxm"})


def steps_of(precision: dict[str, Any] | None = None, **parallelism: Any) -> tuple[list[Any], list[Any], Any]:
    data = moe_spec(**parallelism)
    if precision:
        data["precision"] = precision
    spec = parse_spec(data)
    x = shape_of(spec.model, spec.parallelism, spec.compute.attention, Dtypes.from_spec(spec))
    return layer_forward(x), layer_backward(x, "none"), x


def op(steps: list[Any], name: str) -> Op:
    (found,) = [s for s in steps if isinstance(s, Op) and s.name == name]
    return found


def test_grouped_gemm_is_the_default_and_runs_one_kernel_per_expert_gemm_kind():
    forward, backward, x = steps_of(ep=2)
    assert x.moe.grouped_gemm and x.moe.local_experts == E // 2
    assert [g.batch for g in op(forward, "expert_fc1").gemms] == [E // 2]
    assert [g.batch for g in op(backward, "expert_fc1").gemms] == [E // 2, E // 2]  # dgrad, wgrad


@pytest.mark.parametrize("ep", [1, 2, 4])
def test_sequential_mlp_runs_one_gemm_of_each_experts_rows_per_local_expert(ep):
    grouped, grouped_bwd, _ = steps_of(ep=ep)
    looped, looped_bwd, x = steps_of(ep=ep, moe_grouped_gemm=False)
    local = E // ep
    rows = math.ceil(S * K / local)  # every rank's S·K copies, shared by its local experts
    fc1 = op(looped, "expert_fc1")
    assert len(fc1.gemms) == local and all(g == Gemm(rows, 2 * 2048, H) for g in fc1.gemms)
    assert len(op(looped_bwd, "expert_fc2").gemms) == 2 * local
    # the same work, only split into kernels
    for name in ("expert_fc1", "expert_fc2"):
        assert op(looped, name).flops == op(grouped, name).flops
        assert op(looped_bwd, name).flops == op(grouped_bwd, name).flops
    # and one activation kernel per expert
    assert op(looped, "expert_swiglu").kernels == local and op(grouped, "expert_swiglu").kernels == 1


@pytest.mark.parametrize("fmt", ["bf16", "fp8"])
@pytest.mark.parametrize("ep", [1, 2, 8])
def test_the_per_expert_loop_costs_the_sum_of_its_gemms_and_never_less_than_grouped(ep, fmt):
    precision = {"compute": fmt} if fmt == "fp8" else None
    model = OperatorModel(H100)
    grouped, grouped_bwd, _ = steps_of(precision, ep=ep)
    looped, looped_bwd, _ = steps_of(precision, ep=ep, moe_grouped_gemm=False)
    for steps, grouped_steps in ((looped, grouped), (looped_bwd, grouped_bwd)):
        for name in ("expert_fc1", "expert_fc2"):
            loop = op(steps, name)
            rates = model.rates_for(loop.gemms[0].fmt)
            assert model.time_ns(loop) == pytest.approx(sum(gemm_time_ns(g, rates) for g in loop.gemms))
            assert model.time_ns(loop) >= model.time_ns(op(grouped_steps, name)) - 1e-6
    # one expert per rank: the loop is the grouped GEMM
    if ep == E:
        assert model.time_ns(op(looped, "expert_fc1")) == pytest.approx(
            model.time_ns(op(grouped, "expert_fc1"))
        )


def test_small_experts_pay_a_fixed_cost_per_expert_in_the_loop():
    """Few rows per expert: each GEMM is latency-bound, so the loop costs about local × one GEMM's
    fixed cost more than a grouped kernel."""
    model = OperatorModel(H100)
    fixed = model.rates_for("bf16").kernel_ns
    grouped, _, _ = steps_of(ep=1)
    looped, _, _ = steps_of(ep=1, moe_grouped_gemm=False)
    extra = model.time_ns(op(looped, "expert_fc1")) - model.time_ns(op(grouped, "expert_fc1"))
    assert extra >= (E - 1) * fixed


@pytest.mark.parametrize("tp", [1, 2])
def test_permutation_moves_top_k_copies_of_every_token_read_and_written(tp):
    forward, backward, x = steps_of(tp=tp, dp=16 // tp, sequence_parallel=tp > 1, ep=2)
    copies_elements = S // tp * K * H  # the rank's sequence shard, top-k copies, hidden wide
    bf16 = 2
    assert op(forward, "moe_permute").bytes == 2 * bf16 * copies_elements  # gather: read + write
    # unpermute: scale (read + write), then zero the rows and scatter-add (read copy, read + write row)
    assert op(forward, "moe_unpermute_scale").bytes == 2 * bf16 * copies_elements
    assert op(forward, "moe_unpermute").bytes == 3 * bf16 * copies_elements
    assert op(forward, "moe_unpermute").kernels == 2
    # backward: the scatter-add's gradient is a gather; the gather's is a scatter-add
    assert op(backward, "moe_unpermute").bytes == 2 * bf16 * copies_elements
    assert op(backward, "moe_permute").bytes == 3 * bf16 * copies_elements


def test_permutation_is_timed_as_the_catalogs_row_gather_kernels():
    from astra_hetero.workload.kernels import kernel_kind

    forward, _, _ = steps_of(ep=2)
    permute = op(forward, "moe_permute")
    gather = kernel_kind("hopper", "embedding")
    model = OperatorModel(H100)
    rate = model.rates.bytes_per_ns * gather.bandwidth_fraction_at(permute.bytes)
    expected = gather.fixed_us * 1e3 + permute.bytes / rate
    assert model.time_ns(permute) == pytest.approx(expected)


@pytest.mark.parametrize("tp", [1, 4])
def test_the_load_balancing_loss_sums_expert_counts_over_the_tp_shards(tp):
    forward, backward, _ = steps_of(tp=tp, dp=16 // tp, sequence_parallel=tp > 1)
    aux = op(forward, "router_aux_loss")
    assert aux.bytes == 12 * (S // tp) * E  # FP32 softmax read + write, summed over tokens
    reduces = [
        s for s in forward if isinstance(s, Collective) and s.bytes == 4 * E and s.kind == "all_reduce"
    ]
    assert len(reduces) == (1 if tp > 1 else 0)
    assert op(backward, "router_aux_loss").kernels == 2


@pytest.mark.parametrize("grouped", [True, False])
def test_fp8_casts_each_local_experts_inputs(grouped):
    forward, _, _ = steps_of({"compute": "fp8"}, ep=2, moe_grouped_gemm=grouped)
    cast = op(forward, "expert_fc1_fp8_cast")
    assert cast.kernels == E // 2
    assert cast.bytes == 4 * S * K * H  # read BF16, write FP8 and its transpose, every copy once
    _, _, bf16 = steps_of(ep=2, moe_grouped_gemm=grouped)
    assert not [s for s in layer_forward(bf16) if isinstance(s, Op) and s.name.endswith("_fp8_cast")]


def test_flash_attention_2_runs_at_its_measured_share_of_cudnn_on_hopper_only():
    from astra_hetero.workload.attention import fused_attention
    from astra_hetero.workload.timing import FLASH2_FRACTION

    _, _, x = steps_of()
    a100 = OperatorModel(GpuSpec.model_validate({"preset": "a100-80"}))
    for attention_pass in ("fwd", "bwd"):
        cudnn = fused_attention(x, attention_pass)
        flash2 = fused_attention(replace(x, attention_kernel="flash2"), attention_pass)
        assert flash2.flops == cudnn.flops and flash2.bytes == cudnn.bytes
        model = OperatorModel(H100)
        fixed = cudnn.kernels * model.rates.kernel_ns
        assert (model.time_ns(flash2) - fixed) == pytest.approx(
            (model.time_ns(cudnn) - fixed) / FLASH2_FRACTION["hopper"]
        )
        assert a100.time_ns(flash2) == a100.time_ns(cudnn)  # the A100 figure is FlashAttention-2's


def test_the_attention_kernel_reaches_the_timed_blocks_from_the_spec():
    from astra_hetero.workload.generate import plan_workload, timed_blocks

    times = {}
    for kernel in ("cudnn", "flash2"):
        data = moe_spec()
        data["compute"] = {"attention_kernel": kernel}
        spec = parse_spec(data)
        (blocks,) = timed_blocks(spec, plan_workload(spec).layout.devices[:1]).values()
        times[kernel] = sum(getattr(item, "time_ns", 0.0) for item in blocks.layer_fwd)
    assert times["flash2"] > times["cudnn"] > 0
