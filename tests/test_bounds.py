"""The work a spec asks for is estimated before it is done, close to what generation then does, and
refused past limits that can be raised, with the field that drives it."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import yaml

from astra_hetero.bounds import WorkLimits, WorkTooLarge, check_work, estimate_work
from astra_hetero.cli.main import main
from astra_hetero.jobs.build import check_shared_work
from astra_hetero.jobs.load import load_run_spec
from astra_hetero.spec import parse_spec
from astra_hetero.spec.schema.jobs import SharedClusterSpec
from astra_hetero.topology import build_cluster_graph
from astra_hetero.workload.generate import class_graph, plan_workload
from tests.conftest import example_specs, make_spec_data

ROOT = Path(__file__).parents[1]


def trace_nodes(spec) -> int:
    plan = plan_workload(spec)
    sizes: dict = {}
    for ctx in plan.contexts:
        if ctx not in sizes:
            sizes[ctx] = len(class_graph(plan, ctx).nodes)
    return sum(sizes[ctx] for ctx in plan.contexts)


def sixteen_gpus(tp: int, pp: int, layers: int, per_replica: int, **parallelism) -> dict:
    data = make_spec_data()
    data["model"]["num_layers"] = layers
    data["cluster"]["node_groups"] = [
        {
            "name": "h",
            "count": 4,
            "gpus_per_node": 4,
            "gpu": "h100-sxm",
            "intra_node_fabric": "nvlink4",
            "nic": 400,
        }
    ]
    dp = 16 // (tp * pp)
    data["parallelism"] = {"tp": tp, "pp": pp, "dp": dp, "global_batch_size": per_replica * dp, **parallelism}
    return data


CASES = [
    (tp, pp, layers, mb, sp, recompute)
    for tp, pp, layers, mb, sp, recompute in itertools.product(
        [1, 2, 4], [1, 4], [4, 16], [1, 8], [False, True], ["none", "full", "selective_op"]
    )
    if not (sp and tp == 1)
]


@pytest.mark.parametrize("tp,pp,layers,mb,sp,recompute", CASES)
def test_trace_node_estimate_is_close_to_what_is_generated(tp, pp, layers, mb, sp, recompute):
    spec = parse_spec(sixteen_gpus(tp, pp, layers, mb, sequence_parallel=sp, recompute=recompute))
    ratio = estimate_work(spec).trace_nodes / trace_nodes(spec)
    assert 0.8 <= ratio <= 3.0


NETWORK_SPECS = sorted((ROOT / "network_configs").glob("*.yaml"))


@pytest.mark.parametrize("path", NETWORK_SPECS, ids=lambda p: p.stem)
@pytest.mark.parametrize("topology", ["single_switch", "spine_leaf", "rail_optimized"])
def test_network_size_is_counted_as_the_cluster_is_built(path, topology):
    shipped = yaml.safe_load(path.read_text())
    data = make_spec_data(
        cluster=shipped["cluster"], network={**shipped.get("network", {}), "topology": topology}
    )
    gpus = sum(g["count"] * g["gpus_per_node"] for g in shipped["cluster"]["node_groups"])
    data["parallelism"] = {"tp": 1, "pp": 1, "dp": gpus, "global_batch_size": gpus}
    spec = parse_spec(data)
    graph = build_cluster_graph(spec)
    work = estimate_work(spec)
    assert (work.network_nodes, work.network_links) == (graph.number_of_nodes(), graph.number_of_edges())


@pytest.mark.parametrize("path", example_specs(), ids=lambda p: p.stem)
def test_every_shipped_example_fits_the_default_limits(path):
    spec = load_run_spec(path)
    if isinstance(spec, SharedClusterSpec):  # several jobs: each within the limits, and their sum
        check_shared_work(spec, WorkLimits())
    else:
        check_work(spec, WorkLimits())


def with_parallelism(**changes) -> dict:
    data = make_spec_data()
    data["parallelism"] = {**data["parallelism"], **changes}
    return data


def with_network(**changes) -> dict:
    data = make_spec_data()
    data["network"] = {**data["network"], **changes}
    return data


def with_nics(count: int) -> dict:
    data = make_spec_data()
    data["cluster"]["node_groups"][0]["nic"] = {"gbps": 400, "count": count}
    return data


@pytest.mark.parametrize(
    "data,field,says",
    [
        (with_parallelism(global_batch_size=200_000), "parallelism.global_batch_size", "--max-rank-nodes"),
        (with_parallelism(global_batch_size=10**12), "parallelism.global_batch_size", "--max-nodes"),
        (with_network(num_spines=1_000_000), "network.num_spines", "--max-links"),
        (with_nics(1_000_000), "cluster.node_groups[0].nic.count", "--max-links"),
    ],
    ids=["batch-2e5", "batch-1e12", "spines-1e6", "nics-1e6"],
)
def test_too_much_work_is_refused_naming_the_field_and_the_limit(data, field, says):
    with pytest.raises(WorkTooLarge) as caught:
        check_work(parse_spec(data), WorkLimits())
    assert caught.value.field == field and says in str(caught.value)


def test_the_limit_can_be_raised():
    spec = parse_spec(with_parallelism(global_batch_size=4096))
    with pytest.raises(WorkTooLarge):
        check_work(spec, WorkLimits(max_nodes=100_000))
    check_work(spec, WorkLimits(max_nodes=10_000_000))


def test_format_limits_hold_whatever_the_limits():
    spec = parse_spec(with_parallelism(global_batch_size=4 * 1_000_000))
    with pytest.raises(WorkTooLarge, match="pipeline message tags"):
        check_work(spec, WorkLimits(max_nodes=10**18, max_rank_nodes=10**18, max_flows=10**18))


def test_cli_refuses_before_writing_and_accepts_a_raised_limit(tmp_path, capsys):
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(with_parallelism(global_batch_size=64)))
    out = tmp_path / "run"
    assert main(["generate", str(spec), "-o", str(out), "--max-nodes", "1000"]) == 2
    assert "--max-nodes 1,000" in capsys.readouterr().err and not out.exists()
    assert main(["generate", str(spec), "-o", str(out), "--max-nodes", "1e6", "--quiet"]) == 0


def frontier(gpus: int = 131_072, **extra) -> dict:
    """GPT-3 175B, TP8 · PP16, 16 micro-batches per replica, on `gpus` H100s in spine-leaf."""
    dp = gpus // 128
    return make_spec_data(
        model={"preset": "gpt3-175b"},
        cluster={
            "node_groups": [
                {
                    "name": "h100",
                    "count": gpus // 8,
                    "gpus_per_node": 8,
                    "gpu": "h100-sxm",
                    "intra_node_fabric": "nvlink4",
                    "nic": 400,
                }
            ]
        },
        network={"topology": "spine_leaf", "nodes_per_leaf": 16},
        parallelism={"tp": 8, "pp": 16, "dp": dp, "global_batch_size": 16 * dp, "sequence_parallel": True},
        **extra,
    )


def test_a_frontier_job_passes_the_default_limits_by_its_classes_not_its_ranks():
    spec = parse_spec(frontier())
    work = check_work(spec, WorkLimits())
    assert work.classes == 16  # one per pipeline stage
    assert work.class_trace_nodes * work.ranks == pytest.approx(work.trace_nodes * 16, rel=1e-6)
    assert work.trace_nodes > WorkLimits().max_nodes  # rank by rank it would not pass
    with pytest.raises(WorkTooLarge, match="--max-nodes"):
        check_work(spec, WorkLimits(), per_rank=True)


def test_jitter_makes_every_rank_a_class_and_the_limits_bound_it():
    spec = parse_spec(frontier(dynamics=[{"event": "jitter", "sigma": 0.1}]))
    assert estimate_work(spec).classes == spec.cluster.num_gpus
    with pytest.raises(WorkTooLarge, match="131,072 rank classes"):
        check_work(spec, WorkLimits())


def test_a_slowed_node_adds_classes_around_its_gpus():
    slowed = [{"event": "device_slowdown", "node_group": "h100", "node": 3, "factor": 0.5}]
    assert estimate_work(parse_spec(frontier(dynamics=slowed))).classes == 16 + 4 * 8


@pytest.mark.parametrize("path", example_specs(), ids=lambda p: p.stem)
def test_the_class_estimate_bounds_the_classes_the_generator_writes(path):
    from astra_hetero.workload.generate import class_traces

    spec = load_run_spec(path)
    if isinstance(spec, SharedClusterSpec) or spec.cluster.num_gpus > 128:
        pytest.skip("several jobs keep per-rank traces; large examples are covered by the slow suite")
    classes, _ = class_traces(plan_workload(spec))
    assert classes.num_classes <= estimate_work(spec).classes
