"""trace.json's communication spans say what ran: the collective's (or transfer's) bytes and ranks,
and the algorithm and protocol the communication model chose for it — the same choices result.json's
`meta.nccl_choices` counts — on the static and the dynamic engine, folded or not."""

from __future__ import annotations

import json

import pytest

from astra_hetero.pipeline import run_spec
from astra_hetero.spec import parse_spec
from tests.test_pipeline import small_spec

COMM_KINDS = ("comm", "send", "recv")


def comm_spans(run_dir):
    trace = json.loads((run_dir / "trace.json").read_text())
    return [e for e in trace["traceEvents"] if e.get("cat") in COMM_KINDS]


@pytest.mark.parametrize("iterations", [1, 2], ids=["static", "dynamic"])
@pytest.mark.parametrize("fold", [True, False], ids=["folded", "plain"])
def test_every_communication_span_carries_size_algorithm_and_protocol(tmp_path, iterations, fold):
    result = run_spec(parse_spec(small_spec(iterations=iterations)), tmp_path / "run", fold=fold)
    spans = comm_spans(tmp_path / "run")
    assert spans
    assert all({"bytes", "ranks", "algorithm", "protocol"} <= set(e["args"]) for e in spans)
    choices = result.meta["nccl_choices"]
    by_collectives = {(c["algorithm"], c["protocol"]) for c in choices if c["type"] != "send_recv"}
    by_transfers = {(c["algorithm"], c["protocol"]) for c in choices if c["type"] == "send_recv"}
    for event in spans:
        args = event["args"]
        assert args["bytes"] > 0 and args["ranks"] >= 2
        chosen = by_collectives if event["cat"] == "comm" else by_transfers
        assert (args["algorithm"], args["protocol"]) in chosen
    transfers = [e for e in spans if e["cat"] == "send"]
    assert transfers and all(e["args"]["algorithm"] == "p2p" for e in transfers)


def test_the_ideal_model_names_its_algorithm_and_no_protocol(tmp_path):
    data = small_spec()
    data["collectives"] = {"model": "ideal", "algorithm": "ring"}
    run_spec(parse_spec(data), tmp_path / "run")
    collectives = [e for e in comm_spans(tmp_path / "run") if e["cat"] == "comm"]
    assert collectives and all(e["args"]["algorithm"] == "ring" for e in collectives)
    assert not any("protocol" in e["args"] for e in collectives)
