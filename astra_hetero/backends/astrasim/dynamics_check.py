"""What the ASTRA-sim backends cannot simulate of a run directory's `dynamics.json`, refused up front.

None of the events is expressible in the inputs ASTRA-sim reads, so each is refused, naming it:
- the analytical backends take one static bandwidth and latency per network dimension;
- the ns-3 backend reads static link rates from topology.txt. Its config's only dynamic key,
  `LINK_DOWN t a b`, takes down one link for good at 2 s + t µs of simulated time (the ns-3 entry adds
  2 s, a legacy of HPCC's flow start), while ASTRA-sim's workload starts at 0 s; nothing restores a
  link, scales a rate, slows an NPU or adds a flow (its FLOW_FILE flows are not started by ASTRA-sim).
- ASTRA-sim runs each trace once: several iterations are refused too.
"""

from __future__ import annotations

from pathlib import Path

from astra_hetero import rundir
from astra_hetero.errors import RunDirError

_WHY = {
    "link_rate": "link rates are static in its inputs",
    "device_slowdown": "NPU compute speed is fixed by the traces' durations",
    "background_traffic": "it starts no flows besides the workload's",
    "jitter": "it runs each kernel for exactly its trace duration",
}


def refuse_dynamics(run_dir: Path, backend: str, iterations: int | None) -> None:
    path = Path(run_dir) / rundir.DYNAMICS
    rundir.check_dynamics_kept(run_dir)
    data = rundir.read_json_object(path, "") if path.is_file() else {}
    count = iterations if iterations is not None else data.get("iterations", 1)
    for event in data.get("events", []):
        kind = event.get("event", "?") if isinstance(event, dict) else "?"
        index = event.get("index", "?") if isinstance(event, dict) else "?"
        raise RunDirError(
            f"dynamics[{index}] ({kind}): the {backend} backend cannot model it "
            f"({_WHY.get(kind, 'unknown event')}); run it on the embedded backend ({path})"
        )
    manifest = Path(run_dir) / rundir.MANIFEST
    slowdown = rundir.read_json_object(manifest, "").get("comm_overlap_slowdown") if manifest.is_file() else 0
    if slowdown:
        raise RunDirError(
            f"compute.comm_overlap_slowdown {slowdown}: the {backend} backend cannot model it (a "
            "kernel runs for exactly its trace duration); run it on the embedded backend"
        )
    if count != 1:
        raise RunDirError(
            f"iterations {count}: the {backend} backend simulates one iteration of the traces; "
            "run several on the embedded backend"
        )
