"""The `dynamics:` events of a spec: validated, each with `start_ms` and an optional `end_ms`.

Times are milliseconds from the start of the run (the first iteration); an event without `end_ms` lasts
to the end of the run. Which ranks and links an event touches is resolved against the cluster in
`astra_hetero.dynamics.selection`, which also runs the checks that need the cluster.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator


def _real(low: float, high: float, *, low_open: bool = False) -> Any:
    """A finite number in [low, high] ((low, high] with `low_open`); strict, so true/false is refused.
    (Own bounds rather than `spec.types`: the spec schema imports this module.)"""
    bound = {"gt": low} if low_open else {"ge": low}
    return Annotated[float, Field(strict=True, le=high, allow_inf_nan=False, **bound)]


def _whole(low: int, high: int) -> Any:
    return Annotated[int, Field(strict=True, ge=low, le=high)]


# The bounds are shared with the run-directory reader (backends/embedded/rundir/dynamics.py).
# Slower than 1/1000 is an outage, not a slowdown: it would stretch a 1 ms kernel or transfer past
# a simulated quarter of an hour, and 1e-300 past the engine's clock. An outage is factor 0 (links).
SLOWEST = 1e-3
MAX_FACTOR = 1e3
MAX_GBPS = 1e6
# lognormal sigma 1 already draws a kernel 50x slower once in 10^4; larger ones would overflow the
# engine's integer clock for no study anyone runs
MAX_SIGMA = 1.0

Millis = _real(0.0, 1e9)
Factor = _real(0.0, MAX_FACTOR)  # 0 (a link that is down) or at least SLOWEST: checked by LinkRate
Speed = _real(SLOWEST, MAX_FACTOR)
Gbps = _real(0.0, MAX_GBPS, low_open=True)
NodeIndex = _whole(0, 1_000_000)
RankIndex = _whole(0, 100_000_000)
Sigma = _real(0.0, MAX_SIGMA)
Seed = _whole(0, 2**63 - 1)


class _Event(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    start_ms: Millis = Field(0.0, description="when the event begins, ms from the start of the run")
    end_ms: Millis | None = Field(None, description="when it ends; None = lasts to the end of the run")

    @field_validator("end_ms")
    @classmethod
    def _after_start(cls, end_ms: float | None, info: ValidationInfo) -> float | None:
        start = info.data.get("start_ms")
        problem = "" if end_ms is None or start is None else span_problem(start, end_ms)
        if problem:
            raise ValueError(problem)
        return end_ms


def span_problem(start_ms: float, end_ms: float) -> str:
    """Why an event from `start_ms` to `end_ms` cannot run, or ''. Compared as the engine's
    integer-nanosecond clock will hold them (selection.py rounds so): end_ms 1e-9 after start_ms 0 is no
    event at all, which only the run directory's reader refused before."""
    if round(end_ms * 1e6) <= round(start_ms * 1e6):
        return (
            f"end_ms {end_ms:g} must be after start_ms {start_ms:g} by at least 1 ns (0.000001 ms), the "
            "resolution of the simulated clock"
        )
    return ""


class LinkRate(_Event):
    """Scale the rate of selected links by `factor` (0 = down)."""

    event: Literal["link_rate"]
    node_group: str | None = Field(
        None, description="whose links; required for nic and intra, optional for uplink (all leaves)"
    )
    node: NodeIndex | None = Field(None, description="node index inside its group; None = every node")
    kind: Literal["nic", "intra", "uplink"] = Field(
        description="nic: the node's NIC links; intra: its NVLink/PCIe links; uplink: leaf-spine links"
    )
    spine: NodeIndex | None = Field(None, description="uplink only: the links to this spine")
    factor: Factor = Field(description="new rate / static rate; 0 takes the links down")

    @field_validator("factor")
    @classmethod
    def _down_or_slow(cls, factor: float) -> float:
        if 0 < factor < SLOWEST:
            raise ValueError(f"must be 0 (links down) or at least {SLOWEST:g}, not {factor:g}")
        return factor

    @model_validator(mode="after")
    def _fields(self) -> LinkRate:
        if self.kind != "uplink" and self.node_group is None:
            raise ValueError(f"kind {self.kind} needs node_group")
        if self.spine is not None and self.kind != "uplink":
            raise ValueError("spine selects uplinks; it needs kind: uplink")
        return self


class DeviceSlowdown(_Event):
    """Scale the compute speed of selected GPUs by `factor` (0.5 = half speed)."""

    event: Literal["device_slowdown"]
    node_group: str | None = None
    node: NodeIndex | None = None
    ranks: list[RankIndex] | None = Field(None, min_length=1, description="explicit ranks instead of a group")
    factor: Speed = Field(description="new speed / static speed, from 0.001 up")

    @model_validator(mode="after")
    def _selection(self) -> DeviceSlowdown:
        if (self.ranks is None) == (self.node_group is None):
            raise ValueError("select GPUs by node_group (and node) or by ranks, exactly one of them")
        if self.node is not None and self.node_group is None:
            raise ValueError("node needs node_group")
        return self


class Endpoint(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    node_group: str
    node: NodeIndex = 0


class BackgroundTraffic(_Event):
    """Another tenant's flow of `gbps` between two nodes, sharing links max-min fairly."""

    event: Literal["background_traffic"]
    from_: Endpoint = Field(alias="from")
    to: Endpoint
    gbps: Gbps

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, serialize_by_alias=True)


class Jitter(_Event):
    """Random per-kernel slowdowns: each compute kernel's time is multiplied by a draw."""

    event: Literal["jitter"]
    distribution: Literal["lognormal"] = Field(
        "lognormal", description="lognormal: factor exp(N(0, sigma^2)) per kernel"
    )
    sigma: Sigma
    seed: Seed = 0


DynamicEvent = Annotated[LinkRate | DeviceSlowdown | BackgroundTraffic | Jitter, Field(discriminator="event")]

EVENT_KINDS = tuple(
    get_args(m.model_fields["event"].annotation)[0]
    for m in (LinkRate, DeviceSlowdown, BackgroundTraffic, Jitter)
)
