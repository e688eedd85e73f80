"""The heterogeneity overlay (`--hetero OVERLAY.yaml`): validated like a spec — unknown keys refused,
every error naming its field — then checked against the study it is laid over (`check_overlay`).

    npu_groups:
      - {npus: "0-7", gpu: h100-sxm}            # roofline traces: this GPU's peak and memory bandwidth
      - {npus: "8-15", compute_factor: 0.5}     # any traces: half the speed (durations x 2)
      - {npus: "4-5", gpu: b200, source_gpu: h100-sxm}   # measured traces: scaled by modelled times
    links:
      - {npus: "8-15", bandwidth_factor: 0.25}  # those NPUs' links in every dimension
      - {npus: "12-15", dimension: 1, gbps: 100}
    dynamics:                                   # timed events by NPU range
      - {event: device_slowdown, npus: "0-3", factor: 0.7, start_ms: 1, end_ms: 2}
      - {event: jitter, sigma: 0.05, seed: 7}
    iterations: 1

NPU ranges are `"a-b"`, `"a"`, an integer, or a list of them; each must lie inside the job.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from astra_hetero.dynamics.events import MAX_FACTOR, SLOWEST, Millis, Seed, Sigma, Speed, span_problem
from astra_hetero.errors import SpecError
from astra_hetero.spec.catalog import gpu_catalog, normalize_key
from astra_hetero.spec.load import spec_error_from_validation
from astra_hetero.spec.types import Gbps, real, whole
from astra_hetero.spec.yamlfile import read_yaml

MAX_NPU = 1 << 20
_RANGE = re.compile(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?")


def parse_npus(value: Any) -> tuple[int, ...]:
    """NPU ids of a range: "a-b" (inclusive), "a", an integer, or a list of those."""
    items = value if isinstance(value, list) else [value]
    npus: list[int] = []
    for item in items:
        if isinstance(item, bool):
            raise ValueError(f"{item!r} is not an NPU range")
        if isinstance(item, int):
            npus.append(item)
            continue
        match = _RANGE.fullmatch(item) if isinstance(item, str) else None
        if match is None:
            raise ValueError(f'{item!r} is not an NPU range (write "0-7", "3" or a list of them)')
        first = int(match.group(1))
        last = int(match.group(2)) if match.group(2) is not None else first
        if last < first:
            raise ValueError(f"{item!r} runs backwards")
        if last >= MAX_NPU:
            raise ValueError(f"{item!r} is past any job ({MAX_NPU} NPUs)")
        npus.extend(range(first, last + 1))
    if not npus:
        raise ValueError("names no NPU")
    if min(npus) < 0:
        raise ValueError("NPU ids start at 0")
    return tuple(sorted(set(npus)))


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Npus(_Strict):
    npus: tuple[int, ...] = Field(description='NPU ids: "0-7", "3", 5, or a list of them')

    @field_validator("npus", mode="before")
    @classmethod
    def _range(cls, value: Any) -> tuple[int, ...]:
        return parse_npus(value)


class NpuGroup(_Npus):
    gpu: str | None = Field(
        None, description="a GPU preset of the catalog: its peak FLOP/s and HBM bandwidth"
    )
    source_gpu: str | None = Field(
        None, description="the GPU the traces' measured durations come from (required with gpu on them)"
    )
    compute_factor: Speed | None = Field(None, description="speed factor: 0.5 is half the speed")

    @field_validator("gpu", "source_gpu")
    @classmethod
    def _preset(cls, name: str | None) -> str | None:
        if name is None:
            return None
        key = normalize_key(name)
        if key not in gpu_catalog():
            raise ValueError(f"unknown GPU preset {name!r}; known: {', '.join(sorted(gpu_catalog()))}")
        return key

    @model_validator(mode="after")
    def _something(self) -> NpuGroup:
        if self.gpu is None and self.compute_factor is None:
            raise ValueError("give gpu, compute_factor or both")
        if self.source_gpu is not None and self.gpu is None:
            raise ValueError("source_gpu scales measured durations to gpu: give gpu too")
        return self


class LinkGroup(_Npus):
    bandwidth_factor: real(SLOWEST, MAX_FACTOR) | None = Field(  # type: ignore[valid-type]
        None, description="the NPUs' links in every dimension at this share of their rate"
    )
    dimension: whole(0, 64) | None = Field(None, description="one dimension only")  # type: ignore[valid-type]
    gbps: Gbps | None = Field(None, description="that dimension's links at this rate (Gbit/s)")  # type: ignore[valid-type]

    @model_validator(mode="after")
    def _one_way(self) -> LinkGroup:
        if (self.bandwidth_factor is None) == (self.gbps is None):
            raise ValueError("give bandwidth_factor (every dimension) or dimension with gbps")
        if (self.gbps is None) != (self.dimension is None):
            raise ValueError("dimension and gbps go together")
        return self


class _Timed(_Strict):
    start_ms: Millis = 0.0
    end_ms: Millis | None = None

    @model_validator(mode="after")
    def _order(self) -> _Timed:
        problem = "" if self.end_ms is None else span_problem(self.start_ms, self.end_ms)
        if problem:
            raise ValueError(problem)
        return self


class DeviceSlowdownEvent(_Timed, _Npus):
    event: Literal["device_slowdown"]
    factor: Speed


class JitterEvent(_Timed):
    event: Literal["jitter"]
    distribution: Literal["lognormal"] = "lognormal"
    sigma: Sigma
    seed: Seed = 0


OverlayEvent = Annotated[DeviceSlowdownEvent | JitterEvent, Field(discriminator="event")]


class Overlay(_Strict):
    npu_groups: list[NpuGroup] = Field(default_factory=list)
    links: list[LinkGroup] = Field(default_factory=list)
    dynamics: list[OverlayEvent] = Field(default_factory=list)
    iterations: whole(1, 100_000) = 1  # type: ignore[valid-type]


def load_overlay(path: Path) -> tuple[Overlay, str]:
    """The overlay in `path` and its text (recorded in the run directory)."""
    data = read_yaml(Path(path), "hetero", "overlay")
    text = Path(path).read_text()
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise SpecError("hetero", f"{path}: an overlay is a mapping (npu_groups, links, dynamics)")
    _refuse_network_events(data, path)
    try:
        return Overlay.model_validate(data), text
    except ValidationError as exc:
        error = spec_error_from_validation(exc)
        raise SpecError(f"{path}: {error.field}", error.reason) from None


def _refuse_network_events(data: dict[str, Any], path: Path) -> None:
    """Link events and background traffic need flows on links; the ASTRA-sim model prices messages on
    a network without contention, so they could not change anything: refused, saying what does."""
    events = data.get("dynamics")
    if not isinstance(events, list):
        return  # None, or not a list: the schema names it
    for i, event in enumerate(events):
        kind = event.get("event") if isinstance(event, dict) else None
        if kind in ("link_rate", "background_traffic"):
            raise SpecError(
                f"{path}: dynamics[{i}].event",
                f"{kind} needs links shared by flows, which ASTRA-sim's congestion-unaware network (the "
                "model an imported study runs under) has none of; give the NPUs' link rates in `links:`",
            )


def check_overlay(overlay: Overlay, path: Path, num_npus: int, num_dims: int) -> None:
    """NPU ranges inside the job, dimensions inside the network: errors name the field."""
    sections: list[tuple[str, list[Any]]] = [
        ("npu_groups", overlay.npu_groups),
        ("links", overlay.links),
        ("dynamics", overlay.dynamics),
    ]
    for section, items in sections:
        for i, item in enumerate(items):
            npus = getattr(item, "npus", ())
            outside = [n for n in npus if n >= num_npus]
            if outside:
                raise SpecError(
                    f"{path}: {section}[{i}].npus",
                    f"NPU {outside[0]} is outside the job (NPUs 0..{num_npus - 1})",
                )
            dimension = getattr(item, "dimension", None)
            if dimension is not None and dimension >= num_dims:
                raise SpecError(
                    f"{path}: {section}[{i}].dimension",
                    f"the network has {num_dims} dimension(s) (0..{num_dims - 1})",
                )
    seen: dict[int, int] = {}
    for i, group in enumerate(overlay.npu_groups):
        for npu in group.npus:
            if npu in seen:
                raise SpecError(
                    f"{path}: npu_groups[{i}].npus", f"NPU {npu} is also in npu_groups[{seen[npu]}]"
                )
            seen[npu] = i
