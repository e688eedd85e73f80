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
    files = run_files(flavor, Path(run_dir))
    needed = [files.remote_memory, files.network, files.system]
    needed += [p for p in (files.comm_groups, files.logical_topology) if p is not None]
    for relative in needed:
        _require(run_dir, relative)
    groups = str(root / files.comm_groups) if files.comm_groups else "empty"
    argv = [
        executable,
        f"--workload-configuration={root / files.workload_prefix}",
        f"--system-configuration={root / files.system}",
        f"--remote-memory-configuration={root / files.remote_memory}",
        f"--network-configuration={root / files.network}",
        f"--comm-group-configuration={groups}",
    ]
    if files.logical_topology:
        argv.append(f"--logical-topology-configuration={root / files.logical_topology}")
    argv += [f"--{name}={_option_text(value)}" for name, value in files.options.items()]
    return Command(tuple(argv), root / flavor.cwd if flavor.cwd != "." else root)


@dataclass(frozen=True)
class RunFiles:
    """The files (relative to the run directory) and options one ASTRA-sim run takes."""

    workload_prefix: str
    system: str
    network: str
    remote_memory: str
    comm_groups: str | None  # None: ASTRA-sim's `empty`
    logical_topology: str | None
    options: dict[str, object]  # further ASTRA-sim options (an imported study's own)


def run_files(flavor: Flavor, run_dir: Path) -> RunFiles:
    """What `flavor` runs: for a generated run directory the files of our layout; for an imported
    study exactly the study's own files and options (manifest `astrasim`)."""
    manifest_path = run_dir / rundir.MANIFEST
    manifest = (
        rundir.read_json_object(manifest_path, "run `astra-hetero build` first")
        if manifest_path.is_file()
        else {}
    )
    study = manifest.get("astrasim")
    if not isinstance(study, dict):
        groups = rundir.COMM_GROUPS if _read_json(run_dir, rundir.COMM_GROUPS) else None
        system = flavor.system or ns3_system_file(run_dir)
        return RunFiles(
            rundir.WORKLOAD_PREFIX,
            system,
            flavor.network,
            rundir.REMOTE_MEMORY,
            groups,
            flavor.logical_topology,
            {},
        )
    if study.get("refused"):
        raise RunDirError(
            f"{manifest_path}: the real ASTRA-sim binaries cannot run this study: {study['refused']}"
        )
    backend = study.get("network_backend")
    wanted = "ns3" if flavor.backend == "ns3" else "analytical"
    if backend != wanted:
        instead = "--backend ns3" if backend == "ns3" else "--backend analytical-unaware"
        raise RunDirError(
            f"{manifest_path}: this imported study's network is {backend}; the {flavor.backend} backend "
            f"runs {wanted} studies ({instead})"
        )
    network = str(study.get("network_configuration"))
    if flavor.backend == "analytical":
        dims = _analytical_dims(run_dir, network)
        if dims > 1:
            raise RunDirError(
                f"{run_dir / network}: {dims} dimensions; the congestion-aware binary accepts only a "
                "one-dimensional network (use --backend analytical-unaware)"
            )
    options = study.get("options") or {}
    allowed = NS3_OPTIONS if flavor.backend == "ns3" else ANALYTICAL_OPTIONS
    return RunFiles(
        str(manifest.get("workload_prefix", rundir.WORKLOAD_PREFIX)),
        str(manifest.get("system_configuration", rundir.ANALYTICAL_SYSTEM)),
        network,
        str(study.get("remote_memory_configuration") or rundir.REMOTE_MEMORY),
        study.get("comm_group_configuration"),
        study.get("logical_topology_configuration") if flavor.backend == "ns3" else None,
        {name: value for name, value in options.items() if name in allowed},
    )


# The options each binary parses (CmdLineParser.cc; AstraSimNetwork.cc for ns-3)
ANALYTICAL_OPTIONS = (
    "num-queues-per-dim",
    "compute-scale",
    "comm-scale",
    "injection-scale",
    "rendezvous-protocol",
)
NS3_OPTIONS = ("num-queues-per-dim", "comm-scale", "injection-scale", "rendezvous-protocol")


def _option_text(value: object) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def _analytical_dims(run_dir: Path, network: str) -> int:
    from astra_hetero.astrasim_inputs.analytical import read_analytical_network

    return len(read_analytical_network(run_dir / network).dims)


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


def _require(run_dir: Path, relative: str) -> None:
    if not (run_dir / relative).is_file():
        raise RunDirError(f"{run_dir / relative}: missing (run `astra-hetero build` on this directory first)")


def _read_json(run_dir: Path, relative: str) -> dict:
    return rundir.read_json_object(run_dir / relative, "run `astra-hetero build` on this directory first")
