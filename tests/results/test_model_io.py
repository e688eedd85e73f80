"""result.json: the result type survives JSON exactly, and a missing or broken file is named."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from astra_hetero.errors import RunDirError
from astra_hetero.results.io import read_result, write_result
from astra_hetero.results.model import RESULT_FORMAT, RunResult
from tests.results.builders import mixed_result


def test_result_round_trips_through_json_text() -> None:
    result = replace(
        mixed_result(),
        warnings=("rank 3: late",),
        exit_status=0,
        wall_time_s=1.25,
        meta={"spec": "tiny", "nested": {"a": [1, 2]}},
    )
    data = json.loads(json.dumps(result.to_json()))
    assert data["format"] == RESULT_FORMAT
    assert RunResult.from_json(data) == result


def test_write_then_read_gives_the_same_result(tmp_path) -> None:
    result = mixed_result()
    path = write_result(tmp_path, result)
    assert path == tmp_path / "result.json"
    assert read_result(tmp_path) == result
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"]  # no temporary left behind


def test_missing_result_names_the_file(tmp_path) -> None:
    with pytest.raises(RunDirError, match="result.json: missing"):
        read_result(tmp_path)


def test_malformed_result_names_the_file(tmp_path) -> None:
    (tmp_path / "result.json").write_text('{"backend": "embedded"')
    with pytest.raises(RunDirError, match="result.json: not a result file"):
        read_result(tmp_path)
