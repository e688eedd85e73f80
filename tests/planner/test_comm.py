"""The planner times communication with the engine's own model: a collective alone takes exactly what
the engine charges it when nothing shares its links, operations started together exactly what they
take together there — under the NCCL-like model and under the ideal one."""

from __future__ import annotations

from pathlib import Path

import pytest

from astra_hetero import pipeline
from astra_hetero.backends.embedded.engine.simulated import setup
from astra_hetero.backends.embedded.engine.static import Engine
from astra_hetero.backends.embedded.rundir.reader import read_run_dir
from astra_hetero.planner.comm import P2P, CommModel, Op
from astra_hetero.spec import parse_spec
from astra_hetero.spec.devices import enumerate_devices
from tests.conftest import make_spec_data


def simulated(tmp_path: Path, model: str, nodes: int = 2, **parallelism: object):
    """(spec, simulator input, every communication the engine ran) of the mixed cluster with `nodes`
    nodes of four GPUs in each of its two groups."""
    data = make_spec_data(collectives={"model": model})
    for group in data["cluster"]["node_groups"]:
        group["count"] = nodes
    data["parallelism"] = {**data["parallelism"], **parallelism}
    spec = parse_spec(data)
    run_dir = pipeline.build_run_dir(spec, tmp_path / "run")
    sim = read_run_dir(run_dir.root)
    workload, comm, _ = setup(sim, None)  # every rank, as written
    return spec, sim, Engine(workload, comm, sim.max_comm_in_flight).run().comms


# the engine rounds each phase of a collective to whole nanoseconds; the planner sums unrounded phases
ROUNDING = 1e-3


@pytest.mark.parametrize("model", ["nccl", "ideal"])
def test_collectives_take_their_time_alone_or_together_as_in_the_engine(tmp_path, model):
    """A TP collective (inside one node) takes its time alone; the two TP indices' data-parallel
    all-reduces of one bucket start together across nodes and take their time together, no less than
    either alone. Other traffic sharing their links can only slow them, so each is never faster than
    predicted, and one of each kind that has its links to itself takes exactly that."""
    spec, sim, comms = simulated(tmp_path, model, nodes=1, tp=2, pp=1, dp=4, global_batch_size=8)
    model_times = CommModel(spec, enumerate_devices(spec.cluster))
    fastest: dict[tuple[object, ...], tuple[int, float]] = {}
    for comm in comms:
        if comm.kind == "send_recv":
            continue
        members = sim.groups[comm.group]
        if len(members) == 2:  # a TP pair
            predicted = model_times.alone_ns(Op(members, comm.kind, comm.size))
        else:  # dp: ranks of one TP index on the four replicas; both TP indices at once
            peers = tuple(r ^ 1 for r in members)  # the same replicas' other TP index
            both = [Op(members, comm.kind, comm.size), Op(peers, comm.kind, comm.size)]
            predicted = model_times.together_ns(both)
            assert predicted >= model_times.alone_ns(both[0])
        key = (len(members), comm.kind, comm.size)
        simulated_ns = comm.end_ns - comm.start_ns
        assert simulated_ns >= predicted * (1 - ROUNDING)
        fastest[key] = min(fastest.get(key, (simulated_ns, predicted)), (simulated_ns, predicted))
    exact = {key[0] for key, (d, p) in fastest.items() if d == pytest.approx(p, rel=ROUNDING)}
    assert exact == {2, 4}  # TP pairs and DP groups both run alone at some point


def test_sends_of_a_cells_tp_ranks_take_their_time_together(tmp_path):
    """Both TP ranks of a cell send to the next stage at once and take their time together; other
    traffic on their links can only slow them, and the fastest such pair takes exactly that."""
    spec, sim, comms = simulated(tmp_path, "nccl", tp=2, pp=2, dp=4, global_batch_size=8)
    model_times = CommModel(spec, enumerate_devices(spec.cluster))
    sends = [c for c in comms if c.kind == "send_recv"]
    gaps = []
    for comm in sends:
        src, dst = _endpoints(comm)
        pair = [Op((src, dst), P2P, comm.size), Op((src ^ 1, dst ^ 1), P2P, comm.size)]
        gaps.append(comm.end_ns - comm.start_ns - model_times.together_ns(pair))
    assert sends and min(gaps) == 0


def _endpoints(comm) -> tuple[int, int]:
    """(sender, receiver) of a transfer the engine ran (it names them `src->dst`)."""
    src, dst = comm.group.split("->")
    return int(src), int(dst)
