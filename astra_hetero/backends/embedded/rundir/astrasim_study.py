"""An imported ASTRA-sim study's own inputs, as the embedded engine's ASTRA-sim model needs them.

`astra-hetero import` records them in manifest.json under `astrasim`:

    "astrasim": {"network_backend": "analytical" | "ns3",
                 "network_configuration": "astrasim/network.yml",   (the study's file, verbatim)
                 "logical_topology_configuration": null | "astrasim/logical_topology.json",
                 "npu_link_scales": null | "astrasim/npu_link_scales.json",  (an overlay's link rates)
                 "options": {"injection-scale": 1.0, "num-queues-per-dim": 1, ...}}

and the system file as the manifest's `system_configuration`. Analytical studies are priced on their
own dimensions (`astrasim_inputs.analytical`); ns-3 studies on their logical dimensions, each message
at the full rate and path latency of its route through the topology (no packets, queues or
congestion — said in the result's approximation line).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from astra_hetero import rundir
from astra_hetero.astrasim_inputs.analytical import AnalyticalNetwork, NetworkDelays, read_analytical_network
from astra_hetero.astrasim_inputs.system import SystemConfig, read_system
from astra_hetero.backends.embedded.network.astrasim_phases import Delay
from astra_hetero.backends.embedded.network.routing import Router
from astra_hetero.errors import RunDirError

NETWORK_BACKENDS = ("analytical", "ns3")


@dataclass(frozen=True)
class AstraSimStudy:
    backend: str  # analytical | ns3
    system: SystemConfig
    dims: tuple[int, ...]  # ASTRA-sim's dimensions (the network's, or the ns-3 logical topology's)
    analytical: AnalyticalNetwork | None  # the analytical network, if that is the study's
    scales: tuple[tuple[float, ...], ...] | None  # per NPU, per dimension: an overlay's link factors
    queues_per_dim: int
    approximations: tuple[str, ...]  # what the model cannot follow, one clause each

    def delay(self, router: Router) -> Delay:
        if self.analytical is not None:
            return NetworkDelays(self.analytical, self.scales)
        return _RouteDelays(router)


class _RouteDelays:
    """A message through the ns-3 topology at its route's bottleneck rate plus the path latency."""

    def __init__(self, router: Router) -> None:
        self.router = router

    def __call__(self, src: int, dst: int, size: int) -> int:
        if src == dst:
            return 0
        route = self.router.route(src, dst)
        capacity = self.router.bundle_bytes_per_ns
        rate = min(capacity[link] / share for link, share in route.links)
        return int(route.latency_ns + size / rate)


def read_study(root: Path, manifest: dict[str, Any], system_file: Path | None) -> AstraSimStudy | None:
    section = manifest.get("astrasim")
    if section is None:
        return None
    where = root / rundir.MANIFEST
    if not isinstance(section, dict):
        raise RunDirError(f"{where}: astrasim must be an object naming the study's files")
    backend = section.get("network_backend")
    if backend not in NETWORK_BACKENDS:
        raise RunDirError(f"{where}: astrasim.network_backend must be one of {', '.join(NETWORK_BACKENDS)}")
    if system_file is None:
        raise RunDirError(f"{where}: an imported study needs system_configuration (its system file)")
    options = section.get("options", {})
    if not isinstance(options, dict):
        raise RunDirError(f"{where}: astrasim.options must map ASTRA-sim option names to values")
    injection = _number(options.get("injection-scale", 1.0), "astrasim.options.injection-scale", where)
    queues = options.get("num-queues-per-dim", 1)
    if isinstance(queues, bool) or not isinstance(queues, int) or queues < 1:
        raise RunDirError(f"{where}: astrasim.options.num-queues-per-dim must be an integer >= 1")
    system = read_system(system_file, injection)
    analytical = None
    if backend == "analytical":
        analytical = read_analytical_network(_file(root, section, "network_configuration"))
        dims = tuple(d.npus for d in analytical.dims)
    else:
        dims = _logical_dims(_file(root, section, "logical_topology_configuration"))
    scales = None
    if section.get("npu_link_scales") is not None:
        scales = _scales(_file(root, section, "npu_link_scales"), math.prod(dims), len(dims))
    return AstraSimStudy(
        backend, system, dims, analytical, scales, queues, _approximations(system, backend, options, scales)
    )


def _file(root: Path, section: dict[str, Any], key: str) -> Path:
    relative = section.get(key)
    if not isinstance(relative, str):
        raise RunDirError(f"{root / rundir.MANIFEST}: astrasim.{key} must name a file in the run directory")
    path = rundir.inside(root, relative, f"manifest.json astrasim.{key}")
    if not path.is_file():
        raise RunDirError(f"{path}: missing (manifest.json astrasim.{key} names it)")
    return path


def _number(value: Any, key: str, where: Path) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise RunDirError(f"{where}: {key} must be a positive number, not {value!r}")
    return float(value)


def _logical_dims(path: Path) -> tuple[int, ...]:
    data = rundir.read_json_object(path, "")
    try:
        dims = tuple(int(d) for d in data["logical-dims"])
    except (KeyError, TypeError, ValueError):
        raise RunDirError(f'{path}: expected {{"logical-dims": ["N", ...]}}') from None
    if not dims or min(dims) < 1:
        raise RunDirError(f"{path}: logical-dims must be positive")
    return dims


def _scales(path: Path, num_npus: int, num_dims: int) -> tuple[tuple[float, ...], ...]:
    try:
        data = json.loads(path.read_text())["scales"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise RunDirError(
            f'{path}: expected {{"scales": [[factor per dimension] per NPU]}} ({exc})'
        ) from None
    valid = isinstance(data, list) and len(data) == num_npus
    rows = []
    for row in data if valid else []:
        if not isinstance(row, list) or len(row) != num_dims:
            valid = False
            break
        if not all(isinstance(v, int | float) and not isinstance(v, bool) and v > 0 for v in row):
            valid = False
            break
        rows.append(tuple(float(v) for v in row))
    if not valid:
        raise RunDirError(f"{path}: needs {num_npus} rows of {num_dims} positive factors (NPU x dimension)")
    return tuple(rows)


def _approximations(
    system: SystemConfig, backend: str, options: dict[str, Any], scales: tuple | None
) -> tuple[str, ...]:
    notes = []
    names = {impl.name for impls in system.implementations.values() for impl in impls}
    if "doubleBinaryTree" in names:
        notes.append("doubleBinaryTree collectives are priced as rings")
    if system.model_shared_bus:
        notes.append("model-shared-bus (the LogGP memory bus) is not modelled: endpoint delays only")
    if options.get("rendezvous-protocol"):
        notes.append("the rendezvous protocol's handshake messages are not modelled")
    if int(options.get("num-queues-per-dim", 1)) > 1:
        notes.append("with several queues per dimension each collective's queue turns start afresh")
    if backend == "ns3":
        notes.append(
            "the ns-3 network is priced without queues or congestion control: every message at its "
            "route's rate as the link model gives it, plus the path latency"
        )
    if scales is not None:
        notes.append(
            "with per-NPU link rates each phase of a collective takes its slowest line, and each "
            "comm-group ring step its own link"
        )
    return tuple(notes)
