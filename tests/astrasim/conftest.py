"""Helpers for the ASTRA-sim driver tests: a minimal run directory and fake binaries.

The run directory holds exactly the files the driver checks for; the fake binaries are small Python
scripts that print real captured ASTRA-sim output and record how they were called.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

OUTPUTS = Path(__file__).parent.parent / "data" / "astrasim_outputs"

SYSTEM = {
    "scheduling-policy": "LIFO",
    "endpoint-delay": 10,
    "active-chunks-per-dimension": 1,
    "preferred-dataset-splits": 4,
    "collective-optimization": "localBWAware",
    "local-mem-bw": 1600,
    "boost-mode": 0,
    "roofline-enabled": 0,
    "peak-perf": 900,
}


def system(num_dims: int) -> dict:
    implementations = {
        f"{op}-implementation": ["ring"] * num_dims
        for op in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")
    }
    return {**SYSTEM, **implementations}


def write_run_dir(root: Path, num_ranks: int, logical_dims: tuple[int, ...] | None = None) -> Path:
    """A run directory with `num_ranks` ranks (two GPU types, two stages) and every input file present."""
    logical_dims = logical_dims or (num_ranks,)
    half = num_ranks // 2
    ranks = [
        {
            "rank": r,
            "node": r // 4,
            "node_group": "h100" if r < half else "a100",
            "gpu": "h100-sxm" if r < half else "a100-80",
            "local_gpu": r % 4,
            "stage": 0 if r < half else 1,
            "replica": r % 2,
            "tp_index": 0,
            "layers": [0, 1],
            "num_micro_batches": 1,
        }
        for r in range(num_ranks)
    ]
    network = f"topology: [ Ring ]\nnpus_count: [ {num_ranks} ]\nbandwidth: [ 50 ]\nlatency: [ 500 ]\n"
    files = {
        "manifest.json": json.dumps(
            {"format": "astra-hetero/manifest@1", "name": "t", "num_ranks": num_ranks, "ranks": ranks}
        ),
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


def write_fake_binary(
    bin_dir: Path,
    name: str,
    output: Path | None = None,
    exit_status: int = 0,
    stderr: str = "",
    sleep_s: float = 0,
) -> Path:
    """An executable `bin_dir/name`; its calls are appended as JSON lines to `bin_dir/name.calls`."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / name
    path.write_text(
        FAKE_BINARY.format(
            python=sys.executable,
            calls=str(bin_dir / f"{name}.calls"),
            output=str(output) if output else "",
            stderr=stderr,
            sleep_s=sleep_s,
            exit_status=exit_status,
        )
    )
    path.chmod(0o755)
    return path


def calls_of(binary: Path) -> list[dict]:
    calls = binary.with_name(binary.name + ".calls")
    return [json.loads(line) for line in calls.read_text().splitlines()] if calls.exists() else []


BINARIES = {
    "analytical": "AstraSim_Analytical_Congestion_Aware",
    "analytical-unaware": "AstraSim_Analytical_Congestion_Unaware",
    "ns3": "ns3.42-AstraSimNetwork-default",
}

# Reads what the real binary would: every file named on its command line, one trace per rank, and for
# ns-3 the input files its config names relative to the working directory; then prints a `finished`
# line per rank in ASTRA-sim's format.
CHECKING_BINARY = """#!{python}
import json, os, sys
args = dict(a[2:].split("=", 1) for a in sys.argv[1:])
for key, value in args.items():
    if key != "workload-configuration" and value != "empty":
        assert os.path.isfile(value), f"{{key}}: {{value}} missing"
prefix = args["workload-configuration"]
num_ranks = len(json.load(open(os.path.join(os.path.dirname(prefix), "..", "manifest.json")))["ranks"])
for rank in range(num_ranks):
    assert os.path.isfile(f"{{prefix}}.{{rank}}.et"), f"trace of rank {{rank}} missing"
if "logical-topology-configuration" in args:
    dims = json.load(open(args["logical-topology-configuration"]))["logical-dims"]
    system = json.load(open(args["system-configuration"]))
    assert len(system["all-reduce-implementation"]) == len(dims), "system/logical dims differ"
    for line in open(args["network-configuration"]):
        key, _, value = line.partition(" ")
        if key in ("TOPOLOGY_FILE", "FLOW_FILE", "TRACE_FILE"):
            assert os.path.isfile(value.strip()), f"{{key}} {{value.strip()}} not found from {{os.getcwd()}}"
for rank in range(num_ranks):  # like ASTRA-sim: finish = GPU time + exposed communication
    finish, exposed = 1000 + rank, 400 + rank
    print(f"[t] [workload] [info] sys[{{rank}}] finished, {{finish}} cycles, "
          f"exposed communication {{exposed}} cycles.")
    print(f"[t] [statistics] [info] sys[{{rank}}], GPU time: 600")
"""


def write_checking_binaries(bin_dir: Path) -> Path:
    """All three binaries as input-checking fakes in `bin_dir`."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name in BINARIES.values():
        (bin_dir / name).write_text(CHECKING_BINARY.format(python=sys.executable))
        (bin_dir / name).chmod(0o755)
    return bin_dir
