"""Every result, plan and study says what produced it: astra-hetero's version and commit, the backend and
its binary's (or image's) identity, the spec's hash; `report` shows it."""

from __future__ import annotations

import hashlib
import json

import pytest
import yaml

from astra_hetero import __version__, provenance
from astra_hetero.backends.base import create_backend
from astra_hetero.cli.main import main
from astra_hetero.pipeline import execute
from astra_hetero.studies import build_table, plan_study, run_study, write_report
from tests.astrasim.conftest import OUTPUTS, write_fake_binary, write_run_dir
from tests.conftest import make_spec_data
from tests.planner.specs import plan_data

UNAWARE = "AstraSim_Analytical_Congestion_Unaware"
SMALL_SCOPE = {"layers_per_stage": 1, "micro_batches_per_replica": 1}


def sha256(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(autouse=True)
def fresh_identity(monkeypatch):
    """tool_identity is cached per process; each test sees its own environment."""
    monkeypatch.delenv(provenance.COMMIT_ENV, raising=False)
    monkeypatch.delenv(provenance.IMAGE_COMPONENTS_ENV, raising=False)
    provenance.tool_identity.cache_clear()
    yield
    provenance.tool_identity.cache_clear()


def test_binary_identity_is_the_resolved_path_its_size_and_sha256(tmp_path):
    target = tmp_path / "real"
    target.write_bytes(b"\x7fELF not really" * 1000)
    link = tmp_path / "link"
    link.symlink_to(target)
    identity = provenance.binary_identity(link)
    assert identity == {"path": str(target), "size": 15000, "sha256": sha256(target)}
    target.write_bytes(b"rebuilt")  # a new build in place: size and mtime change, so does the hash
    assert provenance.binary_identity(link)["sha256"] == sha256(target)


def test_image_identity_keeps_the_id_and_only_the_component_and_oci_labels():
    attrs = {
        "Id": "sha256:abc",
        "Config": {
            "Labels": {
                "org.astra-hetero.component.astra-sim": "518bd51",
                "org.opencontainers.image.revision": "518bd51",
                "maintainer": "someone",
            }
        },
    }
    assert provenance.image_identity("astra-sim:0.1.0", attrs) == {
        "image": "astra-sim:0.1.0",
        "id": "sha256:abc",
        "labels": {
            "org.astra-hetero.component.astra-sim": "518bd51",
            "org.opencontainers.image.revision": "518bd51",
        },
    }
    assert provenance.image_identity("bare", {})["labels"] == {}


def test_the_commit_comes_from_the_environment_first(monkeypatch):
    monkeypatch.setenv(provenance.COMMIT_ENV, "f" * 40)
    assert provenance.tool_identity() == {"version": __version__, "commit": "f" * 40, "dirty": None}


def test_image_components_are_read_from_the_images_environment():
    environ = {provenance.IMAGE_COMPONENTS_ENV: "astra-sim=518bd51 chakra=90630ca  junk"}
    assert provenance.image_components(environ) == {"astra-sim": "518bd51", "chakra": "90630ca"}
    assert provenance.image_components({}) == {}


def test_an_embedded_run_records_version_backend_and_the_hash_of_its_spec(tmp_path, monkeypatch):
    monkeypatch.setenv(provenance.COMMIT_ENV, "c" * 40)
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(make_spec_data(scope=SMALL_SCOPE)))
    assert main(["run", str(spec), "-o", str(tmp_path / "run"), "--timeline", "none"]) == 0
    record = json.loads((tmp_path / "run/result.json").read_text())["meta"]["provenance"]
    assert record["astra_hetero"] == {"version": __version__, "commit": "c" * 40, "dirty": None}
    assert record["backend"] == {"name": "embedded", "binary": None, "docker": None}
    assert record["spec_sha256"] == sha256(tmp_path / "run/spec.yaml")


def test_a_native_astrasim_run_records_the_binary_that_ran(tmp_path):
    run_dir = write_run_dir(tmp_path / "run", 4)
    binary = write_fake_binary(
        tmp_path / "bin", UNAWARE, OUTPUTS / "analytical_unaware_compute_plus_allreduce4_stdout.txt"
    )
    result = execute(run_dir, "analytical-unaware", timeline="none", bin_dir=str(binary.parent))
    backend = result.meta["provenance"]["backend"]
    assert backend["name"] == "analytical-unaware" and backend["docker"] is None
    assert backend["binary"] == {
        "path": str(binary.resolve()),
        "size": binary.stat().st_size,
        "sha256": sha256(binary),
    }
    stored = json.loads((run_dir / "result.json").read_text())["meta"]["provenance"]
    assert stored["backend"] == backend


def test_a_docker_run_records_the_image_id_and_its_component_labels(tmp_path):
    from tests.astrasim.test_docker import IMAGE, FakeClient

    client = FakeClient(output=OUTPUTS / "analytical_unaware_compute_plus_allreduce4_stdout.txt")
    client.get = lambda name: type(
        "Image",
        (),
        {
            "attrs": {
                "Id": "sha256:feed",
                "Config": {
                    "Env": ["ASTRA_SIM_BIN_DIR=/opt/astra-sim/bin"],
                    "Labels": {"org.astra-hetero.component.astra-network-ns3": "f764bed"},
                },
            }
        },
    )()
    run_dir = write_run_dir(tmp_path / "run", 4)
    output = create_backend("analytical-unaware", docker_image=IMAGE, docker_client=client).run(run_dir)
    backend = output.result.meta["provenance"]["backend"]
    assert backend == {
        "docker": {
            "image": IMAGE,
            "id": "sha256:feed",
            "labels": {"org.astra-hetero.component.astra-network-ns3": "f764bed"},
        }
    }


def test_report_shows_what_produced_each_run(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv(provenance.COMMIT_ENV, "0123456789abcdef" * 2 + "01234567")
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(make_spec_data(scope=SMALL_SCOPE)))
    assert main(["run", str(spec), "-o", str(tmp_path / "run"), "--timeline", "none"]) == 0
    capsys.readouterr()
    assert main(["report", str(tmp_path / "run"), "--no-plots"]) == 0
    printed = capsys.readouterr().out
    assert f"{__version__} @ 0123456789ab" in printed
    spec_hash = sha256(tmp_path / "run/spec.yaml")
    assert spec_hash[:40] in printed.replace("\n", "").replace(" ", "")
    data = json.loads((tmp_path / "run/report/report.json").read_text())
    assert data["runs"][0]["provenance"]["spec_sha256"] == spec_hash
    assert "## Provenance" in (tmp_path / "run/report/report.md").read_text()


def test_a_result_without_provenance_still_reports(tmp_path):
    assert provenance.short(None) == {
        "astra-hetero": "unknown (result written before provenance was recorded)"
    }


def test_a_plan_records_the_hash_of_the_spec_file_it_was_given(tmp_path, monkeypatch):
    monkeypatch.setenv(provenance.COMMIT_ENV, "d" * 40)
    spec = tmp_path / "plan.yaml"
    spec.write_text(yaml.safe_dump(plan_data({"tp": [2], "pp": [2]})))
    argv = [
        "plan",
        str(spec),
        "-o",
        str(tmp_path / "out"),
        "--jobs",
        "1",
        "--no-cache",
        "--quiet",
        "--no-plots",
    ]
    assert main(argv) == 0
    record = json.loads((tmp_path / "out/search.json").read_text())["provenance"]
    assert record["astra_hetero"]["commit"] == "d" * 40
    assert record["backend"]["name"] == "embedded"
    assert record["spec_sha256"] == sha256(spec)


def test_a_study_writes_provenance_json_with_the_study_hash_and_every_points_spec_hash(tmp_path):
    data = {
        "name": "tiny",
        "title": "tiny",
        "base": make_spec_data(scope=SMALL_SCOPE),
        "axes": {"nic_gbps": {"path": "cluster.node_groups[1].nic.gbps", "values": [100, 400]}},
    }
    study_file = tmp_path / "study.yaml"
    study_file.write_text(yaml.safe_dump(data))
    study = plan_study(data, tmp_path)
    out = tmp_path / "out"
    write_report(build_table(study, run_study(study, out)), out, study_file)
    record = json.loads((out / "provenance.json").read_text())
    assert record["study_sha256"] == sha256(study_file)
    assert record["astra_hetero"]["version"] == __version__
    assert [b["name"] for b in record["backends"]] == ["embedded"]
    for name, point in record["points"].items():
        assert point["spec_sha256"] == sha256(out / "points" / name / "spec.yaml")
    assert "## Provenance" in (out / "report.md").read_text()


def test_in_a_git_checkout_the_commit_is_heads(monkeypatch):
    import subprocess
    from pathlib import Path

    root = Path(provenance.__file__).resolve().parent.parent
    if not (root / ".git").exists():
        pytest.skip("astra-hetero is not running from a git checkout")
    head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True)
    identity = provenance.tool_identity()
    assert identity["commit"] == head.stdout.strip() and isinstance(identity["dirty"], bool)


def test_an_unknown_commit_in_the_environment_counts_as_none(monkeypatch, tmp_path):
    monkeypatch.setenv(provenance.COMMIT_ENV, "unknown")
    monkeypatch.setattr(provenance, "_git_commit", lambda directory: (None, None))
    assert provenance.tool_identity()["commit"] is None
