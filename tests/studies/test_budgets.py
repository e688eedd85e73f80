"""ns-3 runs users can afford: a study's packet-level points run in parallel up to --jobs, say how far
they are, and a run that outruns its budget is stopped with what it had done recorded. A fake ns-3
binary (a small script) stands in for the real one."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from astra_hetero.backends.astrasim import process
from astra_hetero.backends.astrasim.partial import BackendTimedOut, partial_path
from astra_hetero.backends.base import create_backend
from astra_hetero.errors import BackendFailed
from astra_hetero.studies import build_table, plan_study, run_study, write_report
from tests.astrasim.conftest import write_run_dir
from tests.studies.test_run import rows, tiny_study

NS3 = "ns3.42-AstraSimNetwork-default"

# Prints the `finished` lines of the first FINISHED ranks and a flow line per second into ns3/fct.txt
# (`sip dip sport dport size start_ns fct_ns standalone_ns`), as ns-3 does while it runs, then would run
# for a minute: only a budget ends it. Records its start time (ns) so tests can tell runs overlapped.
SLOW_NS3 = """#!{python}
import os, sys, time
open({starts!r}, "a").write(f"{{time.time_ns()}}\\n")
for rank in range({finished}):
    cycles = 1000 * (rank + 1)
    print(f"sys[{{rank}}] finished, {{cycles}} cycles, exposed communication 10 cycles", flush=True)
os.makedirs("ns3", exist_ok=True)
for flow in range({flows}):
    with open("ns3/fct.txt", "a") as fct:
        fct.write(f"0b000001 0b000101 10000 100 1000000 {{2000 * flow}} 50000 25000\\n")
    time.sleep({pause})
time.sleep({linger})
"""


def slow_ns3(
    bin_dir: Path, finished: int = 2, flows: int = 3, pause: float = 0.05, linger: float = 60
) -> Path:
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / NS3
    path.write_text(
        SLOW_NS3.format(
            python=sys.executable,
            starts=str(bin_dir / "starts"),
            finished=finished,
            flows=flows,
            pause=pause,
            linger=linger,
        )
    )
    path.chmod(0o755)
    return path


def test_a_run_past_its_budget_is_stopped_with_what_it_had_done(tmp_path):
    run_dir = write_run_dir(tmp_path / "run", 4)
    binary = slow_ns3(tmp_path / "bin")
    started = time.monotonic()
    with pytest.raises(BackendTimedOut) as info:
        create_backend("ns3", binary=str(binary), timeout_s=1.5).run(run_dir)
    assert time.monotonic() - started < 15  # stopped at its budget, not after the binary's minute
    partial = info.value.partial
    assert (partial.num_ranks, partial.ranks_finished, partial.finish_cycles) == (4, 2, {0: 1000, 1: 2000})
    assert (partial.flows_completed, partial.bytes_completed) == (3, 3_000_000)
    assert partial.simulated_us == pytest.approx((2 * 2000 + 50000) / 1000)  # the last flow's end
    assert partial.budget_s == 1.5 and partial.wall_time_s >= 1.5
    assert "2 of 4 ranks" in str(info.value) and "3 flows done" in str(info.value)


def test_a_long_run_reports_its_progress(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(process, "PROGRESS_EVERY_S", 0.2)
    run_dir = write_run_dir(tmp_path / "run", 4)
    binary = slow_ns3(tmp_path / "bin", finished=1, flows=4, pause=0.25, linger=0)
    caplog.set_level("INFO", logger="astra_hetero.backends.astrasim.backend")
    with pytest.raises(BackendFailed):  # it exits with 1 of 4 ranks done
        create_backend("ns3", binary=str(binary), timeout_s=30).run(run_dir)
    lines = [r.getMessage() for r in caplog.records if "ranks finished" in r.getMessage()]
    assert len(lines) >= 2
    assert lines[0].startswith("run: ") and "1/4 ranks finished" in lines[-1]
    assert "flows done" in lines[-1] and "ms simulated" in lines[-1]


def packet_study():
    return tiny_study(
        axes={
            "nic_gbps": {"path": "cluster.node_groups[1].nic.gbps", "values": [100, 200]},
            "simulator": [{"name": "packet-level"}, {"name": "flow", "backend": "embedded"}],
        },
        derived=[],
        tables=[],
        figures=[],
    )


@pytest.mark.slow
def test_a_study_runs_packet_level_points_in_parallel_and_keeps_what_a_stopped_one_had(tmp_path):
    bin_dir = tmp_path / "bin"
    slow_ns3(bin_dir, finished=1, flows=2, linger=60)
    study = plan_study(packet_study(), tmp_path)
    out = tmp_path / "out"
    options = {"bin_dir": str(bin_dir), "timeout_s": 4}
    outcomes = run_study(study, out, "ns3", options, jobs=2)
    write_report(build_table(study, outcomes), out)
    table = {(r["nic_gbps"], r["simulator"]): r for r in rows(out)}
    for nic in ("100", "200"):
        stopped = table[(nic, "packet-level")]
        assert stopped["status"] == "partial" and "budget" in stopped["error"]
        assert float(stopped["partial_ranks_finished"]) == 1 and float(stopped["ns3_flows"]) == 2
        assert float(stopped["partial_simulated_us"]) == pytest.approx(52.0)
        record = json.loads(partial_path(Path(stopped["run_dir"])).read_text())
        assert record["format"] == "astra-hetero/partial-run@1" and record["budget_s"] == 4
        assert table[(nic, "flow")]["status"] == "ok"
    # the two ns-3 runs overlapped (one core each, up to --jobs)
    starts = sorted(int(line.split()[0]) for line in (bin_dir / "starts").read_text().splitlines())
    assert len(starts) == 2 and starts[1] - starts[0] < 3e9
    # a rerun that succeeds leaves no stale record of the stopped attempt
    fine = slow_ns3(bin_dir, finished=0, flows=0, linger=0)
    fine.write_text(
        fine.read_text().replace("time.sleep(0)", "") + "for rank in range(16):\n"
        "    print(f'sys[{rank}] finished, 1000 cycles, exposed communication 10 cycles')\n"
    )
    run_study(study, out, "ns3", {"bin_dir": str(bin_dir), "timeout_s": 30}, jobs=2)
    assert not any(
        partial_path(Path(table[(nic, "packet-level")]["run_dir"])).exists() for nic in ("100", "200")
    )
