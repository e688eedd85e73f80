"""The run summary says what was simulated (model, GPUs, plan, a cut-down iteration) and how well it
used the hardware (throughput, the generator's memory estimate per GPU type), as the manifest and the
result record them, and leaves out what they do not record."""

from __future__ import annotations

import contextlib
import io
import json

import pytest
import yaml

from astra_hetero.cli.main import main
from astra_hetero.results.facts import RunFacts, fact_lines, run_facts
from tests.test_pipeline import small_spec


@pytest.fixture(scope="module")
def printed(tmp_path_factory):
    root = tmp_path_factory.mktemp("facts")
    (root / "spec.yaml").write_text(yaml.safe_dump(small_spec()))
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        assert main(["run", str(root / "spec.yaml"), "-o", str(root / "run"), "--quiet"]) == 0
    manifest = json.loads((root / "run/manifest.json").read_text())
    result = json.loads((root / "run/result.json").read_text())
    return buffer.getvalue(), manifest, result


def test_the_run_summary_says_what_was_simulated(printed):
    text, manifest, _ = printed
    par = manifest["parallelism"]
    gpus = sorted({r["gpu"] for r in manifest["ranks"]})
    flat = " ".join(text.split())  # lines wrap at 80 columns
    assert f"on {manifest['num_ranks']} GPUs: " in flat and all(g in flat for g in gpus)
    micro = manifest["micro_batches_per_replica"][0]
    assert (
        f"plan: TP {par['tp']} · PP {par['pp']} · DP {par['dp']}, {micro} micro-batches of "
        f"{par['micro_batch_size']} per replica" in flat
    )
    assert "1F1B" in flat


def test_the_run_summary_says_how_well_it_uses_the_hardware(printed):
    text, manifest, result = printed
    flat = " ".join(text.split())
    t = result["throughput"]
    assert f"{t['tokens_per_s']:,.0f} tokens/s" in flat and "MFU" in flat and "TFLOP/s per GPU" in flat
    assert "memory (generator's estimate, fullest GPU of each type):" in flat
    for gpu, entry in manifest["memory"].items():
        assert f"{gpu} {entry['peak_gib']:.1f} of {entry['capacity_gib']:g} GiB" in flat
    assert max(len(line) for line in text.splitlines()) <= 80


def test_a_cut_down_iteration_says_so():
    facts = run_facts({"scope": {"layers_per_stage": 1, "micro_batches_per_replica": 2}})
    (line,) = fact_lines(facts)
    assert line.startswith("a cut-down iteration (layers per stage 1, micro batches per replica 2)")


@pytest.mark.parametrize(
    "manifest",
    [
        {},
        {"parallelism": "tp8", "ranks": "many", "memory": [1, 2], "model": 7, "scope": None},
        {"parallelism": {"tp": "2"}, "memory": {"h100": {"peak_gib": -1, "capacity_gib": 80}}},
    ],
    ids=["none", "wrong-types", "bad-values"],
)
def test_what_the_manifest_does_not_record_is_left_out(manifest):
    assert run_facts(manifest) == RunFacts() and fact_lines(run_facts(manifest)) == []


def test_uneven_splits_and_the_interleaved_schedule_are_spelled_out():
    manifest = {
        "parallelism": {"tp": 1, "pp": 2, "dp": 2, "micro_batch_size": 2, "schedule": "interleaved"},
        "virtual_stages": 2,
        "micro_batches_per_replica": [6, 2],
        "layers_per_stage": [30, 10],
    }
    assert run_facts(manifest).plan == (
        "TP 1 · PP 2 · DP 2, 6/2 micro-batches of 2 per replica, layers per stage 30/10, "
        "interleaved 1F1B, 2 virtual stages"
    )
