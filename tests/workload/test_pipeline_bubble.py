"""The interleaved schedule's bubble in the embedded engine equals the closed form (p − 1)/(v·m).

The traces come from the generator (schedule, chunks, p2p, bindings) with every layer's forward and
backward replaced by one fixed-time segment and the embedding, head, optimizer and framework costs
emptied, so that the
pipeline is exactly uniform; the boundary tensors are one byte, so communication is negligible.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from astra_hetero.backends.embedded.backend import EmbeddedBackend
from astra_hetero.chakra_io import write_trace
from astra_hetero.pipeline import build_run_dir
from astra_hetero.spec import parse_spec
from astra_hetero.workload.blocks import OptimizerCost, Segment
from astra_hetero.workload.generate import encoded_traces, plan_workload
from astra_hetero.workload.host import NO_HOST
from tests.conftest import make_spec_data, node_group

FORWARD_NS, BACKWARD_NS = 100_000_000, 200_000_000  # backward = 2 × forward, as for GEMMs


def uniform_pipeline(root: Path, p: int, v: int, m: int, layers_per_chunk: int = 1) -> Path:
    data = make_spec_data(
        cluster={"node_groups": [node_group("h100", "h100-sxm", count=1, gpus_per_node=p)]},
        network={"topology": "single_switch"},
    )
    data["model"] = {**data["model"], "num_layers": p * v * layers_per_chunk}
    data["parallelism"] = {"pp": p, "global_batch_size": m, "virtual_stages": v}
    spec = parse_spec(data)
    build_run_dir(spec, root)
    plan = plan_workload(spec)
    for i, ctx in enumerate(plan.contexts):
        blocks = dataclasses.replace(
            ctx.blocks,
            layer_fwd=(Segment("fwd", 0.0, 0.0, FORWARD_NS),),
            layer_bwd=(Segment("bwd", 0.0, 0.0, BACKWARD_NS),),
            embedding_fwd=(),
            embedding_bwd=(),
            head_fwd=(),
            head_bwd=(),
            optimizer=OptimizerCost(0.0, 0.0, 0.0, 0.0, 0.0, 0.0),
            host=NO_HOST,  # no framework costs per micro-batch or iteration
        )
        plan.contexts[i] = dataclasses.replace(ctx, blocks=blocks, activation_bytes=1)
    for rank, trace in encoded_traces(plan):
        write_trace(root / f"workload/workload.{rank}.et", [trace])
    return root


@pytest.mark.parametrize(
    ("p", "v", "m", "layers_per_chunk"),
    [(4, 1, 8, 1), (4, 2, 8, 1), (4, 4, 8, 1), (2, 2, 4, 2), (4, 2, 4, 1), (3, 3, 6, 1), (8, 2, 16, 1)],
)
def test_bubble_is_p_minus_1_over_v_m_of_the_ideal(tmp_path, p, v, m, layers_per_chunk):
    result = EmbeddedBackend().run(uniform_pipeline(tmp_path, p, v, m, layers_per_chunk)).result
    ideal_us = m * v * layers_per_chunk * (FORWARD_NS + BACKWARD_NS) / 1000
    assert all(r.compute_us == pytest.approx(ideal_us) for r in result.ranks)
    bubble_us = result.iteration_time_us - ideal_us
    # communication: one-byte messages, about 1 µs each, against 0.1 s per layer and pass
    assert bubble_us / ideal_us == pytest.approx((p - 1) / (v * m), rel=1e-3)


def test_more_virtual_stages_shrink_the_bubble_in_proportion(tmp_path):
    bubbles = {}
    for v in (1, 2, 4):
        result = EmbeddedBackend().run(uniform_pipeline(tmp_path / f"v{v}", 4, v, 8, 4 // v)).result
        bubbles[v] = result.iteration_time_us - max(r.compute_us for r in result.ranks)
    assert bubbles[2] == pytest.approx(bubbles[1] / 2, rel=1e-3)
    assert bubbles[4] == pytest.approx(bubbles[1] / 4, rel=1e-3)
