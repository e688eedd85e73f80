"""Traces by class: per-rank files written from the class traces are byte for byte what the per-rank
generator writes, on every shipped example; the map is validated like every run-directory file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from astra_hetero.errors import RunDirError
from astra_hetero.jobs.load import load_run_spec
from astra_hetero.pipeline import build_run_dir
from astra_hetero.rank_classes import CLASS_MAP, materialize, rank_traces, read_class_map
from astra_hetero.spec import parse_spec
from astra_hetero.workload.generate import class_traces, encoded_traces, plan_workload
from tests.conftest import make_spec_data

ROOT = Path(__file__).parents[2] / "examples"


def _single_job_specs() -> list:
    """Every shipped YAML that is one job's spec (the planner's, studies' and sweeps' files that are
    specs included), the large ones marked slow."""
    out = []
    for path in sorted(ROOT.rglob("*.yaml")):
        try:
            spec = load_run_spec(path)
        except Exception:  # noqa: BLE001 - a study, sweep or planner file: not a spec
            continue
        if hasattr(spec, "jobs"):
            continue  # several jobs keep per-rank traces (jobs/workload.py)
        marks = [pytest.mark.slow] if spec.cluster.num_gpus > 128 else []
        out.append(pytest.param(path, marks=marks, id=str(path.relative_to(ROOT))))
    return out


@pytest.mark.parametrize("path", _single_job_specs())
def test_per_rank_traces_from_classes_are_byte_identical_to_the_per_rank_generator(path):
    plan = plan_workload(load_run_spec(path))
    reference = dict(encoded_traces(plan))
    classes, data = class_traces(plan)
    assert classes.num_ranks == len(reference)
    assert classes.num_classes < len(reference)  # something is shared
    for rank, trace in rank_traces(None, classes, data=data):
        assert trace == reference[rank], f"rank {rank}"
    for k, rep in enumerate(classes.reps):  # a class trace is its representative's own file
        assert data[k] == reference[rep]
        assert classes.class_of[rep] == k and rep == classes.class_of.index(k)


def _run(tmp_path: Path, per_rank: bool = False, **overrides) -> Path:
    return build_run_dir(parse_spec(make_spec_data(**overrides)), tmp_path / "run", per_rank=per_rank).root


def test_materialize_writes_the_files_generate_per_rank_writes(tmp_path):
    by_class = build_run_dir(parse_spec(make_spec_data()), tmp_path / "a", topology=False).root
    per_rank = build_run_dir(parse_spec(make_spec_data()), tmp_path / "b", topology=False, per_rank=True).root
    assert not list((by_class / "workload").glob("workload.*.et"))
    assert materialize(by_class) == 16
    for rank in range(16):
        name = f"workload/workload.{rank}.et"
        assert (by_class / name).read_bytes() == (per_rank / name).read_bytes()
    assert materialize(by_class) == 0  # nothing left to write


def test_the_map_names_each_ranks_class_groups_and_peers(tmp_path):
    root = _run(tmp_path)
    classes = read_class_map(root, 16)
    groups = json.loads((root / "workload/comm_groups.json").read_text())
    for rank in range(16):
        assert all(rank in groups[g] for g in classes.groups[rank])
        rep = classes.reps[classes.class_of[rank]]
        assert len(classes.groups[rank]) == len(classes.groups[rep])
    assert len(classes.traces) == len(set(classes.traces)) == classes.num_classes


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.update(format="other"), "format"),
        (lambda d: d.update(num_ranks=17), "num_ranks"),
        (lambda d: d["class_of"].append([0, 1]), "class_of"),
        # expanded before it was checked: an OverflowError (or gigabytes of list) before
        (lambda d: d["class_of"].__setitem__(0, [d["class_of"][0][0], 10**29]), "more than the 16 ranks"),
        (lambda d: d["class_of"].__setitem__(0, [99, d["class_of"][0][1]]), "class_of"),
        (lambda d: d["groups"].pop(), "groups"),
        (lambda d: d["peers"].__setitem__(3, ["x"]), "peers[3]"),
        (lambda d: d["classes"][0].update(trace="../elsewhere.et"), "classes[0].trace"),
        (lambda d: d["classes"][0].update(trace="workload/classes/none.et"), "class trace missing"),
        (lambda d: d["classes"][0].update(trace="x" * 300), "longer than 255 bytes"),  # an OSError before
    ],
)
def test_a_damaged_map_is_refused_naming_the_file_and_field(tmp_path, change, message):
    from astra_hetero.backends.embedded.rundir.reader import read_run_dir

    root = _run(tmp_path)
    data = json.loads((root / CLASS_MAP).read_text())
    change(data)
    (root / CLASS_MAP).write_text(json.dumps(data))
    with pytest.raises(RunDirError, match="rank_classes|class trace") as err:
        read_run_dir(root)
    assert message in str(err.value)


def test_a_class_trace_that_disagrees_with_the_map_is_refused(tmp_path):
    from astra_hetero.backends.embedded.backend import EmbeddedBackend

    root = _run(tmp_path)
    data = json.loads((root / CLASS_MAP).read_text())
    first, second = data["classes"][0]["trace"], data["classes"][1]["trace"]
    data["classes"][0]["trace"] = second  # class 0 now reads a trace naming another rank's peers
    (root / CLASS_MAP).write_text(json.dumps(data))
    with pytest.raises(RunDirError, match="gives its rank"):
        EmbeddedBackend(timeline=False).run(root)
    assert first != second
