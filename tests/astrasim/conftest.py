"""Helpers for the ASTRA-sim driver tests: a minimal run directory and fake binaries.

The run directory holds exactly the files the driver checks for; the fake binaries are small Python
scripts that print real captured ASTRA-sim output and record how they were called.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

OUTPUTS = Path(__file__).parent.parent / "data" / "astrasim_outputs"

SYSTEM = {"scheduling-policy": "LIFO", "endpoint-delay": 10, "active-chunks-per-dimension": 1,
          "preferred-dataset-splits": 4, "collective-optimization": "localBWAware", "local-mem-bw": 1600,
          "boost-mode": 0, "roofline-enabled": 0, "peak-perf": 900}


def system(num_dims: int) -> dict:
    implementations = {f"{op}-implementation": ["ring"] * num_dims
                       for op in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")}
    return {**SYSTEM, **implementations}


def write_run_dir(root: Path, num_ranks: int, logical_dims: tuple[int, ...] | None = None) -> Path:
    """A run directory with `num_ranks` ranks (two GPU types, two stages) and every input file present."""
    logical_dims = logical_dims or (num_ranks,)
    half = num_ranks // 2
    ranks = [{"rank": r, "node": r // 4, "node_group": "h100" if r < half else "a100",
              "gpu": "h100-sxm" if r < half else "a100-80", "local_gpu": r % 4, "stage": 0 if r < half else 1,
              "replica": r % 2, "tp_index": 0, "layers": [0, 1], "num_micro_batches": 1}
             for r in range(num_ranks)]
    network = f"topology: [ Ring ]\nnpus_count: [ {num_ranks} ]\nbandwidth: [ 50 ]\nlatency: [ 500 ]\n"
    files = {
        "manifest.json": json.dumps({"format": "astra-hetero/manifest@1", "name": "t", "num_ranks": num_ranks,
                                     "ranks": ranks}),
        "workload/comm_groups.json": json.dumps({"1": list(range(num_ranks))}),
        "analytical/network.yml": network,
        "analytical/network_1d.yml": network,
        "analytical/system.json": json.dumps(system(len(logical_dims))),
        "analytical/system_1d.json": json.dumps(system(1)),
        "analytical/remote_memory.json": json.dumps({"memory-type": "NO_MEMORY_EXPANSION"}),
        "ns3/config.txt": "TOPOLOGY_FILE ns3/topology.txt\nFLOW_FILE ns3/flow.txt\n",
        "ns3/topology.txt": "",
        "ns3/logical_topology.json": json.dumps({"logical-dims": [str(d) for d in logical_dims]}),
    }
    files.update({f"workload/workload.{r}.et": "" for r in range(num_ranks)})
    for relative, text in files.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text)
    return root


FAKE_BINARY = """#!{python}
# A stand-in for an ASTRA-sim binary: records its call, prints captured output, exits with a status.
import json, os, sys, time
with open({calls!r}, "a") as calls:
    calls.write(json.dumps({{"argv": sys.argv, "cwd": os.getcwd()}}) + "\\n")
sys.stdout.write(open({output!r}).read() if {output!r} else "")
sys.stdout.flush()
sys.stderr.write({stderr!r})
if {sleep_s!r}:
    child = __import__("subprocess").Popen(["sleep", str({sleep_s!r})])
    open({calls!r} + ".child", "w").write(str(child.pid))
    time.sleep({sleep_s!r})
sys.exit({exit_status!r})
"""


def write_fake_binary(bin_dir: Path, name: str, output: Path | None = None, exit_status: int = 0,
                      stderr: str = "", sleep_s: float = 0) -> Path:
    """An executable `bin_dir/name`; its calls are appended as JSON lines to `bin_dir/name.calls`."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / name
    path.write_text(FAKE_BINARY.format(python=sys.executable, calls=str(bin_dir / f"{name}.calls"),
                                       output=str(output) if output else "", stderr=stderr,
                                       sleep_s=sleep_s, exit_status=exit_status))
    path.chmod(0o755)
    return path


def calls_of(binary: Path) -> list[dict]:
    calls = binary.with_name(binary.name + ".calls")
    return [json.loads(line) for line in calls.read_text().splitlines()] if calls.exists() else []


@pytest.fixture
def outputs() -> Path:
    return OUTPUTS
