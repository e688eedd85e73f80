"""The one place where units are converted.

Conventions: time inside the package is integer nanoseconds (ASTRA-sim's cycle is 1 ns); sizes are
bytes; link rates are given in Gbit/s and converted here to bytes per nanosecond.
"""

from __future__ import annotations

import math

NS_PER_US = 1_000
NS_PER_MS = 1_000_000
NS_PER_S = 1_000_000_000
BYTES_PER_GIB = 1024**3
# Link rates a spec or a topology file may give, 1 Mbit/s to 1 Pbit/s: every real link by orders of
# magnitude (an NVLink 5 GPU moves 14.4 Tbit/s); beyond them a value is a unit slip or corruption.
MIN_LINK_GBPS = 1e-3
MAX_LINK_GBPS = 1e6


def gbps_to_bytes_per_ns(gbps: float) -> float:
    """Gbit/s to bytes per nanosecond (1 Gbit/s = 0.125 B/ns)."""
    return gbps / 8.0


def gbytes_per_s_to_gbps(gbytes_per_s: float) -> float:
    """GB/s (decimal) to Gbit/s."""
    return gbytes_per_s * 8.0


def gbps_to_gbytes_per_s(gbps: float) -> float:
    return gbps / 8.0


def gbytes_per_s_to_analytical_bandwidth(gbytes_per_s: float) -> float:
    """GB/s (decimal) to the number ASTRA-sim's analytical network YAML wants in `bandwidth`.

    That file says GB/s but the backend multiplies by 2**30 bytes, so `50` there moves 53.7 bytes/ns
    (measured: an all-gather's time grows 1 ns per 53.69 bytes); 46.57 moves the intended 50.
    """
    return gbytes_per_s * NS_PER_S / BYTES_PER_GIB


def us_to_ns(us: float) -> int:
    return round(us * NS_PER_US)


def _checked(value: float, what: str, positive: bool) -> float:
    """Writers never put a non-finite or out-of-range number into a file ns-3 or ASTRA-sim reads
    (`infms` would be read as garbage); the spec's types keep such values out, so this is a bug guard."""
    if isinstance(value, bool) or not math.isfinite(value) or value < 0 or (positive and value == 0):
        raise ValueError(
            f"{what} must be a finite {'positive' if positive else 'non-negative'} number, not {value!r}"
        )
    return value


def format_rate_gbps(gbps: float) -> str:
    """ns-3 topology rate string, e.g. 400 -> '400Gbps', 12.5 -> '12500Mbps'."""
    _checked(gbps, "a link rate", positive=True)
    if float(gbps).is_integer():
        return f"{int(gbps)}Gbps"
    mbps = gbps * 1000
    if float(mbps).is_integer():
        return f"{int(mbps)}Mbps"
    return f"{round(gbps * 1e9)}bps"


def parse_rate_to_gbps(text: str) -> float:
    """Inverse of `format_rate_gbps`; accepts bps/Kbps/Mbps/Gbps/Tbps suffixes and ns-3 `DataRate`'s
    b/s spellings (`50Mb/s`, as config.txt writes RATE_AI)."""
    scales = {"tbps": 1e3, "gbps": 1.0, "mbps": 1e-3, "kbps": 1e-6, "bps": 1e-9}
    low = text.strip().lower().replace("b/s", "bps")
    for suffix, scale in scales.items():
        if low.endswith(suffix):
            return float(low[: -len(suffix)]) * scale
    raise ValueError(f"not a link rate: {text!r} (expected e.g. 400Gbps)")


def format_delay_ns(ns: float) -> str:
    """ns-3 topology delay string in milliseconds, e.g. 500 -> '0.0005ms'."""
    _checked(ns, "a link delay", positive=False)
    return f"{ns / NS_PER_MS:.9f}".rstrip("0").rstrip(".") + "ms"


def parse_delay_to_ns(text: str) -> float:
    scales = {"ms": NS_PER_MS, "us": NS_PER_US, "ns": 1.0, "s": NS_PER_S}
    low = text.strip().lower()
    for suffix in ("ms", "us", "ns", "s"):
        if low.endswith(suffix):
            return float(low[: -len(suffix)]) * scales[suffix]
    raise ValueError(f"not a link delay: {text!r} (expected e.g. 0.0005ms)")
