"""ASTRA-sim's analytical network file (`--network-configuration NETWORK.yml`) and the
congestion-unaware network it describes.

The file lists, per dimension, a building block (`Ring`, `Switch`, `FullyConnected`), its NPU count,
bandwidth and latency (NetworkParser.cpp); it is refused as ASTRA-sim refuses it (unknown block,
lists of different lengths, an NPU count under 2, a bandwidth <= 0, a negative latency). NPU `i` sits
at coordinate (i // (n0·…·n(d−1))) mod nd in dimension d (MultiDimTopology::translate_address).

A message of S bytes between two NPUs crosses the first dimension in which their coordinates differ
and takes hops × latency + S / bandwidth, truncated to whole ns (congestion-unaware
BasicTopology::send): a Switch is two hops, FullyConnected one, a (bidirectional) Ring the shorter
way round. The bandwidth is in GiB/s although the file says GB/s (bw × 2^30 / 10^9 bytes per ns,
NetworkFunction.cpp). Nothing is shared: concurrent messages never slow each other down.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from astra_hetero import units
from astra_hetero.errors import RunDirError

BLOCKS = ("Ring", "Switch", "FullyConnected")
KEYS = ("topology", "npus_count", "bandwidth", "latency")


@dataclass(frozen=True)
class Dimension:
    block: str  # Ring | Switch | FullyConnected
    npus: int
    bandwidth: float  # as the file writes it: GB/s by name, GiB/s in effect
    latency_ns: float

    @property
    def bytes_per_ns(self) -> float:
        return self.bandwidth * (1 << 30) / 1_000_000_000  # NetworkFunction.cpp bw_GBps_to_Bpns

    def hops(self, src: int, dst: int) -> int:
        """Links a message crosses between coordinates `src` != `dst` of this dimension."""
        if self.block == "Switch":
            return 2
        if self.block == "FullyConnected":
            return 1
        clockwise = (dst - src) % self.npus
        return min(clockwise, self.npus - clockwise)


@dataclass(frozen=True)
class AnalyticalNetwork:
    dims: tuple[Dimension, ...]

    @property
    def num_npus(self) -> int:
        return math.prod(d.npus for d in self.dims)

    def address(self, npu: int) -> tuple[int, ...]:
        coords, stride = [], 1
        for dim in self.dims:
            coords.append(npu // stride % dim.npus)
            stride *= dim.npus
        return tuple(coords)

    def dimension_between(self, src: int, dst: int) -> int:
        """The dimension a message from `src` to `dst` (different NPUs) crosses: the first that differs."""
        a, b = self.address(src), self.address(dst)
        return next(d for d in range(len(self.dims)) if a[d] != b[d])

    def path_npus(self, src: int, dst: int) -> tuple[int, ...]:
        """The NPUs whose links of that dimension the message uses (a ring's intermediate ones too)."""
        d = self.dimension_between(src, dst)
        dim = self.dims[d]
        if dim.block != "Ring":
            return (src, dst)
        stride = math.prod(x.npus for x in self.dims[:d])
        a, b = self.address(src)[d], self.address(dst)[d]
        clockwise = (b - a) % dim.npus
        step = 1 if clockwise < dim.npus - clockwise else -1  # ASTRA-sim's ring takes the shorter way
        base = src - a * stride
        hops = dim.hops(a, b)
        return tuple(base + (a + step * k) % dim.npus * stride for k in range(hops + 1))

    def delay_ns(self, src: int, dst: int, size: int, bandwidth_scale: float = 1.0) -> int:
        """Congestion-unaware time of a `size`-byte message (`bandwidth_scale`: an overlay's factor)."""
        d = self.dimension_between(src, dst)
        dim = self.dims[d]
        a, b = self.address(src)[d], self.address(dst)[d]
        link = dim.hops(a, b) * dim.latency_ns
        return int(link + float(size) / (dim.bytes_per_ns * bandwidth_scale))


def read_analytical_network(path: Path) -> AnalyticalNetwork:
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        raise RunDirError(f"{path}: network file missing") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RunDirError(f"{path}: cannot be read ({exc})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:  # one line: PyYAML's own message quotes the file over several
        from astra_hetero.spec.yamlfile import describe_yaml_error  # only here: it loads the schema

        raise RunDirError(f"{path}: not YAML ({describe_yaml_error(exc, text)})") from None
    if not isinstance(data, dict):
        raise RunDirError(f"{path}: an analytical network file maps {', '.join(KEYS)} to one list each")
    missing = [key for key in KEYS if key not in data]
    if missing:
        raise RunDirError(f"{path}: {', '.join(missing)} missing (ASTRA-sim needs {', '.join(KEYS)})")
    lists = {key: _list(data[key], key, path) for key in KEYS}
    count = len(lists["topology"])
    for key in KEYS[1:]:
        if len(lists[key]) != count:
            raise RunDirError(
                f"{path}: {key} lists {len(lists[key])} values for {count} dimensions (topology)"
            )
    dims = []
    for d in range(count):
        block = lists["topology"][d]
        if block not in BLOCKS:
            raise RunDirError(
                f"{path}: topology[{d}] is {block!r}; ASTRA-sim's analytical network knows "
                f"{', '.join(BLOCKS)}"
            )
        npus = lists["npus_count"][d]
        if isinstance(npus, bool) or not isinstance(npus, int) or npus < 2:
            raise RunDirError(f"{path}: npus_count[{d}] must be an integer > 1, not {npus!r}")
        bandwidth = _number(lists["bandwidth"][d], f"bandwidth[{d}]", path)
        if bandwidth <= 0:
            raise RunDirError(f"{path}: bandwidth[{d}] must be larger than 0, not {bandwidth!r}")
        gbps = bandwidth * 8 * (1 << 30) / 1e9  # GiB/s in effect (see above), as the cluster graph's rate
        if not units.MIN_LINK_GBPS <= gbps <= units.MAX_LINK_GBPS:  # 1e-300 GB/s rounded to a 0 rate
            raise RunDirError(
                f"{path}: bandwidth[{d}] {bandwidth!r} GB/s is not a physical link rate (the cluster graph "
                f"takes {units.MIN_LINK_GBPS:g} to {units.MAX_LINK_GBPS:g} Gbit/s)"
            )
        latency = _number(lists["latency"][d], f"latency[{d}]", path)
        if not 0 <= latency <= units.NS_PER_S:  # ns; the run directory's topology takes at most 1 s
            raise RunDirError(f"{path}: latency[{d}] must be from 0 to 1e9 ns (1 s), not {latency!r}")
        dims.append(Dimension(block, npus, bandwidth, latency))
    return AnalyticalNetwork(tuple(dims))


def _list(value: Any, key: str, path: Path) -> list[Any]:
    if not isinstance(value, list) or not value:
        raise RunDirError(f"{path}: {key} must be a non-empty list, one entry per dimension")
    return value


def _number(value: Any, key: str, path: Path) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise RunDirError(f"{path}: {key} must be a number, not {value!r}")
    return float(value)


@dataclass(frozen=True)
class NetworkDelays:
    """Message times on `network`, with each NPU's links of each dimension scaled by `scales[npu][dim]`
    (a heterogeneity overlay; None: as the file says). A message runs at the slowest scale of the NPUs
    whose links it uses."""

    network: AnalyticalNetwork
    scales: tuple[tuple[float, ...], ...] | None = None

    def __call__(self, src: int, dst: int, size: int) -> int:
        if src == dst:
            return 0
        scale = 1.0
        if self.scales is not None:
            d = self.network.dimension_between(src, dst)
            scale = min(self.scales[npu][d] for npu in self.network.path_npus(src, dst))
        return self.network.delay_ns(src, dst, size, scale)
