"""ASTRA-sim's system file (`--system-configuration`), read with ASTRA-sim's defaults and units.

What `Sys::initialize_sys` (astra-sim/system/Sys.cc) reads, and what it means:
- `peak-perf` is in TFLOP/s (× 10^12), `local-mem-bw` in GB/s (× 10^9, decimal): a roofline compute
  node takes num_ops / min(peak, num_ops / tensor_size × bandwidth) seconds, truncated to whole ns
  (`Workload::issue_comp`); a node with tensor_size 0 is skipped (no time).
- `local-mem-bw` also prices each reduction step inside a collective: read two chunks, write one
  (`PacketBundle::call`, each third truncated to whole ns on its own).
- `endpoint-delay` (ns, default 10) is what a collective message waits before and after each step of
  a collective over every NPU; `--injection-scale` multiplies it only when the file sets it.
- `preferred-dataset-splits` chunks a collective, `active-chunks-per-dimension` chunks run at once on
  a dimension's queue, `scheduling-policy` orders collectives waiting for a queue, and the
  `*-implementation` lists give each dimension's algorithm.
A value ASTRA-sim would refuse (an unknown policy or algorithm) is an error naming the file and key.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from astra_hetero.astrasim_inputs.json_file import read_json_object
from astra_hetero.errors import RunDirError

COLLECTIVE_KEYS = {
    "all_reduce": "all-reduce-implementation",
    "all_gather": "all-gather-implementation",
    "reduce_scatter": "reduce-scatter-implementation",
    "all_to_all": "all-to-all-implementation",
}
# Native implementations ASTRA-sim accepts (CollectiveImplLookup.cc); `direct<N>` takes a window
# of N messages in flight, plain `direct` no limit.
NATIVE_IMPLEMENTATIONS = ("ring", "oneRing", "doubleBinaryTree", "halvingDoubling", "oneHalvingDoubling")
SCHEDULING_POLICIES = ("LIFO", "FIFO", "EXPLICIT")
OPTIMIZATIONS = ("baseline", "localBWAware")
DEFAULT_ENDPOINT_DELAY_NS = 10  # Sys::Sys: communication_delay before the file is read


@dataclass(frozen=True)
class Roofline:
    """ASTRA-sim's roofline: `peak_flops_per_s` and `mem_bytes_per_s` as the system file gives them
    (TFLOP/s × 10^12, GB/s × 10^9)."""

    peak_flops_per_s: float
    mem_bytes_per_s: float
    source: str = field(default="", compare=False)  # the system file, for messages

    def time_ns(self, num_ops: int, tensor_size: int) -> int:
        """A compute node's time exactly as `Workload::issue_comp` computes it (doubles, truncated)."""
        if tensor_size == 0 or num_ops == 0:
            return 0  # tensor_size 0: ASTRA-sim skips the node; num_ops 0: no work (0 / perf)
        intensity = float(num_ops) / float(tensor_size)
        perf = min(self.mem_bytes_per_s * intensity, self.peak_flops_per_s)
        return int(float(num_ops) / perf * 1e9)


@dataclass(frozen=True)
class Implementation:
    name: str  # ring, direct, oneRing, doubleBinaryTree, halvingDoubling, ...
    window: int = -1  # direct<N>: messages in flight (-1: all)


@dataclass(frozen=True)
class SystemConfig:
    path: Path
    scheduling_policy: str
    endpoint_delay_ns: int
    active_chunks_per_dimension: int
    preferred_dataset_splits: int  # 0 when the file gives none (then a collective cannot be chunked)
    implementations: dict[str, tuple[Implementation, ...]]  # collective kind -> per dimension
    collective_optimization: str
    local_mem_gbytes_per_s: float  # 0 when the file gives none
    roofline: Roofline | None  # None unless roofline-enabled is set (and non-zero)
    model_shared_bus: bool
    other_keys: tuple[str, ...]  # keys read that change nothing here (boost-mode, trace-enabled, ...)

    @property
    def roofline_enabled(self) -> bool:
        return self.roofline is not None


def read_system(path: Path, injection_scale: float = 1.0) -> SystemConfig:
    data = read_json_object(path, "system file", "of settings")
    where = str(path)
    policy = _choice(data, "scheduling-policy", SCHEDULING_POLICIES, "LIFO", where)
    optimization = _choice(data, "collective-optimization", OPTIMIZATIONS, "baseline", where)
    delay = DEFAULT_ENDPOINT_DELAY_NS
    if "endpoint-delay" in data:  # scaled only when given, as Sys::initialize_sys does
        delay = int(_number(data, "endpoint-delay", where, low=0) * injection_scale)
    chunks = _integer(data, "active-chunks-per-dimension", where, default=1, low=1)
    splits = _integer(data, "preferred-dataset-splits", where, default=0, low=1)
    implementations = {
        kind: _implementations(data.get(key), key, where)
        for kind, key in COLLECTIVE_KEYS.items()
        if key in data
    }
    mem = _number(data, "local-mem-bw", where, low=0) if "local-mem-bw" in data else 0.0
    peak = _number(data, "peak-perf", where, low=0) if "peak-perf" in data else 0.0
    roofline = None
    if _flag(data, "roofline-enabled", where):
        for key, value in (("peak-perf", peak), ("local-mem-bw", mem)):
            if value <= 0:
                raise RunDirError(
                    f"{path}: roofline-enabled is set, so {key} must be a positive number (a compute "
                    f"node's time is num_ops / min(peak-perf, num_ops / tensor_size × local-mem-bw))"
                )
        roofline = Roofline(peak * 1e12, mem * 1e9, str(path))
    known = {
        "scheduling-policy",
        "collective-optimization",
        "endpoint-delay",
        "active-chunks-per-dimension",
        "preferred-dataset-splits",
        "local-mem-bw",
        "peak-perf",
        "roofline-enabled",
        "model-shared-bus",
        *COLLECTIVE_KEYS.values(),
    }
    return SystemConfig(
        path=path,
        scheduling_policy=policy,
        endpoint_delay_ns=delay,
        active_chunks_per_dimension=chunks,
        preferred_dataset_splits=splits,
        implementations=implementations,
        collective_optimization=optimization,
        local_mem_gbytes_per_s=mem,
        roofline=roofline,
        model_shared_bus=_flag(data, "model-shared-bus", where),
        other_keys=tuple(sorted(set(data) - known)),
    )


def _choice(data: dict[str, Any], key: str, valid: tuple[str, ...], default: str, where: str) -> str:
    # ASTRA-sim leaves both settings uninitialised when absent; the enums' first values (LIFO and
    # baseline) are what a zeroed object holds, so those are taken.
    value = data.get(key, default)
    if value not in valid:
        raise RunDirError(f"{where}: {key} must be one of {', '.join(valid)}, not {value!r}")
    return value


def _number(data: dict[str, Any], key: str, where: str, low: float) -> float:
    value = data[key]
    number = value if isinstance(value, int | float) and not isinstance(value, bool) else math.nan
    if not math.isfinite(number) or number < low:
        raise RunDirError(f"{where}: {key} must be a number >= {low:g}, not {value!r}")
    return float(value)


def _integer(data: dict[str, Any], key: str, where: str, default: int, low: int) -> int:
    if key not in data:
        return default
    value = data[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise RunDirError(f"{where}: {key} must be an integer >= {low}, not {value!r}")
    return value


def _flag(data: dict[str, Any], key: str, where: str) -> bool:
    value = data.get(key, 0)
    if isinstance(value, bool):
        return value
    if not isinstance(value, int | float):
        raise RunDirError(f"{where}: {key} must be 0 or 1, not {value!r}")
    return value != 0


def _implementations(value: Any, key: str, where: str) -> tuple[Implementation, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise RunDirError(f"{where}: {key} must be a list of algorithm names, one per dimension")
    return tuple(_implementation(name, key, where) for name in value)


def _implementation(name: str, key: str, where: str) -> Implementation:
    if name in NATIVE_IMPLEMENTATIONS:
        return Implementation(name)
    for base in ("oneDirect", "direct"):
        if name.startswith(base):
            rest = name[len(base) :]
            if rest == "":
                return Implementation(base)
            if rest.isdigit() and int(rest) > 0:
                return Implementation(base, int(rest))
    valid = ", ".join((*NATIVE_IMPLEMENTATIONS, "direct", "direct<N>", "oneDirect", "oneDirect<N>"))
    raise RunDirError(f"{where}: {key} lists {name!r}, which ASTRA-sim does not know (valid: {valid})")
