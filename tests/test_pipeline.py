"""A run directory is always one consistent state: its parts were built from the same cluster and
network, a result sits only beside the inputs it came from, and a failed or partial command leaves
the previous state as it was. Reads and writes stay inside the directory."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import yaml

from astra_hetero import rundir
from astra_hetero.cli.main import main
from astra_hetero.errors import BackendUnavailable, RunDirError
from astra_hetero.outputs import MARKER
from astra_hetero.pipeline import build_run_dir, execute, run_spec
from astra_hetero.results.io import read_result
from astra_hetero.spec import load_spec, parse_spec
from tests.conftest import make_spec_data, node_group
from tests.test_staging import no_leftovers, snapshot

CALIBRATION_CSV = Path(__file__).parents[1] / "generators/configs/calibration_example.csv"


def small_spec(nic: float = 400, **overrides) -> dict:
    """8 GPUs in two nodes, TP2·PP2·DP2: quick to build and to simulate."""
    data = make_spec_data(**overrides)
    data["model"] = {
        **data["model"],
        "num_layers": 4,
        "hidden_size": 512,
        "num_heads": 8,
        "num_kv_heads": 8,
        "ffn_size": 2048,
        "seq_len": 256,
    }
    data["cluster"] = {"node_groups": [node_group("h100", "h100-sxm", count=2, nic=nic)]}
    data["parallelism"] = {"tp": 2, "pp": 2, "dp": 2, "global_batch_size": 4}
    return data


def entries(root: Path) -> set[str]:
    return {name for name in os.listdir(root) if name != MARKER}


def test_generate_into_a_run_directory_drops_the_parts_it_no_longer_matches(tmp_path):
    out = tmp_path / "run"
    run_spec(parse_spec(small_spec()), out)
    assert {"ns3", "analytical", "result.json", "trace.json"} <= entries(out)
    build_run_dir(parse_spec(small_spec(nic=10)), out, topology=False)  # another cluster: a 10G NIC
    assert entries(out) == {"spec.yaml", "manifest.json", "workload"}
    with pytest.raises(RunDirError, match="ns3/topology.txt: missing"):
        execute(out)
    assert entries(out) == {"spec.yaml", "manifest.json", "workload"}


def test_parts_built_from_the_same_cluster_are_kept_and_results_are_always_dropped(tmp_path):
    out = tmp_path / "run"
    run_spec(parse_spec(small_spec()), out)
    topology_before = snapshot(out / "ns3")
    changed_model = small_spec()
    changed_model["model"]["num_layers"] = 8
    build_run_dir(parse_spec(changed_model), out, topology=False)  # same cluster and network
    assert entries(out) == {"spec.yaml", "manifest.json", "workload", "ns3", "analytical"}
    assert snapshot(out / "ns3") == topology_before
    build_run_dir(parse_spec(small_spec(nic=10)), out, workload=False)  # a topology of another cluster
    assert entries(out) == {"ns3", "analytical"}


def test_a_failed_run_of_new_inputs_leaves_the_old_run_whole(tmp_path):
    out = tmp_path / "run"
    run_spec(parse_spec(small_spec()), out)
    before = snapshot(out)
    with pytest.raises(BackendUnavailable):
        run_spec(parse_spec(small_spec(nic=10)), out, "analytical-unaware", binary=str(tmp_path / "no-such"))
    assert snapshot(out) == before and no_leftovers(tmp_path)


def test_a_new_run_replaces_result_and_timeline_and_none_means_none(tmp_path):
    out = tmp_path / "run"
    run_spec(parse_spec(small_spec()), out)
    slower = run_spec(parse_spec(small_spec(nic=10)), out, timeline="none")
    assert read_result(out) == slower and not (out / "trace.json").exists()
    assert json.loads((out / "manifest.json").read_text())["num_ranks"] == slower.num_ranks
    execute(out, timeline="none")
    assert not (out / "trace.json").exists()


def test_a_spec_run_that_fails_writes_no_directory(tmp_path):
    out = tmp_path / "run"
    with pytest.raises(BackendUnavailable):
        run_spec(parse_spec(small_spec()), out, "analytical-unaware", binary=str(tmp_path / "no-such"))
    assert not out.exists() and no_leftovers(tmp_path)


def test_directories_that_are_not_ours_need_force_and_keep_the_users_entries(tmp_path, capsys):
    out = tmp_path / "mine"
    (out / "workload").mkdir(parents=True)
    (out / "workload" / "precious.txt").write_text("keep me")
    (out / "notes.txt").write_text("mine")
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(small_spec()))
    assert main(["build", str(spec), "-o", str(out), "--quiet"]) == 2
    assert "--force" in capsys.readouterr().err
    assert (out / "workload" / "precious.txt").read_text() == "keep me"
    (out / "workload" / "precious.txt").unlink()
    (out / "workload").rmdir()
    assert main(["build", str(spec), "-o", str(out), "--quiet"]) == 2  # still not ours, though no clash
    assert main(["build", str(spec), "-o", str(out), "--quiet", "--force"]) == 0
    assert (out / "notes.txt").read_text() == "mine" and (out / MARKER).is_file()
    assert main(["build", str(spec), "-o", str(out), "--quiet"]) == 0  # ours now
    assert (out / "notes.txt").read_text() == "mine"


def test_an_existing_file_is_not_an_output_directory(tmp_path, capsys):
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(small_spec()))
    (tmp_path / "taken").write_text("a file")
    assert main(["run", str(spec), "-o", str(tmp_path / "taken")]) == 2
    assert "not a directory" in capsys.readouterr().err
    assert (tmp_path / "taken").read_text() == "a file"


def test_symlinked_user_entries_survive_and_their_targets_are_untouched(tmp_path):
    out = tmp_path / "run"
    build_run_dir(parse_spec(small_spec()), out)
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / "data.txt").write_text("outside")
    os.symlink(target, out / "datasets")
    run_spec(parse_spec(small_spec(nic=100)), out)
    assert os.readlink(out / "datasets") == str(target) and (target / "data.txt").read_text() == "outside"


def test_a_run_directory_moves_with_its_calibration(tmp_path):
    shutil.copy(CALIBRATION_CSV, tmp_path / "measured.csv")
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(yaml.safe_dump(small_spec(calibration="measured.csv")))
    out = tmp_path / "run"
    first = run_spec(load_spec(spec_path), out)
    assert yaml.safe_load((out / "spec.yaml").read_text())["calibration"] == rundir.CALIBRATION
    moved = tmp_path / "elsewhere" / "run"
    moved.parent.mkdir()
    shutil.move(out, moved)
    (tmp_path / "measured.csv").unlink()
    assert load_spec(moved / "spec.yaml").calibration == str(moved / rundir.CALIBRATION)
    assert execute(moved).iteration_time_us == first.iteration_time_us


def test_a_symlinked_workload_is_refused(tmp_path):
    out = tmp_path / "run"
    build_run_dir(parse_spec(small_spec()), out)
    shutil.move(out / "workload", tmp_path / "workload")
    os.symlink(tmp_path / "workload", out / "workload")
    with pytest.raises(RunDirError, match="leads outside the run directory"):
        execute(out)


@pytest.mark.parametrize("prefix", ["../../workload/workload", "/etc/workload", "workload/../../x"])
def test_a_workload_prefix_leading_out_is_refused(tmp_path, prefix):
    out = tmp_path / "run"
    build_run_dir(parse_spec(small_spec()), out)
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["workload_prefix"] = prefix
    (out / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(RunDirError, match="workload_prefix leads outside"):
        execute(out)


@pytest.mark.parametrize("link", ["logs", "logs/analytical-unaware.log"])
def test_logs_are_never_written_through_a_symlink(tmp_path, link):
    victim = tmp_path / "victim.txt"
    victim.write_text("untouched")
    root = tmp_path / "run"
    (root / "logs").mkdir(parents=True) if link != "logs" else root.mkdir()
    os.symlink(victim if link.endswith(".log") else tmp_path, root / link)
    with pytest.raises(RunDirError, match="symlink"):
        rundir.open_output(root, "logs/analytical-unaware.log")
    assert victim.read_text() == "untouched"


def test_reports_are_not_written_through_a_symlinked_default_place(tmp_path, capsys):
    out = tmp_path / "run"
    run_spec(parse_spec(small_spec()), out)
    (tmp_path / "outside").mkdir()
    os.symlink(tmp_path / "outside", out / "report")
    assert main(["report", str(out), "--no-plots"]) == 2
    assert "symlink" in capsys.readouterr().err and not os.listdir(tmp_path / "outside")


def test_a_report_replaces_a_foreign_file_only_with_force(tmp_path, capsys):
    out = tmp_path / "run"
    run_spec(parse_spec(small_spec()), out)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "thesis.tex").write_text("years of work")
    assert main(["report", str(out), "--no-plots", "-o", str(docs)]) == 0  # nothing of theirs replaced
    assert (docs / "thesis.tex").read_text() == "years of work" and (docs / "report.md").is_file()
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "report.md").write_text("my own notes")
    assert main(["report", str(out), "--no-plots", "-o", str(tmp_path / "notes")]) == 2
    assert (tmp_path / "notes" / "report.md").read_text() == "my own notes"
    assert main(["report", str(out), "--no-plots", "-o", str(tmp_path / "notes"), "--force"]) == 0


def test_reports_drop_what_an_earlier_report_wrote_and_keep_the_rest(tmp_path):
    out = tmp_path / "run"
    run_spec(parse_spec(small_spec()), out)
    shared = tmp_path / "shared"
    assert main(["report", str(out), "-o", str(shared)]) == 0
    pngs = {p.name for p in shared.glob("*.png")}
    assert pngs
    (shared / "mine.txt").write_text("kept")
    assert main(["report", str(out), "--no-plots", "-o", str(shared)]) == 0
    assert not set(os.listdir(shared)) & pngs and (shared / "mine.txt").read_text() == "kept"


def test_a_symlinked_part_is_replaced_whole_and_its_target_left_alone(tmp_path):
    out = tmp_path / "run"
    build_run_dir(parse_spec(small_spec()), out)
    shutil.move(out / "workload", tmp_path / "elsewhere")
    before = snapshot(tmp_path / "elsewhere")
    os.symlink(tmp_path / "elsewhere", out / "workload")
    build_run_dir(parse_spec(small_spec(nic=100)), out)
    assert not (out / "workload").is_symlink() and (out / "workload" / "rank_classes.json").is_file()
    assert snapshot(tmp_path / "elsewhere") == before


def test_a_binary_manifest_is_a_clear_error(tmp_path):
    out = tmp_path / "run"
    build_run_dir(parse_spec(small_spec()), out)
    (out / "manifest.json").write_bytes(b"\xff\xfe\x00secret")
    with pytest.raises(RunDirError, match="not UTF-8") as caught:
        execute(out)
    assert "secret" not in str(caught.value)


def test_directories_written_before_the_marker_are_still_ours(tmp_path):
    out = tmp_path / "run"
    run_spec(parse_spec(small_spec()), out)
    (out / MARKER).unlink()  # as a run directory of an earlier version
    execute(out)
    report = out / "report"
    assert main(["report", str(out), "--no-plots"]) == 0
    (report / MARKER).unlink()
    assert main(["report", str(out), "--no-plots"]) == 0
    build_run_dir(parse_spec(small_spec(nic=10)), out)
    assert (out / MARKER).is_file() and not (out / "result.json").exists() and not report.exists()
