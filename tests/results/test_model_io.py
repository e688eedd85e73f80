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


def result_data(**rank_changes) -> dict:
    data = mixed_result().to_json()
    data["ranks"][0].update(rank_changes)
    return data


@pytest.mark.parametrize(
    "data,says",
    [
        (result_data(compute_us=float("nan")), "ranks[0].compute_us = nan"),
        (result_data(idle_us=-5.0), "ranks[0].idle_us = -5.0"),
        (result_data(finish_us="late"), "ranks[0].finish_us: Input should be a valid number"),
        (result_data(stage="first"), "ranks[0].stage"),
        (result_data(rank=3), "describes rank 3"),
        ({**mixed_result().to_json(), "iteration_time_us": float("inf")}, "iteration_time_us = inf"),
        ({**mixed_result().to_json(), "ranks": []}, "no ranks"),
        ({**mixed_result().to_json(), "ranks": [[1, 2]]}, "not a result file"),
        ([1, 2, 3], "not a result file"),
        # a report prints these figures: a KeyError / a format error before
        (
            {**mixed_result().to_json(), "throughput": {"mfu": 0.4, "compute_precision": "bf16"}},
            "throughput.tokens_per_s must be a finite number >= 0, got None",
        ),
        ({**mixed_result().to_json(), "throughput": [1]}, "throughput: Input should be an object"),
        # reports print the provenance: an AttributeError, or a -1 copied into report.json, before
        (
            {**mixed_result().to_json(), "meta": {"provenance": {"astra_hetero": 7}}},
            "provenance.astra_hetero must be an object",
        ),
        (
            {**mixed_result().to_json(), "meta": {"provenance": {"astra_hetero": {"dirty": -1}}}},
            "provenance.astra_hetero.dirty must be true/false or null, not -1",
        ),
        (
            {**mixed_result().to_json(), "meta": {"provenance": {"backend": {"docker": {"labels": [1]}}}}},
            "provenance.backend.docker.labels must map names to text",
        ),
    ],
    ids=[
        "nan",
        "negative",
        "string-time",
        "string-stage",
        "order",
        "inf-iteration",
        "no-ranks",
        "list-rank",
        "not-object",
        "throughput-figure-missing",
        "throughput-not-object",
        "provenance-not-object",
        "provenance-dirty",
        "provenance-labels",
    ],
)
def test_a_result_with_impossible_values_is_refused(tmp_path, data, says) -> None:
    (tmp_path / "result.json").write_text(json.dumps(data))
    with pytest.raises(RunDirError) as caught:
        read_result(tmp_path)
    assert says in str(caught.value)


def test_an_idle_gpus_unknown_replica_is_read_back(tmp_path) -> None:
    """null stage and replica: a GPU the plan leaves idle (compared with 0 before: a TypeError)."""
    data = result_data(replica=None, stage=None)
    (tmp_path / "result.json").write_text(json.dumps(data))
    assert read_result(tmp_path).ranks[0].replica is None


def test_binary_garbage_is_not_quoted(tmp_path) -> None:
    (tmp_path / "result.json").write_bytes(b"\xff\xfe secret \x00")
    with pytest.raises(RunDirError) as caught:
        read_result(tmp_path)
    assert "secret" not in str(caught.value)


def test_a_result_of_other_inputs_is_refused(tmp_path) -> None:
    write_result(tmp_path, mixed_result())
    (tmp_path / "manifest.json").write_text(json.dumps({"num_ranks": 128}))
    with pytest.raises(RunDirError, match="not of these inputs"):
        read_result(tmp_path)


def test_a_non_finite_result_is_never_written(tmp_path) -> None:
    from astra_hetero.errors import BackendFailed

    broken = replace(mixed_result(), iteration_time_us=float("nan"))
    with pytest.raises(BackendFailed, match="iteration_time_us = nan"):
        write_result(tmp_path, broken)
    assert not (tmp_path / "result.json").exists()


@pytest.mark.parametrize(
    ("version", "says"),
    [
        ("astra-hetero/result@2", "format 'astra-hetero/result@2' is not one this version reads"),
        ("something-else", "format 'something-else' is not one this version reads"),
        (None, "no format"),
    ],
)
def test_a_result_of_an_unknown_format_is_refused(tmp_path, version, says) -> None:
    data = mixed_result().to_json()
    if version is None:
        del data["format"]
    else:
        data["format"] = version
    (tmp_path / "result.json").write_text(json.dumps(data))
    with pytest.raises(RunDirError, match=says) as caught:
        read_result(tmp_path)
    assert RESULT_FORMAT in str(caught.value)
