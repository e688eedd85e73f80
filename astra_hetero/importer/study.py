"""An existing ASTRA-sim study, read from the files its command line names and checked as ASTRA-sim
would check them, before anything is written.

`StudyFiles` is the command line (ASTRA-sim's own option names); `read_study` finds the traces behind
the workload prefix, reads the system file and the network (analytical YAML, or an ns-3 config with
its topology and logical topology), the comm groups and the remote-memory file, and refuses a study
ASTRA-sim would refuse or misread — each error names the file and what is wrong:
- a prefix that matches no `<prefix>.<rank>.et` files (or, given a directory, no single trace set);
- rank counts that disagree between the traces, the network and the comm groups;
- a network dimension ASTRA-sim does not accept (astrasim_inputs.analytical);
- more collective implementations than network dimensions (ASTRA-sim asserts);
- comm-group ids that are not positive integers, ranks outside the job, a trace naming a group the
  file does not define;
- roofline compute nodes without a system file that enables roofline.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from astra_hetero.astrasim_inputs.analytical import AnalyticalNetwork, read_analytical_network
from astra_hetero.astrasim_inputs.remote_memory import check_remote_memory
from astra_hetero.astrasim_inputs.system import SystemConfig, read_system
from astra_hetero.errors import RunDirError
from astra_hetero.importer.ns3_study import Ns3Network, read_ns3_network

MAX_RANKS = 1 << 20
# ASTRA-sim's options that change nothing the files say, and what the importer does with them.
SCALAR_OPTIONS = {
    "num-queues-per-dim": int,
    "injection-scale": float,
    "comm-scale": float,
    "compute-scale": float,
    "rendezvous-protocol": bool,
}


@dataclass(frozen=True)
class StudyFiles:
    """The study's command line: ASTRA-sim's option values, paths as the user gave them."""

    workload: str  # --workload-configuration: DIR/NAME for DIR/NAME.<rank>.et (or a directory)
    system: Path
    network: Path
    remote_memory: Path | None = None
    comm_groups: Path | None = None  # None: ASTRA-sim's `empty`
    logical_topology: Path | None = None
    options: dict[str, Any] = field(default_factory=dict)  # SCALAR_OPTIONS given on the command line
    argv: tuple[str, ...] = ()  # the command line as given, for the record


@dataclass(frozen=True)
class Study:
    files: StudyFiles
    trace_prefix: Path  # DIR/NAME
    trace_paths: tuple[Path, ...]  # rank order
    system: SystemConfig
    backend: str  # analytical | ns3
    analytical: AnalyticalNetwork | None
    ns3: Ns3Network | None
    dims: tuple[int, ...]  # ASTRA-sim's dimensions
    groups: dict[str, list[int]] | None  # the comm-group file as read (None: `empty`)

    @property
    def num_ranks(self) -> int:
        return len(self.trace_paths)

    @property
    def trace_name(self) -> str:
        return self.trace_prefix.name


def read_study(files: StudyFiles) -> Study:
    prefix, paths = find_traces(files.workload)
    injection = float(files.options.get("injection-scale", 1.0))
    system = read_system(files.system, injection)
    analytical, ns3 = None, None
    if _is_ns3_config(files.network):
        if files.logical_topology is None:
            raise RunDirError(
                f"{files.network}: an ns-3 network configuration needs --logical-topology-configuration "
                "(ASTRA-sim's ns-3 backend takes its NPU dimensions from it)"
            )
        ns3 = read_ns3_network(files.network, files.logical_topology)
        dims, backend, where = ns3.dims, "ns3", files.logical_topology
    else:
        analytical = read_analytical_network(files.network)
        dims, backend, where = tuple(d.npus for d in analytical.dims), "analytical", files.network
    num_npus = math.prod(dims)
    if num_npus != len(paths):
        raise RunDirError(
            f"{where}: the network has {num_npus} NPUs ({' x '.join(map(str, dims))}) but {prefix}.<rank>.et "
            f"holds {len(paths)} traces; ASTRA-sim runs one trace per NPU"
        )
    for kind, implementations in system.implementations.items():
        if len(implementations) > len(dims):
            key = kind.replace("_", "-") + "-implementation"
            raise RunDirError(
                f"{files.system}: {key} lists {len(implementations)} implementations for a network of "
                f"{len(dims)} dimension(s) ({where}); ASTRA-sim refuses more implementations than dimensions"
            )
        if kind == "all_to_all" and any(i.name.endswith("alvingDoubling") for i in implementations):
            raise RunDirError(f"{files.system}: {key} cannot be halvingDoubling (ASTRA-sim exits on it)")
    groups = read_comm_groups(files.comm_groups, num_npus) if files.comm_groups else None
    if files.remote_memory is not None:  # copied verbatim, so checked here: ASTRA-sim exits on a bad one
        check_remote_memory(files.remote_memory)
    return Study(files, prefix, paths, system, backend, analytical, ns3, dims, groups)


def find_traces(workload: str) -> tuple[Path, tuple[Path, ...]]:
    """The trace prefix and its files in rank order: `workload` is DIR/NAME (ASTRA-sim's meaning), or a
    directory holding exactly one `<name>.<rank>.et` set."""
    given = Path(workload)
    if given.is_dir():
        names = sorted(
            {m.group(1) for p in given.glob("*.0.et") if (m := re.fullmatch(r"(.+)\.0\.et", p.name))}
        )
        if len(names) != 1:
            found = f"several trace sets ({', '.join(names)})" if names else "no <name>.0.et trace"
            raise RunDirError(f"{given}: {found}; give --workload-configuration DIR/NAME")
        given = given / names[0]
    paths = []
    while len(paths) <= MAX_RANKS and Path(f"{given}.{len(paths)}.et").is_file():
        paths.append(Path(f"{given}.{len(paths)}.et"))
    if not paths:
        stray = (
            sorted(p.name for p in given.parent.glob(f"{given.name}.*.et"))[:3]
            if given.parent.is_dir()
            else []
        )
        hint = f" (found {', '.join(stray)}, but no rank 0)" if stray else ""
        raise RunDirError(
            f"{given}: --workload-configuration matches no traces: {given}.0.et is missing{hint}; "
            "ASTRA-sim reads PREFIX.<rank>.et for every NPU"
        )
    return given, tuple(paths)


def read_comm_groups(path: Path, num_ranks: int) -> dict[str, list[int]]:
    """The comm-group file ({"<id>": [rank, ...]}), as ASTRA-sim reads it: ids are positive integers
    (0 is the group of every rank), members ranks of the job."""
    try:
        data = json.loads(Path(path).read_bytes())
    except FileNotFoundError:
        raise RunDirError(f"{path}: comm-group file missing") from None
    except (OSError, ValueError) as exc:
        raise RunDirError(f"{path}: not a JSON comm-group file ({exc})") from None
    if not isinstance(data, dict):
        raise RunDirError(f'{path}: a comm-group file maps group ids to rank lists ({{"1": [0, 1]}})')
    for name, members in data.items():
        if not re.fullmatch(r"[0-9]+", name) or int(name) == 0:
            raise RunDirError(f"{path}: group id {name!r} must be a positive integer (ASTRA-sim reserves 0)")
        valid = (
            isinstance(members, list)
            and members
            and all(isinstance(r, int) and not isinstance(r, bool) and 0 <= r < num_ranks for r in members)
        )
        if not valid or len(set(members)) != len(members):
            raise RunDirError(
                f"{path}: group {name} must list distinct ranks of the job (0..{num_ranks - 1}), "
                f"not {members!r}"
            )
    return data


def check_trace_groups(study: Study, used: dict[int, tuple[str, ...]]) -> None:
    """Every pg_name a rank's collectives use is a group of the file holding that rank (ASTRA-sim
    aborts on an unknown one); `used`: rank -> its pg_names."""
    for rank, names in used.items():
        for name in names:
            if name in ("", "0"):
                continue
            members = (study.groups or {}).get(name)
            source = study.files.comm_groups or "--comm-group-configuration (not given)"
            if members is None:
                raise RunDirError(
                    f"{study.trace_paths[rank]}: its collectives use pg_name {name!r}, which {source} does "
                    "not define (ASTRA-sim aborts: communicator group not found)"
                )
            if rank not in members:
                raise RunDirError(
                    f"{study.trace_paths[rank]}: uses comm group {name}, which {source} "
                    f"defines without rank {rank}"
                )


def _is_ns3_config(path: Path) -> bool:
    """An ns-3 config is `KEY value` lines (TOPOLOGY_FILE among them); an analytical network is YAML."""
    try:
        head = Path(path).read_text(errors="replace")[:65536]
    except FileNotFoundError:
        raise RunDirError(f"{path}: network file missing") from None
    except OSError as exc:
        raise RunDirError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    return re.search(r"^\s*TOPOLOGY_FILE\s", head, re.MULTILINE) is not None
