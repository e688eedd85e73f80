"""The exact command line each ASTRA-sim binary expects, built from a run directory.

Commands are argument lists, never shell strings. Paths are written as the process will see them:
`root` is where the run directory appears to the process (the directory itself for a native run, the
bind-mount point inside a container), so one builder serves both.

Working directory: the ns-3 config names its input and output files relative to the run directory, so
ns-3 runs there. The analytical binaries copy their log into `./log/` of their working directory, so
they run in `logs/` to keep that copy beside our own log.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePath

from astra_hetero import rundir
from astra_hetero.errors import BackendUnavailable, RunDirError


@dataclass(frozen=True)
class Flavor:
    """One ASTRA-sim binary and the run-directory files it reads."""

    backend: str
    binary_name: str
    network: str
    system: str | None  # None: chosen to match the ns-3 logical topology
    logical_topology: str | None
    cwd: str


FLAVORS: dict[str, Flavor] = {
    "analytical": Flavor(
        "analytical",
        "AstraSim_Analytical_Congestion_Aware",
        rundir.ANALYTICAL_NETWORK_1D,
        rundir.ANALYTICAL_SYSTEM_1D,
        None,
        rundir.LOGS_DIR,
    ),
    "analytical-unaware": Flavor(
        "analytical-unaware",
        "AstraSim_Analytical_Congestion_Unaware",
        rundir.ANALYTICAL_NETWORK,
        rundir.ANALYTICAL_SYSTEM,
        None,
        rundir.LOGS_DIR,
    ),
    "ns3": Flavor(
        "ns3", "ns3.42-AstraSimNetwork-default", rundir.NS3_CONFIG, None, rundir.NS3_LOGICAL_TOPOLOGY, "."
    ),
}

# System files the ns-3 run may use, in order of preference; the first whose number of dimensions
# equals the logical topology's is taken.
NS3_SYSTEM_CANDIDATES = (rundir.ANALYTICAL_SYSTEM, rundir.ANALYTICAL_SYSTEM_1D)


@dataclass(frozen=True)
class Command:
    argv: tuple[str, ...]
    cwd: PurePath


def flavor(backend: str) -> Flavor:
    if backend not in FLAVORS:
        raise BackendUnavailable(f"unknown ASTRA-sim backend {backend!r}; valid: {', '.join(FLAVORS)}")
    return FLAVORS[backend]


def build_command(flavor: Flavor, run_dir: Path, executable: str, root: PurePath | None = None) -> Command:
    """Check that the files `flavor` reads exist in `run_dir`; return its command as seen from `root`."""
    root = Path(run_dir).resolve() if root is None else root
    system = flavor.system or ns3_system_file(run_dir)
    needed = [rundir.COMM_GROUPS, rundir.REMOTE_MEMORY, flavor.network, system]
    if flavor.logical_topology:
        needed.append(flavor.logical_topology)
    for relative in needed:
        _require(run_dir, relative)
    argv = [
        executable,
        f"--workload-configuration={root / rundir.WORKLOAD_PREFIX}",
        f"--system-configuration={root / system}",
        f"--remote-memory-configuration={root / rundir.REMOTE_MEMORY}",
        f"--network-configuration={root / flavor.network}",
        f"--comm-group-configuration={_comm_groups_argument(run_dir, root)}",
    ]
    if flavor.logical_topology:
        argv.append(f"--logical-topology-configuration={root / flavor.logical_topology}")
    return Command(tuple(argv), root / flavor.cwd if flavor.cwd != "." else root)


def ns3_system_file(run_dir: Path) -> str:
    """The system file whose dimensions match `ns3/logical_topology.json` (ASTRA-sim needs them equal)."""
    dims = len(_read_json(run_dir, rundir.NS3_LOGICAL_TOPOLOGY).get("logical-dims", []))
    seen = []
    for relative in NS3_SYSTEM_CANDIDATES:
        if not (run_dir / relative).is_file():
            continue
        implementations = _read_json(run_dir, relative).get("all-reduce-implementation", [])
        seen.append(f"{relative} has {len(implementations)}")
        if len(implementations) == dims:
            return relative
    raise RunDirError(
        f"{run_dir / rundir.NS3_LOGICAL_TOPOLOGY}: {dims} logical dimension(s) but no system file matches "
        f"({'; '.join(seen) or 'none of ' + ', '.join(NS3_SYSTEM_CANDIDATES) + ' exists'}); "
        "run `astra-hetero topology` again"
    )


def _comm_groups_argument(run_dir: Path, root: PurePath) -> str:
    # ASTRA-sim documents the literal `empty` for "no groups"; use it rather than an empty JSON object.
    groups = _read_json(run_dir, rundir.COMM_GROUPS)
    return str(root / rundir.COMM_GROUPS) if groups else "empty"


def _require(run_dir: Path, relative: str) -> None:
    if not (run_dir / relative).is_file():
        raise RunDirError(f"{run_dir / relative}: missing (run `astra-hetero build` on this directory first)")


def _read_json(run_dir: Path, relative: str) -> dict:
    return rundir.read_json_object(run_dir / relative, "run `astra-hetero build` on this directory first")
