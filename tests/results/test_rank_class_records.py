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
    assert "rank_classes" not in data and len(data["ranks"]) == result.num_ranks
    assert io.read_result(tmp_path / "run") == result


def test_rank_classes_named_inside_meta_do_not_make_a_result_by_class(tmp_path):
    """The folding record counts `rank_classes` too; only the top-level key means records by class."""
    result = run_spec(parse_spec(make_spec_data()), tmp_path / "run", timeline="none")
    data = json.loads((tmp_path / "run" / "result.json").read_text())
    data.setdefault("meta", {})["folding"] = {"rank_classes": 2}
    (tmp_path / "run" / "result.json").write_text(json.dumps(data))
    assert io.read_result(tmp_path / "run").ranks == result.ranks
