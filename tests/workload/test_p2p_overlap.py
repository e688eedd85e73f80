"""Pipeline sends with and without overlap_p2p_comm: who waits for them."""

from __future__ import annotations

from astra_hetero.spec import parse_spec
from astra_hetero.workload.generate import class_graph, plan_workload
from astra_hetero.workload.program import COMP, SEND
from tests.conftest import make_spec_data


def first_stage_graph(overlap: bool):
    data = make_spec_data()
    data["parallelism"] = {**data["parallelism"], "overlap_p2p_comm": overlap}
    plan = plan_workload(parse_spec(data))
    ctx = next(c for p, c in zip(plan.layout.active_ranks, plan.contexts, strict=True) if c.stage == 0)
    return class_graph(plan, ctx)


def waits_on_sends(graph) -> list[int]:
    """Sends some compute node waits for (as a data dependency)."""
    sends = {n.id for n in graph.nodes if n.kind == SEND}
    return [d for n in graph.nodes if n.kind == COMP for d in n.data_deps if d in sends]


def test_overlapped_sends_hold_back_no_compute():
    assert waits_on_sends(first_stage_graph(True)) == []


def test_without_overlap_the_next_compute_waits_for_each_send():
    graph = first_stage_graph(False)
    sends = [n.id for n in graph.nodes if n.kind == SEND]
    assert sends and sorted(waits_on_sends(graph)) == sends
