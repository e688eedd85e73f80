"""Number types of the spec: finite, of the right kind, within a physically sane range.

Every number in a spec goes through one of these, so an infinite, NaN, 1e300 or 1e-300 value is
rejected where it is read, with the field's path, instead of turning into a zero-time iteration, an
`infms` link delay or an overflow deep inside the generator. The ranges are deliberately generous
(they hold every real device by orders of magnitude); they exist to catch values that cannot be meant.
`true`/`false` are rejected where a number is expected (Python would read them as 1 and 0).
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import BeforeValidator, Field

from astra_hetero.units import MAX_LINK_GBPS, MIN_LINK_GBPS


def _plain_number(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError("expected a number, not true/false")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"must be a finite number, not {value}")
    return value


_NUMBER = BeforeValidator(_plain_number)


def real(low: float, high: float, *, low_open: bool = False) -> Any:
    """A finite float in [low, high] (or (low, high] with `low_open`)."""
    bound = {"gt": low} if low_open else {"ge": low}
    return Annotated[float, _NUMBER, Field(le=high, allow_inf_nan=False, **bound)]


def whole(low: int, high: int) -> Any:
    """An integer in [low, high]."""
    return Annotated[int, _NUMBER, Field(ge=low, le=high)]


# Devices. Peak TFLOP/s and TB/s of every GPU shipped so far sit well inside these bounds.
Tflops = real(1e-3, 1e5)
TbytesPerS = real(1e-3, 1e3)
Gib = real(1e-3, 1e6)
Efficiency = real(1e-6, 1.0)  # an achievable fraction of a peak
Multiplier = real(1e-3, 1e3)
Watts = real(1.0, 1e5)
Slowdown = real(0.0, 1.0)  # extra time as a fraction of the time alone

# Links. Rates from 1 Mbit/s to 1 Pbit/s; latencies up to one second.
GbytesPerS = real(1e-3, 1e5)
Gbps = real(MIN_LINK_GBPS, MAX_LINK_GBPS)
LatencyNs = real(0.0, 1e9)
Oversubscription = real(1.0, 1e3)
Probability = real(0.0, 1.0)

# ns-3 / DCQCN parameters.
Microseconds = real(1e-3, 1e9)
KernelOverheadUs = real(0.0, 1e3)  # a fixed cost per kernel may be zero
Megahertz = real(1.0, 1e5)
Mbps = real(1e-3, 1e9)
Kilobytes = real(1e-3, 1e9)
Gain = real(1e-9, 1.0, low_open=True)  # DCQCN's g: a fraction, often 1/256
MarkingProbability = real(0.0, 1.0, low_open=True)

# Sizes and counts. Upper bounds stop absurd values here; the work they imply is bounded separately
# (astra_hetero.bounds) by limits a user can raise.
Mib = real(1e-3, 1e6)
Seconds = real(1e-3, 1e8)
Count = whole(1, 1_000_000)
SmallCount = whole(1, 100_000)
BatchSize = whole(1, 10**15)
ModelDim = whole(1, 100_000_000)
Bytes = whole(1, 1_000_000_000)
Iterations = whole(1, 100_000)  # back-to-back training iterations of one run
