"""The planner times communication with the engine's own model: a collective alone takes exactly what
the engine charges it when nothing shares its links, operations started together exactly what they
take together there — under the NCCL-like model and under the ideal one."""

from __future__ import annotations

from pathlib import Path

import pytest

from astra_hetero import pipeline
from astra_hetero.backends.embedded.engine import Engine
from astra_hetero.backends.embedded.rundir_reader import read_run_dir
from astra_hetero.planner.comm import P2P, CommModel, Op
from astra_hetero.spec import parse_spec
from astra_hetero.spec.devices import enumerate_devices
from tests.conftest import make_spec_data


def simulated(tmp_path: Path, model: str, **parallelism: object):
    """(spec, simulator input, every communication the engine ran) of the 16-GPU mixed cluster."""
    data = make_spec_data(collectives={"model": model})
    data["parallelism"] = {**data["parallelism"], **parallelism}
    spec = parse_spec(data)
    run_dir = pipeline.build_run_dir(spec, tmp_path / "run")
    sim = read_run_dir(run_dir.root, 1)
    return spec, sim, Engine(sim).run().comms


@pytest.mark.parametrize("model", ["nccl", "ideal"])
def test_collectives_take_their_time_alone_or_together_as_in_the_engine(tmp_path, model):
    """TP collectives run inside one node with nothing else on its links: each takes its time alone.
    The two TP ranks' data-parallel all-reduces of one bucket start together across nodes: they take
    their time together, no less than either alone."""
    spec, sim, comms = simulated(tmp_path, model, tp=2, pp=1, dp=4, global_batch_size=8)
    model_times = CommModel(spec, enumerate_devices(spec.cluster))
    tp_seen = dp_seen = 0
    for comm in comms:
        if comm.kind == "send_recv":
            continue
        members = sim.groups[comm.group]
        duration = comm.end_ns - comm.start_ns
        if len(members) == 2:  # a TP pair
            assert duration == model_times.alone_ns(Op(members, comm.kind, comm.size))
            tp_seen += 1
        else:  # dp: ranks of one TP index on the four replicas; both TP indices at once
            peers = tuple(r + 1 for r in members)
            both = [Op(members, comm.kind, comm.size), Op(peers, comm.kind, comm.size)]
            assert duration == model_times.together_ns(both) >= model_times.alone_ns(both[0])
            dp_seen += 1
    assert tp_seen and dp_seen


def test_sends_of_a_cells_tp_ranks_take_their_time_together(tmp_path):
    spec, sim, comms = simulated(tmp_path, "nccl", tp=2, pp=2, dp=4, global_batch_size=8)
    model_times = CommModel(spec, enumerate_devices(spec.cluster))
    sends = [c for c in comms if c.kind == "send_recv"]
    assert sends
    for comm in sends:
        src, dst = _endpoints(comm)
        pair = [Op((src, dst), P2P, comm.size), Op((src + 1, dst + 1), P2P, comm.size)]
        assert comm.end_ns - comm.start_ns == model_times.together_ns(pair)


def test_ideal_and_nccl_models_price_the_same_collective_differently():
    spec = parse_spec(make_spec_data())
    ideal = parse_spec(make_spec_data(collectives={"model": "ideal"}))
    devices = enumerate_devices(spec.cluster)
    op = Op((0, 4, 8, 12), "all_reduce", 64 * 2**20)
    assert CommModel(spec, devices).alone_ns(op) != CommModel(ideal, devices).alone_ns(op)


def _endpoints(comm) -> tuple[int, int]:
    """(sender, receiver) of a transfer the engine ran (it names them `src->dst`)."""
    src, dst = comm.group.split("->")
    return int(src), int(dst)
