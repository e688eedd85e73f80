"""Folded simulation (one rank per class of interchangeable ranks) equals the rank-by-rank reference.

On every shipped example (the large ones scaled down in layers, micro-batches and replicas, keeping
their parallel plan's shape and their network), and on run directories where one rank breaks the
symmetry: then that rank and the ranks whose timing it touches fall back to classes of their own.
Each under both communication models: NCCL-like (the default) and ideal (ASTRA-sim's analytical).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from astra_hetero import chakra_io
from astra_hetero.chakra_io import pb
from astra_hetero.jobs.load import load_run_spec, parse_run_spec
from astra_hetero.pipeline import build_run_dir
from astra_hetero.rank_classes import CLASS_MAP
from astra_hetero.spec import parse_spec
from tests.embedded.folding_checks import assert_same_simulation, simulate_both, symmetric_job
from tests.conftest import EXAMPLE_SPECS

EXAMPLES = EXAMPLE_SPECS
MODELS = ("nccl", "ideal")


@pytest.fixture(params=MODELS)
def model(request) -> str:
    """The spec's collectives.model: every folding property holds under both."""
    return request.param


def _scaled(path: Path, model: str):
    """The example's plan and network on fewer micro-batches (4 per replica), and for 128+ GPUs
    fewer layers and (1024 GPUs) replicas, so that the rank-by-rank reference runs in a second."""
    data = load_run_spec(path).model_dump(mode="json")
    if "jobs" in data:  # several jobs sharing the cluster: each on 4 micro-batches per replica
        for job in data["jobs"]:
            job["parallelism"]["global_batch_size"] = 4 * job["parallelism"]["dp"]
        data["collectives"]["model"] = model
        return parse_run_spec(data)
    par = data["parallelism"]
    if par["tp"] * par["pp"] * par["dp"] > 128:
        par["dp"] = 2
        data["cluster"]["node_groups"][0]["count"] = par["tp"] * par["pp"] * 2 // 8
    if par["tp"] * par["pp"] * par["dp"] >= 128:
        data["model"]["num_layers"] = 2 * par["pp"]
    par["global_batch_size"] = 4 * par["dp"] * par["micro_batch_size"]
    data["collectives"]["model"] = model
    # events on links and jitter turn folding off; a device slowdown folds (splitting its classes)
    data["dynamics"] = [e for e in data.get("dynamics", []) if e["event"] == "device_slowdown"]
    return parse_spec(data)


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_every_shipped_example_folds_to_the_rank_by_rank_result(tmp_path, example, model):
    spec = _scaled(example, model)
    build_run_dir(spec, tmp_path / "run", per_rank=True)
    folded, plain = simulate_both(tmp_path / "run")
    assert folded.meta["collective_model"] == model
    assert_same_simulation(folded, plain)
    assert folded.meta["folding"]["rank_classes"] < spec.cluster.num_gpus  # something was folded
    if (tmp_path / "run" / CLASS_MAP).is_file():  # the same directory read through its traces by class
        for trace in (tmp_path / "run" / "workload").glob("workload.*.et"):
            trace.unlink()
        by_class, by_class_plain = simulate_both(tmp_path / "run")
        assert_same_simulation(by_class, folded)
        assert_same_simulation(by_class_plain, plain)
        assert by_class.meta["folding"]["rank_classes"] == folded.meta["folding"]["rank_classes"]


def _symmetric_run(root: Path, model: str) -> Path:
    return symmetric_job(root, collective_model=model)


def _rewrite_trace(path: Path, change) -> None:  # noqa: ANN001 - a node -> None callback
    records = list(chakra_io.iter_records(path.read_bytes()))
    nodes = [pb.Node.FromString(r) for r in records[1:]]
    change(nodes)
    chakra_io.write_trace(
        path,
        [chakra_io.frame(pb.GlobalMetadata.FromString(records[0]))] + [chakra_io.frame(n) for n in nodes],
    )


def test_a_rank_with_different_trace_durations_gets_a_class_and_the_result_still_agrees(tmp_path, model):
    root = _symmetric_run(tmp_path / "run", model)
    before, _ = simulate_both(root)

    def slower(nodes):
        first = next(n for n in nodes if n.type == pb.COMP_NODE and n.duration_micros > 10)
        first.duration_micros += 250

    _rewrite_trace(root / "workload/workload.5.et", slower)
    folded, plain = simulate_both(root)
    assert_same_simulation(folded, plain)
    assert folded.meta["folding"]["rank_classes"] > before.meta["folding"]["rank_classes"]
    assert folded.iteration_time_us > before.iteration_time_us


def test_a_slower_nic_on_one_gpu_splits_the_ranks_it_slows_and_the_result_still_agrees(tmp_path, model):
    root = _symmetric_run(tmp_path / "run", model)
    before, _ = simulate_both(root)
    topology = root / "ns3/topology.txt"
    lines = topology.read_text().splitlines()
    # GPU 6's NIC line: the second link of host 6 (the first goes to its NVSwitch)
    index = [i for i, line in enumerate(lines[2:], 2) if line.split()[0] == "6"][1]
    fields = lines[index].split()
    lines[index] = " ".join([*fields[:2], "100Gbps", *fields[3:]])
    topology.write_text("\n".join(lines) + "\n")
    folded, plain = simulate_both(root)
    assert_same_simulation(folded, plain)
    assert folded.meta["folding"]["rank_classes"] > before.meta["folding"]["rank_classes"]


def _retag_first(kind: int):  # noqa: ANN202 - a trace-rewriting callback
    """Shift the tag of the first node of `kind` by 1000."""

    def change(nodes):
        node = next(n for n in nodes if n.type == kind)
        next(a for a in node.attr if a.name == "comm_tag").int32_val += 1000

    return change


def test_a_transfer_with_a_tag_of_its_own_still_agrees(tmp_path, model):
    # rank 0's first send and rank 8's first recv (its pipeline partner) get a tag no other rank of
    # their classes uses: their traces are no longer twins of their classes' and are decoded
    root = _symmetric_run(tmp_path / "run", model)
    _rewrite_trace(root / "workload/workload.8.et", _retag_first(pb.COMM_RECV_NODE))
    _rewrite_trace(root / "workload/workload.0.et", _retag_first(pb.COMM_SEND_NODE))
    folded, plain = simulate_both(root)
    assert_same_simulation(folded, plain)


def test_identical_traces_on_asymmetric_links_are_not_folded_together(tmp_path):
    # two pairs run the same all-reduce; one pair's machine has 100 Gbit/s NICs, the other 400
    from tests.embedded.rundirs import coll, comp, machines, write_run_dir

    groups = {"a": [0, 2], "b": [1, 3]}  # each pair spans the two machines
    traces = {
        r: [comp(0, 5), coll(1, "all_reduce", 8_000_000, "a" if r % 2 == 0 else "b", (0,))] for r in range(4)
    }
    topology = machines([400, 400], 2)
    lines = topology.splitlines()
    for i, line in enumerate(lines):  # GPU 1's NIC links (host 1 and its NIC switch) at 100 Gbit/s
        ends = line.split()[:2]
        if len(ends) == 2 and ends[0] in ("1", "8") and ends[1] in ("8", "10"):
            lines[i] = line.replace("400Gbps", "100Gbps")
    root = write_run_dir(tmp_path, traces, "\n".join(lines) + "\n", groups)
    folded, plain = simulate_both(root)
    assert_same_simulation(folded, plain)
    simulated_us = sorted(c.duration_us for c in plain.collectives)
    assert simulated_us[0] < simulated_us[-1]  # the slow pair really is slower
    assert folded.meta["folding"]["rank_classes"] == 2  # the pairs alike in traces, apart on the network


def test_a_folded_timeline_gives_every_rank_its_class_spans(tmp_path, model):
    from astra_hetero.backends.embedded.backend import EmbeddedBackend

    root = _symmetric_run(tmp_path / "run", model)
    folded = EmbeddedBackend().run(root).spans
    plain = EmbeddedBackend(fold=False).run(root).spans
    assert Counter(folded) == Counter(plain)


def test_under_the_nccl_model_a_folded_collective_is_priced_as_each_of_its_instances(tmp_path):
    """A flow class of folded collectives keeps the NCCL plan of every group it stands for: the same
    latency and the same bytes per byte of payload as that group's own plan from an independent
    planner; only its links become link classes loaded with the weight of all its instances."""
    from astra_hetero.backends.embedded.folding.fold import fold
    from astra_hetero.backends.embedded.network.nccl import NcclCommPlanner
    from astra_hetero.backends.embedded.network.routing import Router
    from astra_hetero.backends.embedded.rundir.reader import read_run_dir

    sim = read_run_dir(_symmetric_run(tmp_path / "run", "nccl"))
    assert sim.comm.model == "nccl"
    folding = fold(sim, workers=1)
    assert isinstance(folding.planner, NcclCommPlanner)
    reference = NcclCommPlanner(Router(sim.topology), sim.machines, sim.comm)
    folded_instances = 0
    for (group_class, kind, size), phases in folding.comm.network.collective_plans.items():
        names = folding.classes.group_classes[group_class]
        folded_instances += len(names) - 1
        for name in names:
            own = reference.collective(sim.groups[name], kind, size)
            assert len(own) == len(phases)
            for mine, theirs in zip(phases, own, strict=True):
                assert mine.latency_ns == theirs.latency_ns
                assert mine.bytes_fraction == pytest.approx(theirs.bytes_fraction, rel=1e-12)
                assert mine.memory_ns_per_byte == theirs.memory_ns_per_byte == 0.0
                # the class carries every instance's load: no less weight than one instance puts on
                # its busiest link, and no more than all of them together
                assert max(w for _, w in mine.links) >= max(w for _, w in theirs.links) - 1e-9
                assert sum(w for _, w in mine.links) <= len(names) * sum(w for _, w in theirs.links) + 1e-9
    assert folded_instances > 0  # groups were folded together, not each simulated on its own
