"""Interrupted runs, in real subprocesses: whatever the moment of a SIGINT or SIGKILL, the run directory
is the complete old state or the complete new one; a SIGINT prints one line and exits 130; what a
SIGKILL leaves behind is cleaned by the next run.

The signal is sent when the run is seen reaching a phase (its staging directory appears, the network
files are written, result.json is written), so each phase is hit whatever the machine's speed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from astra_hetero.pipeline import run_spec
from astra_hetero.spec import load_spec
from astra_hetero.staging import OLD_TAG, STAGING_TAG
from tests.test_pipeline import small_spec
from tests.test_staging import snapshot

PHASES: dict[str, Callable[[Path], bool]] = {
    "start-up": lambda staging: True,  # while the command's modules are imported (see `importing`)
    "building": lambda staging: staging.is_dir(),
    "simulating": lambda staging: (staging / "analytical").is_dir(),
    "publishing": lambda staging: (staging / "result.json").is_file(),
}


def start(spec: Path, out: Path) -> subprocess.Popen:
    command = [sys.executable, "-m", "astra_hetero.cli.main", "run", str(spec), "-o", str(out), "--quiet"]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def staging_of(out: Path) -> Path | None:
    for path in out.parent.iterdir():
        if path.name.startswith(f".{out.name}{STAGING_TAG}"):
            return path
    return None


def signal_at(process: subprocess.Popen, out: Path, phase: str, sig: int) -> None:
    """Send `sig` once the run has reached `phase` (or has ended: then there is nothing to interrupt)."""
    reached = PHASES[phase]
    deadline = time.monotonic() + 120
    while process.poll() is None and time.monotonic() < deadline:
        staging = staging_of(out)
        if phase == "start-up" and importing(process.pid):
            break
        if phase != "start-up" and staging is not None and reached(staging):
            break
        time.sleep(0.002)
    if process.poll() is None:
        process.send_signal(sig)


def importing(pid: int) -> bool:
    """The command is importing its libraries (pydantic's compiled core is loaded): Python has started,
    so the signal lands in our code, not in the interpreter's own start-up, which no program controls."""
    try:
        return "pydantic_core" in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


def leftovers(out: Path) -> list[str]:
    return [p.name for p in out.parent.iterdir() if STAGING_TAG in p.name or OLD_TAG in p.name]


def nic_of(out: Path) -> float:
    """The NIC speed in the spec a run directory was built from (the two specs here differ in it)."""
    return yaml.safe_load((out / "spec.yaml").read_text())["cluster"]["node_groups"][0]["nic"]["gbps"]


def check_consistent(out: Path, old: dict, new_nic: float) -> bool:
    """True if `out` holds the complete new state; asserts it is otherwise the untouched old one."""
    if snapshot(out) == old:
        return False
    assert nic_of(out) == new_nic
    result = json.loads((out / "result.json").read_text())
    assert len(result["ranks"]) == json.loads((out / "manifest.json").read_text())["num_ranks"]
    assert (out / "trace.json").is_file()
    return True


FAST_NIC, SLOW_NIC = 400, 10


@pytest.fixture
def specs(tmp_path) -> tuple[Path, Path]:
    fast, slow = tmp_path / "fast.yaml", tmp_path / "slow.yaml"
    fast.write_text(yaml.safe_dump(small_spec(nic=FAST_NIC)))
    slow.write_text(yaml.safe_dump(small_spec(nic=SLOW_NIC)))
    return fast, slow


def completed_run(spec: Path, out: Path) -> dict:
    """A finished run of `spec` into `out`, made in this process (only the interrupted runs need one
    of their own)."""
    run_spec(load_spec(spec), out)
    return snapshot(out)


@pytest.mark.parametrize("phase", list(PHASES))
@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="phases are observed through /proc")
def test_sigint_leaves_the_old_state_and_says_one_line(tmp_path, specs, phase):
    out = tmp_path / "run"
    old = completed_run(specs[0], out)
    process = start(specs[1], out)
    signal_at(process, out, phase, signal.SIGINT)
    _, err = process.communicate(timeout=300)
    if process.returncode == 0:  # it finished before the signal
        assert err == "" and check_consistent(out, old, SLOW_NIC)
    else:
        assert (process.returncode, err) == (130, "interrupted\n")
        check_consistent(out, old, SLOW_NIC)
    assert leftovers(out) == []


@pytest.mark.parametrize("phase", ["building", "simulating", "publishing"])
def test_sigkill_leaves_a_consistent_state_and_the_next_run_cleans_up(tmp_path, specs, phase):
    out = tmp_path / "run"
    old = completed_run(specs[0], out)
    process = start(specs[1], out)
    signal_at(process, out, phase, signal.SIGKILL)
    process.communicate(timeout=300)
    check_consistent(out, old, SLOW_NIC)
    completed_run(specs[0], out)
    assert leftovers(out) == [] and nic_of(out) == FAST_NIC


def test_sigterm_cleans_up_like_sigint(tmp_path, specs):
    out = tmp_path / "run"
    old = completed_run(specs[0], out)
    process = start(specs[1], out)
    signal_at(process, out, "building", signal.SIGTERM)
    _, err = process.communicate(timeout=300)
    if process.returncode != 0:
        assert (process.returncode, err) == (143, "terminated\n")
    check_consistent(out, old, SLOW_NIC)
    assert leftovers(out) == []


def test_a_killed_swap_is_undone_by_the_next_run(tmp_path, specs):
    """Where no atomic exchange exists, a kill between the two renames leaves the old directory aside."""
    from astra_hetero.staging import host_tag

    out = tmp_path / "run"
    old = completed_run(specs[0], out)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    os.replace(out, tmp_path / f".run{OLD_TAG}{host_tag()}-{dead.pid}-x")
    completed_run(specs[1], out)
    assert snapshot(out) != old and leftovers(out) == []
