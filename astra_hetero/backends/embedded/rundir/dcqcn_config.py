"""What the DCQCN fluid model (`network.dcqcn`) reads from the run directory's `ns3/config.txt`: the
reaction point's timers and steps, the switches' ECN thresholds per link rate, the buffer and the
packet size, exactly the keys ASTRA-sim's ns-3 backend reads (`scratch/common.h` of astra-network-ns3).

Units as ns-3 reads them: intervals and RP_TIMER in microseconds, RATE_AI / RATE_HAI / MIN_RATE as
ns-3 `DataRate` strings (`50Mb/s`), KMIN_MAP / KMAX_MAP in KB of 1000 bytes (`SwitchMmu::ConfigEcn`
multiplies by 1000), BUFFER_SIZE in MB of 2^20 bytes (`ConfigBufferSize(buffer_size * 1024 * 1024)`).
A missing or malformed key is an error naming the file and the key.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from astra_hetero.errors import RunDirError
from astra_hetero.units import MAX_LINK_GBPS, gbps_to_bytes_per_ns, parse_rate_to_gbps

# Larger than any timer (us), size (bytes, MB) or threshold (KB) a config means; 1e308 would make the
# fluid model's times infinite and nan would pass every comparison.
MAX_VALUE = 1e12


@dataclass(frozen=True)
class EcnThresholds:
    kmin_bytes: float
    kmax_bytes: float
    pmax: float


@dataclass(frozen=True)
class DcqcnParams:
    """Rates in bytes per ns (1 Gbit/s = 0.125), times in ns, sizes in bytes."""

    alpha_resume_interval_ns: float
    rate_decrease_interval_ns: float
    clamp_target_rate: bool
    rp_timer_ns: float
    ewma_gain: float
    fast_recovery_times: int
    rate_ai: float
    rate_hai: float
    min_rate: float
    payload_bytes: int
    buffer_bytes: float
    ecn: dict[int, EcnThresholds]  # link rate in bit/s (as topology.txt gives it) -> thresholds

    def thresholds(self, rate_bps: int, source: str) -> EcnThresholds:
        try:
            return self.ecn[rate_bps]
        except KeyError:
            rates = ", ".join(f"{r / 1e9:g}G" for r in sorted(self.ecn))
            raise RunDirError(
                f"{source}: no KMIN_MAP/KMAX_MAP/PMAX_MAP entry for a link at {rate_bps / 1e9:g} Gbit/s "
                f"(entries: {rates})"
            ) from None


def read_config_values(path: Path, model: str) -> dict[str, str]:
    """config.txt's `KEY value` lines (the one reader of the file for every link model): a missing,
    unreadable or binary file is an error naming it and the `model` that reads it."""
    if not path.is_file():
        raise RunDirError(f"{path}: missing (link_model {model} reads its parameters from it)")
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        reason = "not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else exc.strerror or str(exc)
        raise RunDirError(f"{path}: cannot be read ({reason})") from None
    values: dict[str, str] = {}
    for line in text.splitlines():
        key, _, value = line.strip().partition(" ")
        if key and not key.startswith("#"):
            values[key] = value.strip()
    return values


def read_dcqcn_config(path: Path) -> DcqcnParams:
    values = read_config_values(path, "dcqcn")

    def get(key: str) -> str:
        if key not in values or not values[key]:
            raise RunDirError(f"{path}: {key} missing (link_model dcqcn needs it)")
        return values[key]

    def number(key: str, positive: bool = True) -> float:
        try:
            value = float(get(key))
        except ValueError:
            raise RunDirError(f"{path}: {key} must be a number, not {values[key]!r}") from None
        bad = value <= 0 if positive else value < 0
        if bad or not value <= MAX_VALUE:  # nan fails the comparison too
            raise RunDirError(
                f"{path}: {key} must be {'positive' if positive else 'non-negative'} and at most "
                f"{MAX_VALUE:g}, not {value:g}"
            )
        return value

    def rate(key: str) -> float:
        try:
            gbps = parse_rate_to_gbps(get(key))
        except ValueError:
            raise RunDirError(f"{path}: {key} must be a rate such as 50Mb/s, not {values[key]!r}") from None
        if not 0 <= gbps <= MAX_LINK_GBPS:  # nan and inf too
            raise RunDirError(
                f"{path}: {key} must be a rate from 0 to {MAX_LINK_GBPS:g} Gbps, not {values[key]!r}"
            )
        return gbps_to_bytes_per_ns(gbps)

    if get("CC_MODE") != "1":
        raise RunDirError(
            f"{path}: CC_MODE {values['CC_MODE']} is not DCQCN (1); link_model dcqcn models DCQCN only"
        )
    gain = number("EWMA_GAIN")
    if gain > 1:
        raise RunDirError(f"{path}: EWMA_GAIN must be in (0, 1], not {gain:g}")
    maps = {key: _rate_map(path, key, get(key)) for key in ("KMIN_MAP", "KMAX_MAP", "PMAX_MAP")}
    if not maps["KMIN_MAP"].keys() == maps["KMAX_MAP"].keys() == maps["PMAX_MAP"].keys():
        raise RunDirError(f"{path}: KMIN_MAP, KMAX_MAP and PMAX_MAP must name the same link rates")
    ecn = {
        r: EcnThresholds(maps["KMIN_MAP"][r] * 1000, maps["KMAX_MAP"][r] * 1000, maps["PMAX_MAP"][r])
        for r in maps["KMIN_MAP"]
    }
    for r, e in ecn.items():
        if e.kmin_bytes > e.kmax_bytes or not 0 <= e.pmax <= 1:
            raise RunDirError(
                f"{path}: ECN thresholds at {r / 1e9:g} Gbit/s need KMIN <= KMAX and 0 <= PMAX <= 1"
            )
    fast = number("FAST_RECOVERY_TIMES", positive=False)
    return DcqcnParams(
        alpha_resume_interval_ns=number("ALPHA_RESUME_INTERVAL") * 1e3,
        rate_decrease_interval_ns=number("RATE_DECREASE_INTERVAL") * 1e3,
        clamp_target_rate=get("CLAMP_TARGET_RATE") not in ("0", "false"),
        rp_timer_ns=number("RP_TIMER") * 1e3,
        ewma_gain=gain,
        fast_recovery_times=int(fast),
        rate_ai=rate("RATE_AI"),
        rate_hai=rate("RATE_HAI"),
        min_rate=rate("MIN_RATE"),
        payload_bytes=int(number("PACKET_PAYLOAD_SIZE")),
        buffer_bytes=number("BUFFER_SIZE") * 1024 * 1024,
        ecn=ecn,
    )


def _rate_map(path: Path, key: str, text: str) -> dict[int, float]:
    """`N rate1 value1 ... rateN valueN` (ns-3's map syntax)."""
    fields = text.split()
    try:
        count = int(fields[0])
        pairs = [(int(float(fields[1 + 2 * i])), float(fields[2 + 2 * i])) for i in range(count)]
    except (ValueError, IndexError, OverflowError):  # OverflowError: int(float("inf"))
        raise RunDirError(f"{path}: {key} must be 'N rate value ...' with N pairs, not {text!r}") from None
    if not all(rate > 0 and 0 <= value <= MAX_VALUE for rate, value in pairs):  # nan fails as well
        raise RunDirError(f"{path}: {key} needs positive rates and values from 0 to {MAX_VALUE:g}")
    if len(fields) != 1 + 2 * count:
        raise RunDirError(f"{path}: {key} says {count} entries but holds {(len(fields) - 1) / 2:g}")
    return dict(pairs)
