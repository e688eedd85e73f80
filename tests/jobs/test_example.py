"""The shipped shared-cluster example runs end to end through the CLI: the summary and the report
show each job together and alone and the shared links; result.json holds every job."""

from __future__ import annotations

import json
from pathlib import Path

from astra_hetero.cli.main import main
from astra_hetero.results.io import read_result

EXAMPLE = Path(__file__).parents[2] / "examples" / "shared_cluster_three_jobs.yaml"


def test_the_shared_cluster_example_runs_and_reports_each_job(tmp_path, capsys):
    out = tmp_path / "shared"
    assert main(["run", str(EXAMPLE), "-o", str(out), "--timeline", "none"]) == 0
    printed = capsys.readouterr().out
    assert "3 jobs on 24 GPUs" in printed and "links the jobs shared" in printed
    result = read_result(out)
    a, b, c = result.jobs
    assert [j["name"] for j in result.jobs] == ["a", "b", "c"]
    assert a["slowdown"] > 1.05 and b["slowdown"] > 1.05  # their all-reduces meet on the uplinks
    assert c["slowdown"] == 1.0 and c["start_us"] == 100_000  # its own rack
    assert len(a["iterations"]) == 2 and len(b["iterations"]) == 1
    assert result.shared_links[0]["kind"] == "uplink" and set(result.shared_links[0]["bytes"]) == {"a", "b"}
    assert all(job["throughput"]["mfu"] > 0 for job in result.jobs)
    manifest = json.loads((out / "manifest.json").read_text())
    assert [j["ranks"] for j in manifest["jobs"]] == [[[0, 4], [8, 12]], [[4, 8], [12, 16]], [[16, 24]]]
    assert {r["job"] for r in manifest["ranks"]} == {"a", "b", "c"}
    assert main(["report", str(out), "--no-plots"]) == 0
    report = (out / "report" / "report.md").read_text()
    assert "3 jobs on 24 GPUs" in report and "links the jobs shared" in report
