"""Activation memory follows each stage's schedule, interleaving included."""

from __future__ import annotations

import pytest

from astra_hetero.errors import InfeasiblePlan
from astra_hetero.spec import parse_spec
from astra_hetero.units import BYTES_PER_GIB
from astra_hetero.workload.generate import plan_workload
from astra_hetero.workload.memory import estimate, peak_layers_in_flight
from tests.conftest import make_spec_data


def spec_with(**parallelism):
    data = make_spec_data()
    data["model"] = {**data["model"], "num_layers": 48}
    data["parallelism"] = {**data["parallelism"], **parallelism}
    return parse_spec(data)


@pytest.mark.parametrize("pp", [2, 4])
@pytest.mark.parametrize("mbs", [4, 16])
def test_1f1b_holds_pp_minus_stage_micro_batches_and_gpipe_all(pp, mbs):
    for stage in range(pp):
        one_f_one_b = spec_with(pp=pp, dp=8 // pp, global_batch_size=mbs * 8 // pp)
        gpipe = spec_with(pp=pp, dp=8 // pp, global_batch_size=mbs * 8 // pp, schedule="gpipe")
        assert peak_layers_in_flight(one_f_one_b, stage, [5], mbs) == 5 * min(pp - stage, mbs)
        assert peak_layers_in_flight(gpipe, stage, [5], mbs) == 5 * mbs


@pytest.mark.parametrize(("pp", "v"), [(2, 2), (4, 2), (4, 3), (8, 2)])
def test_interleaved_first_stage_holds_l_times_1_plus_p_minus_1_over_p_v(pp, v):
    """Korthikanti et al. (2022): the first stage stores L·(1 + (p − 1)/(p·v)) layers' activations
    of one micro-batch, for L = 48 layers split evenly into chunks of 48/(p·v)."""
    spec = spec_with(pp=pp, dp=8 // pp, virtual_stages=v, global_batch_size=4 * pp * 8 // pp)
    per_chunk = 48 // (pp * v)
    held = peak_layers_in_flight(spec, 0, [per_chunk] * v, 4 * pp)
    assert held == pytest.approx(48 * (1 + (pp - 1) / (pp * v)))


def test_unequal_chunks_are_held_for_as_long_as_the_schedule_keeps_them():
    # pp 2, v 2, 4 micro-batches, stage 0 chunks of 3 and 1 layers. Steps and layers held:
    # F0c0 3, F1c0 6, F0c1 7, F1c1 8 (warm-up), F2c0 11, B0c1 10, F3c0 13, B1c1 12, F2c1 13, ...
    spec = spec_with(pp=2, dp=4, virtual_stages=2)
    assert peak_layers_in_flight(spec, 0, [3, 1], 4) == 13


def test_interleaving_can_overfill_a_device_that_fits_without_it():
    """Stage 0 holds 2 micro-batches × 4 layers without interleaving and 5 chunks × 2 layers with v=2."""
    data = make_spec_data()
    plain = parse_spec(data)
    need_plain = estimate(plain, 0, 4, 4).total
    interleaved_data = {**data, "parallelism": {**data["parallelism"], "virtual_stages": 2}}
    need_interleaved = estimate(parse_spec(interleaved_data), 0, 4, 4, [2, 2]).total
    assert need_interleaved > need_plain
    capacity_gib = (need_plain + need_interleaved) / 2 / BYTES_PER_GIB
    for d in (data, interleaved_data):
        d["cluster"] = make_spec_data()["cluster"]
        d["cluster"]["node_groups"][0]["gpu"] = {"preset": "h100-sxm", "memory_gib": capacity_gib}
    plan_workload(parse_spec(data))
    with pytest.raises(InfeasiblePlan, match="stage 0 of replica 0"):
        plan_workload(parse_spec(interleaved_data))


def test_the_manifest_records_each_gpu_types_fullest_device_for_the_whole_iteration():
    from astra_hetero.workload.generate import manifest

    data = make_spec_data(scope={"layers_per_stage": 1, "micro_batches_per_replica": 1})
    data["model"] = {**data["model"], "num_layers": 48}
    spec = parse_spec(data)
    plan = plan_workload(spec)
    recorded = manifest(plan)["memory"]
    full = plan_workload(parse_spec({k: v for k, v in data.items() if k != "scope"}))
    assert set(recorded) == {d.gpu_type for d in plan.layout.devices}
    for gpu, entry in recorded.items():
        cells = [
            estimate(spec, s, full.partition.layers_per_stage[s], full.partition.micro_batches_per_replica[r])
            for s in range(spec.parallelism.pp)
            for r in range(spec.parallelism.dp)
            if plan.layout.devices[plan.layout.rank_of(s, r, 0)].gpu_type == gpu
        ]
        # the whole iteration's need, not the cut-down one the scope simulates
        assert entry["peak_gib"] == pytest.approx(max(c.total for c in cells) / BYTES_PER_GIB, abs=1e-3)
        device = next(d for d in plan.layout.devices if d.gpu_type == gpu)
        assert entry["capacity_gib"] == device.spec.gpu.memory_gib
        assert 0 < entry["peak_gib"] <= entry["capacity_gib"]
