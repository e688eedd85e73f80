"""Property: on any small job the generator can build, folded and rank-by-rank simulation agree.

Jobs are drawn over the structures folding must get right: homogeneous and mixed GPU types, one NIC
per GPU or NICs shared by a node's GPUs, single switch, spine-leaf (oversubscribed or not) and
rail-optimized fabrics, the NCCL-like collective model (NCCL's own choice or a forced ring or tree)
and the ideal one (ring or hierarchical), ASTRA-sim's one-op rule, 1F1B and GPipe.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from astra_hetero.errors import FieldError
from astra_hetero.pipeline import build_run_dir
from astra_hetero.spec import parse_spec
from tests.conftest import TINY_MODEL
from tests.embedded.folding_checks import assert_same_simulation, simulate_both

GPUS = {"h100-sxm": "nvlink4", "a100-80": "nvlink3", "l40s": "pcie4"}


@st.composite
def small_jobs(draw: st.DrawFn) -> dict[str, Any]:
    gpus_per_node = draw(st.sampled_from([2, 4]))
    kinds = draw(st.lists(st.sampled_from(sorted(GPUS)), min_size=1, max_size=2, unique=True))
    shared = draw(st.booleans())
    groups = []
    for index, gpu in enumerate(kinds):
        nic: Any = (
            {"gbps": draw(st.sampled_from([100, 400])), "count": 1}
            if shared
            else draw(st.sampled_from([100, 200, 400]))
        )
        groups.append(
            {
                "name": f"g{index}",
                "count": draw(st.integers(1, 2)),
                "gpus_per_node": gpus_per_node,
                "gpu": gpu,
                "intra_node_fabric": GPUS[gpu],
                "nic": nic,
            }
        )
    num_gpus = sum(g["count"] for g in groups) * gpus_per_node
    topology = draw(st.sampled_from(["single_switch", "spine_leaf", "rail_optimized"]))
    network: dict[str, Any] = {"topology": topology}
    if topology == "spine_leaf":
        network |= {
            "nodes_per_leaf": draw(st.integers(1, 2)),
            "oversubscription": draw(st.sampled_from([1.0, 2.0])),
        }
    tp = draw(st.sampled_from([t for t in (1, 2, 4) if gpus_per_node % t == 0]))
    pp = draw(st.sampled_from([p for p in (1, 2, 4) if (num_gpus // tp) % p == 0]))
    dp = num_gpus // (tp * pp)
    return {
        "name": "drawn",
        "model": dict(TINY_MODEL),
        "cluster": {"node_groups": groups},
        "network": network,
        "parallelism": {
            "tp": tp,
            "pp": pp,
            "dp": dp,
            "micro_batch_size": 1,
            "global_batch_size": dp * draw(st.integers(1, 4)),
            "schedule": draw(st.sampled_from(["1f1b", "gpipe"])),
            "sequence_parallel": tp > 1 and draw(st.booleans()),
            "distributed_optimizer": draw(st.booleans()),
        },
        "collectives": _collectives(draw),
    }


def _collectives(draw: st.DrawFn) -> dict[str, Any]:
    model = draw(st.sampled_from(["nccl", "ideal"]))
    algorithms = ["auto", "ring", "tree"] if model == "nccl" else ["ring", "hierarchical"]
    return {
        "model": model,
        "algorithm": draw(st.sampled_from(algorithms)),
        "max_in_flight_per_rank": draw(st.sampled_from([None, 1])),
    }


@settings(max_examples=14, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(job=small_jobs())
def test_folded_and_rank_by_rank_simulation_agree_on_drawn_jobs(tmp_path_factory, job):
    assert_folding_holds(tmp_path_factory, job)


def assert_folding_holds(tmp_path_factory, job: dict[str, Any]) -> None:  # noqa: ANN001 - pytest fixture
    try:
        spec = parse_spec(job)
    except FieldError:
        assume(False)  # a plan the spec rejects (memory, partition): not a job
    root = tmp_path_factory.mktemp("job")
    try:
        build_run_dir(spec, root / "run")
    except FieldError:
        assume(False)
    folded, plain = simulate_both(root / "run")
    assert_same_simulation(folded, plain)


@st.composite
def modern_jobs(draw: st.DrawFn) -> dict[str, Any]:
    """Jobs with the newer parallelisms: context parallelism (ring or all-gather), experts over EP
    (all-to-all or all-gather dispatch, with imbalance), ZeRO stages and FSDP, TP overlap."""
    job = draw(small_jobs())
    par = job["parallelism"]
    num_gpus = par["tp"] * par["pp"] * par["dp"]
    cp = draw(st.sampled_from([c for c in (1, 2) if (num_gpus // (par["tp"] * par["pp"])) % c == 0]))
    par["dp"] //= cp
    par.update(cp=cp, global_batch_size=par["dp"] * draw(st.integers(1, 3)))
    if cp > 1:
        par["cp_comm"] = draw(st.sampled_from(["p2p", "all_gather"]))
    if draw(st.booleans()):
        job["model"]["activation"] = "swiglu"
        job["model"]["moe"] = {"num_experts": 4, "top_k": 2, "expert_ffn_size": 1024}
        if draw(st.booleans()):
            job["model"]["moe"]["imbalance"] = 0.5
        per_stage = par["tp"] * cp * par["dp"]
        par["ep"] = draw(st.sampled_from([e for e in (1, 2, 4) if per_stage % e == 0]))
        par["moe_token_dispatcher"] = draw(st.sampled_from(["alltoall", "allgather"]))
        par["sequence_parallel"] = par["tp"] > 1
    par["zero_stage"] = draw(st.sampled_from([0, 1, 2, 3]))
    par.pop("distributed_optimizer")
    par["tp_comm_overlap"] = par["sequence_parallel"] and draw(st.booleans())
    par["overlap_p2p_comm"] = draw(st.booleans())
    return job


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(job=modern_jobs())
def test_folded_and_rank_by_rank_simulation_agree_on_drawn_moe_cp_zero_jobs(tmp_path_factory, job):
    assert_folding_holds(tmp_path_factory, job)
