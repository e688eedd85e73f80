"""Past a size threshold result.json lists rank classes with rank ranges; reading it back gives the
same result, every rank with its placement from the manifest."""

from __future__ import annotations

import json

from astra_hetero.pipeline import run_spec
from astra_hetero.results import io
from astra_hetero.spec import parse_spec
from tests.conftest import make_spec_data


def test_a_result_of_many_ranks_is_written_by_class_and_read_back_whole(tmp_path, monkeypatch):
    spec = parse_spec(make_spec_data())
    monkeypatch.setattr(io, "RANK_RECORDS_MAX", 4)
    result = run_spec(spec, tmp_path / "run", timeline="none")
    data = json.loads((tmp_path / "run" / "result.json").read_text())
    assert data["ranks"] == [] and 0 < len(data["rank_classes"]) < result.num_ranks
    covered = sorted(r for group in data["rank_classes"] for a, b in group["ranks"] for r in range(a, b + 1))
    assert covered == list(range(result.num_ranks))
    assert io.read_result(tmp_path / "run") == result


def test_below_the_threshold_every_rank_is_listed(tmp_path):
    result = run_spec(parse_spec(make_spec_data()), tmp_path / "run", timeline="none")
    data = json.loads((tmp_path / "run" / "result.json").read_text())
    assert len(data["ranks"]) == result.num_ranks and "rank_classes" in data["meta"]["folding"]
    assert io.read_result(tmp_path / "run") == result  # meta's folding.rank_classes is no rank list
