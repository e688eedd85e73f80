"""`rundir.shared_reads`: a manifest is parsed once while unchanged, and again once it changes."""

import json
import os

from astra_hetero import rundir


def test_manifest_parsed_once_inside_and_afresh_outside(tmp_path):
    path = tmp_path / rundir.MANIFEST
    path.write_text(json.dumps({"name": "a"}))
    with rundir.shared_reads():
        first = rundir.read_json_object(path, "")
        assert rundir.read_json_object(path, "") is first
    assert rundir.read_json_object(path, "") is not first  # outside the block: parsed each time


def test_a_changed_or_moved_manifest(tmp_path):
    path = tmp_path / rundir.MANIFEST
    path.write_text(json.dumps({"name": "a"}))
    with rundir.shared_reads():
        first = rundir.read_json_object(path, "")
        moved = tmp_path / "published"
        moved.mkdir()
        os.replace(path, moved / rundir.MANIFEST)  # publishing renames: the same file, parsed once
        assert rundir.read_json_object(moved / rundir.MANIFEST, "") is first
        (moved / rundir.MANIFEST).write_text(json.dumps({"name": "bb"}))
        assert rundir.read_json_object(moved / rundir.MANIFEST, "") == {"name": "bb"}


def test_other_json_files_are_not_shared(tmp_path):
    path = tmp_path / "dynamics.json"
    path.write_text("{}")
    with rundir.shared_reads():
        assert rundir.read_json_object(path, "") is not rundir.read_json_object(path, "")
